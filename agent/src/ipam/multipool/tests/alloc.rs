//! §4.4: allocation, pending allocations, release, skip-masquerade.

use super::*;

fn pending(m: &mut MultiPoolManager, pool: &str, now: Instant) -> (u32, u32) {
    let d = m.demand(now).get(pool).copied().unwrap_or_default();
    (d.ipv4_addrs, d.ipv6_addrs)
}

#[test]
fn pool_not_ready_texts_and_pending() {
    let mut m = manager();
    let err = next(&mut m, "default/a", "mars", Family::V4).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to allocate from pool \"mars\" (family ipv4): pool not (yet) available"
    );
    assert!(err.is_pool_not_ready());
    let err = m
        .allocate_ip(ip("fd00::5"), "default/b", "mars", t0())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to reserve IP fd00::5 from pool \"mars\" (family ipv6): pool not (yet) available"
    );
    assert!(err.is_pool_not_ready());
    assert_eq!(pending(&mut m, "mars", t0()), (1, 1));
    // A retry by the same owner refreshes, it does not count twice.
    next(&mut m, "default/a", "mars", Family::V4).unwrap_err();
    assert_eq!(pending(&mut m, "mars", t0()), (1, 1));
    next(&mut m, "default/c", "mars", Family::V4).unwrap_err();
    assert_eq!(pending(&mut m, "mars", t0()), (2, 1));
    // Success clears the owner's entry.
    m.upsert_node(&[entry("mars", &["10.0.0.0/30"])], 0);
    next(&mut m, "default/a", "mars", Family::V4).unwrap();
    assert_eq!(pending(&mut m, "mars", t0()), (2, 1)); // 1 in use + 1 pending
    next(&mut m, "default/c", "mars", Family::V4).unwrap();
    assert_eq!(pending(&mut m, "mars", t0()), (2, 1)); // 2 in use
}

#[test]
fn exhausted_records_pending() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.0.0/32"])], 0);
    next(&mut m, "a", "p", Family::V4).unwrap();
    let err = next(&mut m, "b", "p", Family::V4).unwrap_err();
    assert_eq!(err, MultiPoolError::Exhausted);
    assert_eq!(err.to_string(), "all CIDR ranges are exhausted");
    assert_eq!(pending(&mut m, "p", t0()), (2, 0));
}

#[test]
fn pending_ttl_expiry() {
    let mut m = manager();
    next(&mut m, "a", "p", Family::V4).unwrap_err();
    // Expiry is t0 + 5m; purged only once now is past it.
    let cases = [(0u64, (1, 0)), (299, (1, 0)), (300, (1, 0)), (301, (0, 0))];
    for (secs, want) in cases {
        let mut copy = m.clone();
        assert_eq!(pending(&mut copy, "p", at(secs)), want, "t0+{secs}s");
    }
    // A retry at t0+4m pushes the expiry to t0+9m.
    m.allocate_next(
        "a",
        "p",
        Family::V4,
        &never_skip_masquerade,
        &mut zero(),
        at(240),
    )
    .unwrap_err();
    assert_eq!(pending(&mut m, "p", at(500)), (1, 0));
    assert_eq!(pending(&mut m, "p", at(541)), (0, 0));
    assert_eq!(PENDING_ALLOCATION_TTL, Duration::from_mins(5));
}

#[test]
fn random_free_ip_in_first_usable_cidr() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.0.0/29", "10.0.1.0/29"])], 0);
    let cases = [(4u64, "10.0.0.5"), (4, "10.0.0.6"), (4, "10.0.0.1")];
    for (offset, want) in cases {
        let got = m
            .allocate_next(
                "o",
                "p",
                Family::V4,
                &never_skip_masquerade,
                &mut seq(&[offset]),
                t0(),
            )
            .unwrap();
        assert_eq!(got.ip, ip(want));
        assert_eq!(got.pool, "p");
    }
}

#[test]
fn allocate_ip_errors() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.0.0/30", "fd00::/126"])], 0);
    m.allocate_ip(ip("10.0.0.1"), "a", "p", t0()).unwrap();
    let cases = [
        ("10.0.0.1", "provided IP is already allocated"),
        ("10.9.9.9", "IP 10.9.9.9 not in range of any CIDR"),
        ("fd00:1::1", "IP fd00:1::1 not in range of any CIDR"),
        (
            "10.0.0.3",
            "provided IP is not in the valid range. The range of valid IPs is 10.0.0.0/30",
        ),
    ];
    for (addr, want) in cases {
        let err = m.allocate_ip(ip(addr), "b", "p", t0()).unwrap_err();
        assert_eq!(err.to_string(), want, "{addr}");
    }
    // Failed reservations count as pending, like failed allocations.
    assert_eq!(pending(&mut m, "p", t0()), (2, 1));
}

#[test]
fn release_texts() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.0.0/30"])], 0);
    let err = m.release_ip(ip("10.0.0.1"), "nope").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to release IP 10.0.0.1 of unknown pool \"nope\" (family ipv4)"
    );
    // Unknown addresses are a silent no-op.
    m.release_ip(ip("10.0.0.2"), "p").unwrap();
    m.release_ip(ip("10.7.0.1"), "p").unwrap();
    let got = next(&mut m, "a", "p", Family::V4).unwrap();
    m.release_ip(got, "p").unwrap();
    assert_eq!(m.usage("p", Family::V4).unwrap().used, 0);
    assert_eq!(m.allocated(Family::V4).get("p"), Some(&vec![]));
}

#[test]
fn skip_masquerade_lookup() {
    let lookup = |pool: &str| match pool {
        "mars" => Ok(true),
        "default" => Ok(false),
        other => Err(PoolNotFound {
            pool: other.to_owned(),
        }),
    };
    let mut m = manager();
    m.upsert_node(
        &[
            entry("mars", &["10.0.0.0/29"]),
            entry("default", &["10.1.0.0/29"]),
            entry("venus", &["10.2.0.0/29"]),
        ],
        0,
    );
    let cases = [("mars", Ok(true)), ("default", Ok(false))];
    for (pool, want) in cases {
        let got = m.allocate_next("o", pool, Family::V4, &lookup, &mut zero(), t0());
        assert_eq!(got.map(|a| a.skip_masquerade), want, "{pool}");
    }
    let err = m
        .allocate_next("o", "venus", Family::V4, &lookup, &mut zero(), t0())
        .unwrap_err();
    assert_eq!(
        err,
        MultiPoolError::SkipMasquerade {
            source: PoolNotFound {
                pool: "venus".into()
            }
        },
        "the lookup's typed error is kept"
    );
    assert_eq!(
        err.to_string(),
        "IP pool 'venus' not found in stateDB table"
    );
    assert_eq!(pending(&mut m, "venus", t0()), (1, 0));
    assert_eq!(m.usage("venus", Family::V4).unwrap().used, 0);
    // Specific addresses never carry skip-masquerade (the lookup is not consulted).
    let got = m.allocate_ip(ip("10.0.0.4"), "r", "mars", t0()).unwrap();
    assert!(!got.skip_masquerade);
}

use super::*;
use crate::ipam::testing::seq;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn entry(owner: &str, resource: &str) -> AllocationIp {
    AllocationIp {
        owner: owner.to_owned(),
        resource: resource.to_owned(),
    }
}

/// `spec.ipam.pool` from `(key, owner, resource)`.
#[expect(
    clippy::unnecessary_wraps,
    reason = "update_node takes the field as optional"
)]
fn pool(entries: &[(&str, &str, &str)]) -> Option<BTreeMap<String, AllocationIp>> {
    Some(
        entries
            .iter()
            .map(|&(k, o, r)| (k.to_owned(), entry(o, r)))
            .collect(),
    )
}

fn release(entries: &[(&str, ReleaseState)]) -> BTreeMap<String, ReleaseState> {
    entries.iter().map(|&(k, s)| (k.to_owned(), s)).collect()
}

use ReleaseState::{
    DoNotRelease as Dnr, MarkedForRelease as Marked, ReadyForRelease as Ready, Released,
};

#[test]
fn release_handshake_answers() {
    let spec = pool(&[
        ("10.0.0.1", "", "eni-1"),
        ("10.0.0.2", "", "eni-1"),
        ("10.0.0.3", "", "eni-1"),
        ("10.0.0.4", "", "eni-1"),
    ]);
    // (state sent by the operator, allocated locally?, expected answer; None = key deleted)
    let cases = [
        ("10.0.0.1", Marked, true, Some(Dnr), true),
        ("10.0.0.2", Marked, false, Some(Ready), true),
        ("10.0.0.3", Ready, false, Some(Ready), false),
        ("10.0.0.4", Dnr, true, Some(Dnr), false),
        ("10.0.0.4", Released, false, Some(Released), false),
        ("10.0.0.9", Released, false, None, true),
        ("10.0.0.9", Marked, false, Some(Dnr), true),
        ("10.0.0.9", Ready, false, Some(Ready), false),
        ("not-an-ip", Marked, false, Some(Dnr), true),
        ("not-an-ip", Released, false, None, true),
    ];
    for (key, sent, allocated, want, changed) in cases {
        let mut a = CrdAllocator::new(IpamMode::Azure);
        a.update_node(spec.clone(), BTreeMap::new());
        if allocated {
            a.allocate(ip(key), "default/pod").unwrap();
        }
        let got_changed = a.update_node(spec.clone(), release(&[(key, sent)]));
        assert_eq!(a.release_ips().get(key).copied(), want, "{key} {sent:?}");
        assert_eq!(got_changed, changed, "{key} {sent:?}");
    }
}

#[test]
fn mark_for_release_without_allocations() {
    // Like Cilium's TestMarkForReleaseNoAllocate: nothing allocated, so every marked IP in
    // the pool is ready for release, answered once, and none of them is handed out again.
    let spec = pool(&[
        ("1.1.1.1", "", ""),
        ("1.1.1.2", "", ""),
        ("1.1.1.3", "", ""),
    ]);
    let mut a = CrdAllocator::new(IpamMode::Crd);
    let marked = release(&[("1.1.1.1", Marked), ("1.1.1.2", Marked)]);
    assert!(a.update_node(spec.clone(), marked));
    let answered = a.release_ips();
    assert_eq!(answered, release(&[("1.1.1.1", Ready), ("1.1.1.2", Ready)]));
    assert!(!a.update_node(spec.clone(), answered));
    for _ in 0..2 {
        let got = a.allocate_next("default/p", Family::V4, &mut seq(&[0]));
        assert_eq!(got.map(|r| r.ip), Ok(ip("1.1.1.3")));
        a.release(ip("1.1.1.3")).unwrap();
    }
    assert!(a.minimum_reached(3));
    assert_eq!(a.num_available(), 1);
}

#[test]
fn handshake_is_skipped_without_a_pool() {
    let mut a = CrdAllocator::new(IpamMode::Crd);
    let sent = release(&[("10.0.0.9", Released), ("10.0.0.8", Marked)]);
    assert!(!a.update_node(None, sent.clone()));
    assert_eq!(a.release_ips(), sent);
}

#[test]
fn allocate_checks_in_order() {
    let spec = pool(&[("10.0.0.1", "", ""), ("10.0.0.2", "", "")]);
    let mut a = CrdAllocator::new(IpamMode::Crd);
    assert_eq!(
        a.allocate(ip("10.0.0.1"), "o").unwrap_err().to_string(),
        "CiliumNode for own node is not available"
    );
    a.update_node(None, BTreeMap::new());
    assert_eq!(
        a.allocate(ip("10.0.0.1"), "o").unwrap_err().to_string(),
        "No IPs available"
    );
    a.update_node(spec.clone(), release(&[("10.0.0.2", Ready)]));
    a.allocate(ip("10.0.0.1"), "o").unwrap();
    let cases = [
        ("10.0.0.1", "IP already in use"),
        ("10.0.0.2", "IP not available, marked or ready for release"),
        ("10.0.0.3", "IP 10.0.0.3 is not available"),
    ];
    for (addr, want) in cases {
        assert_eq!(
            a.allocate(ip(addr), "o").unwrap_err().to_string(),
            want,
            "{addr}"
        );
    }
    assert!(
        a.allocate(ip("10.0.0.3"), "o")
            .unwrap_err()
            .is_not_in_pool(ip("10.0.0.3"))
    );
    assert!(
        !a.allocate(ip("10.0.0.3"), "o")
            .unwrap_err()
            .is_not_in_pool(ip("10.0.0.4"))
    );
    // "already in use" is checked before the node.
    a.remove_node();
    assert_eq!(
        a.allocate(ip("10.0.0.1"), "o").unwrap_err().to_string(),
        "IP already in use"
    );
    assert_eq!(
        a.allocate_next("o", Family::V4, &mut seq(&[]))
            .unwrap_err()
            .to_string(),
        "CiliumNode for own node is not available"
    );
}

#[test]
fn allocate_next_skips_and_picks_randomly() {
    let spec = pool(&[
        ("10.0.0.1", "", "eni-1"),
        ("10.0.0.2", "", "eni-1"),               // allocated below
        ("10.0.0.3", "default/pinned", "eni-1"), // owned
        ("10.0.0.4", "", "eni-2"),               // marked for release
        ("10.0.0.5", "", "eni-2"),
        ("10.0.0.6", "", "eni-2"), // do-not-release: still allocatable
        ("fd00::1", "", "eni-1"),  // other family
        ("garbage", "", "eni-1"),  // unparsable
    ]);
    let cases = [
        (0u64, "10.0.0.1"),
        (1, "10.0.0.5"),
        (2, "10.0.0.6"),
        (5, "10.0.0.6"),
    ];
    for (pick, want) in cases {
        let mut a = CrdAllocator::new(IpamMode::Azure);
        a.update_node(
            spec.clone(),
            release(&[("10.0.0.4", Marked), ("10.0.0.6", Dnr)]),
        );
        a.allocate(ip("10.0.0.2"), "x").unwrap();
        let got = a
            .allocate_next("default/pod", Family::V4, &mut seq(&[pick]))
            .unwrap();
        assert_eq!(got.ip, ip(want), "pick {pick}");
        let resource = if want == "10.0.0.1" { "eni-1" } else { "eni-2" };
        assert_eq!(got.info, entry("default/pod", resource));
    }
}

#[test]
fn exhaustion_texts_per_mode() {
    let spec = pool(&[("10.0.0.1", "", ""), ("fd00::1", "", "")]);
    let cases = [
        (
            IpamMode::Crd,
            "no IPs currently available on the node, allocation will be retried once IPs are added to CiliumNode spec.ipam.pool",
        ),
        (
            IpamMode::Azure,
            "no IPs currently available on the node, allocation will be retried once Cilium Operator allocates more IPs",
        ),
        (
            IpamMode::AlibabaCloud,
            "no IPs currently available on the node, allocation will be retried once Cilium Operator allocates more IPs",
        ),
    ];
    for (mode, want) in cases {
        let mut a = CrdAllocator::new(mode);
        a.update_node(spec.clone(), BTreeMap::new());
        a.allocate_next("a", Family::V4, &mut seq(&[])).unwrap();
        let err = a.allocate_next("b", Family::V4, &mut seq(&[])).unwrap_err();
        assert_eq!(err.to_string(), want, "{mode}");
        assert_eq!(
            a.allocate_next("c", Family::V6, &mut seq(&[])).unwrap().ip,
            ip("fd00::1")
        );
        a.update_node(None, BTreeMap::new());
        assert_eq!(
            a.allocate_next("d", Family::V4, &mut seq(&[]))
                .unwrap_err()
                .to_string(),
            want
        );
    }
}

#[test]
fn crd_mode_static_pin() {
    let spec = pool(&[
        ("10.0.0.1", "", ""),
        ("10.0.0.7", "default/pinned", "r"),
        ("fd00::7", "default/pinned", "r"),
    ]);
    // (mode, owner, release state of the pinned IP, expected IP or error)
    let cases = [
        (IpamMode::Crd, "default/pinned", None, Ok("10.0.0.7")),
        (IpamMode::Crd, "default/pinned", Some(Ready), Ok("10.0.0.7")),
        (IpamMode::Crd, "default/other", None, Ok("10.0.0.1")),
        (IpamMode::Crd, "", None, Ok("10.0.0.1")),
        (IpamMode::Azure, "default/pinned", None, Ok("10.0.0.1")),
    ];
    for (mode, owner, state, want) in cases {
        let mut a = CrdAllocator::new(mode);
        let rel = state
            .map(|s| release(&[("10.0.0.7", s)]))
            .unwrap_or_default();
        a.update_node(spec.clone(), rel);
        let got = a
            .allocate_next(owner, Family::V4, &mut seq(&[0]))
            .map(|r| r.ip);
        assert_eq!(got, want.map(ip), "{mode} {owner:?} {state:?}");
    }
    // The pin is returned again even though it is already allocated.
    let mut a = CrdAllocator::new(IpamMode::Crd);
    a.update_node(spec.clone(), BTreeMap::new());
    for _ in 0..2 {
        let got = a
            .allocate_next("default/pinned", Family::V4, &mut seq(&[]))
            .unwrap();
        assert_eq!(got.ip, ip("10.0.0.7"));
        assert_eq!(got.info, entry("default/pinned", "r"));
    }
    assert_eq!(
        a.allocate_next("default/pinned", Family::V6, &mut seq(&[]))
            .unwrap()
            .ip,
        ip("fd00::7")
    );
}

#[test]
fn used_release_and_vanished_ips() {
    let mut a = CrdAllocator::new(IpamMode::Azure);
    a.update_node(
        pool(&[("10.0.0.1", "", "nic-1"), ("fd00::1", "", "nic-2")]),
        BTreeMap::new(),
    );
    a.allocate(ip("10.0.0.1"), "default/a").unwrap();
    a.allocate_next("default/b", Family::V6, &mut seq(&[]))
        .unwrap();
    let want_used: BTreeMap<String, AllocationIp> = [
        ("10.0.0.1".to_owned(), entry("default/a", "nic-1")),
        ("fd00::1".to_owned(), entry("default/b", "nic-2")),
    ]
    .into();
    assert_eq!(a.used(), want_used);
    // 10.0.0.1 leaves the pool: still used, releasable, never handed out again.
    a.update_node(pool(&[("fd00::1", "", "nic-2")]), BTreeMap::new());
    assert_eq!(a.used(), want_used);
    assert_eq!(a.status(Family::V4), "1/0 allocated");
    assert_eq!(a.status(Family::V6), "1/1 allocated");
    a.release(ip("10.0.0.1")).unwrap();
    assert_eq!(
        a.release(ip("10.0.0.1")).unwrap_err().to_string(),
        "IP 10.0.0.1 is not allocated"
    );
    assert_eq!(
        a.allocate(ip("10.0.0.1"), "x").unwrap_err().to_string(),
        "IP 10.0.0.1 is not available"
    );
    assert!(a.allocate_next("x", Family::V4, &mut seq(&[])).is_err());
    assert_eq!(a.used().len(), 1);
}

#[test]
fn required_and_minimum() {
    let cases = [
        (3, 5, true, 3),
        (0, 5, true, 5),
        (0, 0, true, 2),
        (0, 0, false, 1),
        (4, 0, false, 4),
    ];
    for (min, pre, health, want) in cases {
        assert_eq!(required_ips(min, pre, health), want, "{min} {pre} {health}");
    }
    let mut a = CrdAllocator::new(IpamMode::Crd);
    assert!(!a.minimum_reached(1));
    a.update_node(None, BTreeMap::new());
    assert!(!a.minimum_reached(0));
    // Raw entries count: the unparsable key and the handshake IP included.
    a.update_node(
        pool(&[
            ("10.0.0.1", "", ""),
            ("10.0.0.2", "", ""),
            ("bogus", "", ""),
        ]),
        release(&[("10.0.0.2", Ready)]),
    );
    assert!(a.minimum_reached(3));
    assert!(!a.minimum_reached(4));
    assert_eq!(a.num_available(), 1);
    assert_eq!(a.capacity(Family::V4), 2);
    assert_eq!(a.capacity(Family::V6), 0);
}

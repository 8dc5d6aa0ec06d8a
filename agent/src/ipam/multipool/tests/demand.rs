//! §4.5: demand and `requested`.

use super::*;
use crate::{
    crd::ipam::{IpamPoolDemand, IpamPoolRequest},
    ipam::multipool::demand::{linear_pre_alloc, needed_ip_ceil},
};

fn req(pool: &str, v4: u32, v6: u32) -> IpamPoolRequest {
    IpamPoolRequest {
        pool: pool.to_owned(),
        needed: IpamPoolDemand {
            ipv4_addrs: v4,
            ipv6_addrs: v6,
        },
    }
}

#[test]
fn needed_ip_ceil_and_linear() {
    // (x = inUse + pending, p = preAlloc, neededIPCeil, linear)
    let cases = [
        (0, 8, 8, 8),
        (1, 8, 16, 9),
        (7, 8, 16, 15),
        (8, 8, 16, 16),
        (9, 8, 24, 17),
        (15, 16, 32, 31),
        (16, 16, 32, 32),
        (17, 16, 48, 33),
        (0, 16, 16, 16),
        (5, 0, 5, 5),
        (0, 0, 0, 0),
    ];
    for (x, p, ceil, linear) in cases {
        assert_eq!(needed_ip_ceil(x, p), ceil, "ceil({x}, {p})");
        assert_eq!(linear_pre_alloc(x, p), linear, "linear({x}, {p})");
    }
}

#[test]
fn in_use_plus_pending_plus_pre_alloc() {
    let mut m = MultiPoolManager::new(config(true, true, &[("default", 8), ("jupiter", 4)]));
    m.upsert_node(
        &[
            entry("default", &["10.0.0.0/24", "fd00::/120"]),
            entry("mars", &["10.1.0.0/24"]),
            entry("idle", &["10.2.0.0/24"]),
        ],
        0,
    );
    for i in 0..3 {
        next(&mut m, &format!("d{i}"), "default", Family::V4).unwrap();
        next(&mut m, &format!("m{i}"), "mars", Family::V4).unwrap();
    }
    next(&mut m, "d9", "default", Family::V6).unwrap();
    // Two pending v4 allocations on "default" (failed reservations of addresses outside its
    // CIDRs) and one pending v6 allocation on a pool not known yet.
    m.allocate_ip(ip("10.9.0.1"), "p1", "default", t0())
        .unwrap_err();
    m.allocate_ip(ip("10.9.0.2"), "p2", "default", t0())
        .unwrap_err();
    next(&mut m, "s1", "saturn", Family::V6).unwrap_err();
    let got = m.requested(t0());
    assert_eq!(
        got,
        vec![
            req("default", 16, 16), // v4: 3 + 2 = 5 → 16; v6: 1 → 16
            req("jupiter", 4, 4),   // pre-alloc only: 0 → 4
            req("mars", 3, 0),      // no pre-alloc: in use only
            req("saturn", 0, 1),    // pending only
        ]
    );
    // "idle" has zero demand in both families: omitted.
    assert!(m.demand(t0()).contains_key("idle"));
}

#[test]
fn pre_alloc_applies_to_enabled_families_only() {
    let mut m = MultiPoolManager::new(config(true, false, &[("default", 8)]));
    m.upsert_node(&[entry("default", &["10.0.0.0/24"])], 0);
    next(&mut m, "a", "default", Family::V4).unwrap();
    assert_eq!(m.requested(t0()), vec![req("default", 16, 0)]);
    let json = serde_json::to_string(&m.requested(t0())).unwrap();
    assert_eq!(json, r#"[{"pool":"default","needed":{"ipv4-addrs":16}}]"#);
}

#[test]
fn linear_pre_alloc_for_eni() {
    let mut m = MultiPoolManager::new(MultiPoolConfig::eni(true, false));
    m.upsert_node(&[entry("default", &["10.0.0.0/24"])], 0);
    for i in 0..3 {
        next(&mut m, &format!("o{i}"), "default", Family::V4).unwrap();
    }
    assert_eq!(m.requested(t0()), vec![req("default", 11, 0)]);
}

#[test]
fn spec_pre_allocate_overrides_the_literal_default_pool() {
    // (configured pre-alloc, spec.ipam.pre-allocate, expected requested)
    type Case = (&'static [(&'static str, i32)], u32, Vec<IpamPoolRequest>);
    let cases: [Case; 4] = [
        (&[("default", 8)], 0, vec![req("default", 8, 8)]),
        (&[("default", 8)], 16, vec![req("default", 16, 16)]),
        (
            &[("dc1", 8)],
            16,
            vec![req("dc1", 8, 8), req("default", 16, 16)],
        ),
        (
            &[("default", 8), ("mars", 4)],
            2,
            vec![req("default", 2, 2), req("mars", 4, 4)],
        ),
    ];
    for (pre, spec_pre, want) in cases {
        let mut m = MultiPoolManager::new(config(true, true, pre));
        m.upsert_node(&[], spec_pre);
        assert_eq!(m.requested(t0()), want, "{pre:?} {spec_pre}");
    }
    // Once overridden, a later 0 leaves the override in place.
    let mut m = MultiPoolManager::new(config(true, true, &[("default", 8)]));
    m.upsert_node(&[], 32);
    m.upsert_node(&[], 0);
    assert_eq!(m.requested(t0()), vec![req("default", 32, 32)]);
}

#[test]
fn a_disabled_family_is_never_requested() {
    // Issue 16, finding 5: dual-stack records restored with IPv6 now off left a pending IPv6
    // allocation, and the agent wrote `ipv6-addrs` into `requested`.
    let mut m = MultiPoolManager::new(config(true, false, &[("default", 8)]));
    m.upsert_node(&[entry("default", &["10.0.0.0/24", "fd00::/120"])], 0);
    m.allocate_ip(ip("fd00::5"), "default/web [restored]", "default", t0())
        .unwrap_err();
    m.allocate_ip(ip("fd00::6"), "default/db [restored]", "blue", t0())
        .unwrap_err();
    let requested = m.requested(t0());
    assert!(
        requested.iter().all(|r| r.needed.ipv6_addrs == 0),
        "IPv6 is off, yet requested asks for IPv6 addresses: {requested:?}"
    );
    assert_eq!(requested, vec![req("default", 8, 0)], "{requested:?}");
}

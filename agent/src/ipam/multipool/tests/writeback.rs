//! §4.7: the `spec.ipam.pools` write-back.

use super::*;
use crate::crd::ipam::IpamPoolSpec;

fn allocated(m: &mut MultiPoolManager) -> Vec<IpamPoolAllocation> {
    m.pool_spec(&IpamPoolSpec::default(), t0()).spec.allocated
}

#[test]
fn allocated_is_passed_through_before_sync() {
    let mut m = MultiPoolManager::new(config(true, false, &[("default", 8)]));
    m.upsert_node(&[entry("default", &["10.0.0.0/28", "10.0.1.0/28"])], 0);
    m.restore_finished(Family::V4);
    let current = IpamPoolSpec {
        requested: vec![],
        allocated: vec![
            entry("default", &["10.0.1.0/28", "10.0.0.0/28"]),
            entry("gone", &["10.5.0.0/24"]),
        ],
    };
    let update = m.pool_spec(&current, t0());
    assert_eq!(update.spec.allocated, current.allocated);
    assert_eq!(update.spec.requested.len(), 1);
    assert!(update.changed);
    assert!(!m.pool_spec(&update.spec, t0()).changed);
}

#[test]
fn cidrs_sorted_v4_then_v6_by_prefix_length_then_address() {
    let mut m = manager();
    m.mark_synced();
    let cidrs = [
        "fd00:2::/112",
        "10.0.4.0/24",
        "fd00:1::/120",
        "10.0.2.0/23",
        "10.0.8.0/25",
        "fd00:3::/112",
        "10.0.1.0/24",
    ];
    let mut mars = entry("mars", &["10.9.0.0/30"]);
    mars.allow_last_ip = true;
    m.upsert_node(&[mars, entry("default", &cidrs)], 0);
    let mut want_mars = entry("mars", &["10.9.0.0/30"]);
    want_mars.allow_last_ip = true;
    let want = vec![
        entry(
            "default",
            &[
                "10.0.2.0/23",
                "10.0.1.0/24",
                "10.0.4.0/24",
                "10.0.8.0/25",
                "fd00:2::/112",
                "fd00:3::/112",
                "fd00:1::/120",
            ],
        ),
        want_mars,
    ];
    assert_eq!(allocated(&mut m), want);
    let json = serde_json::to_string(&want[1]).unwrap();
    assert_eq!(
        json,
        r#"{"pool":"mars","allowLastIP":true,"cidrs":["10.9.0.0/30"]}"#
    );
}

#[test]
fn excess_cidrs_released_only_after_restore() {
    let mut m = MultiPoolManager::new(config(true, false, &[("default", 8)]));
    m.mark_synced();
    let spec = entry("default", &["10.0.0.0/28", "10.0.1.0/28", "10.0.2.0/28"]);
    m.upsert_node(std::slice::from_ref(&spec), 0);
    // Restore not finished: nothing is released.
    assert_eq!(allocated(&mut m), vec![spec.clone()]);
    m.restore_finished(Family::V4);
    // demand 8, 0 in use: keep 8 free. 42 free; the walk goes in reverse.
    assert_eq!(allocated(&mut m), vec![entry("default", &["10.0.0.0/28"])]);
    assert_eq!(
        m.released_cidrs("default", Family::V4),
        nets(&["10.0.1.0/28", "10.0.2.0/28"])
    );
    // The operator has not caught up: released CIDRs still in the spec stay released.
    m.upsert_node(std::slice::from_ref(&spec), 0);
    assert_eq!(
        order(&m, "default", Family::V4),
        vec![(net("10.0.0.0/28"), false)]
    );
    // Gone from the spec: forgotten.
    m.upsert_node(&[entry("default", &["10.0.0.0/28"])], 0);
    assert!(m.released_cidrs("default", Family::V4).is_empty());
}

#[test]
fn in_use_cidrs_are_never_released() {
    let mut m = MultiPoolManager::new(config(true, false, &[("default", 8)]));
    m.mark_synced();
    m.restore_finished(Family::V4);
    m.upsert_node(
        &[entry(
            "default",
            &["10.0.0.0/28", "10.0.1.0/28", "10.0.2.0/28"],
        )],
        0,
    );
    m.allocate_ip(ip("10.0.2.5"), "a", "default", t0()).unwrap();
    // demand: 1 in use → 16; keep 15 free. Total free 41: 10.0.1.0 goes (27 left), then
    // 10.0.0.0 would leave 13 < 15: kept.
    assert_eq!(
        allocated(&mut m),
        vec![entry("default", &["10.0.0.0/28", "10.0.2.0/28"])]
    );
}

#[test]
fn released_cidrs_are_reclaimed_when_short() {
    let mut m = MultiPoolManager::new(config(true, false, &[("default", 8)]));
    m.mark_synced();
    m.restore_finished(Family::V4);
    m.upsert_node(
        &[entry(
            "default",
            &["10.0.0.0/28", "10.0.2.0/28", "10.0.1.0/28"],
        )],
        0,
    );
    assert_eq!(allocated(&mut m), vec![entry("default", &["10.0.0.0/28"])]);
    for i in 0..10 {
        next(&mut m, &format!("o{i}"), "default", Family::V4).unwrap();
    }
    // demand: 10 in use → 24; keep 14 free, 4 free: reclaim in (address, bits) order.
    assert_eq!(
        allocated(&mut m),
        vec![entry("default", &["10.0.0.0/28", "10.0.1.0/28"])]
    );
    assert_eq!(
        m.released_cidrs("default", Family::V4),
        nets(&["10.0.2.0/28"])
    );
    assert_eq!(
        next(&mut m, "o10", "default", Family::V4).map(|ip| ip.to_string().starts_with("10.0.0.")),
        Ok(true)
    );
}

#[test]
fn removed_in_use_cidr_is_written_back() {
    let mut m = manager();
    m.mark_synced();
    m.upsert_node(&[entry("p", &["10.0.0.0/30", "10.0.1.0/30"])], 0);
    next(&mut m, "a", "p", Family::V4).unwrap();
    m.upsert_node(&[entry("p", &["10.0.1.0/30"])], 0);
    assert_eq!(
        allocated(&mut m),
        vec![entry("p", &["10.0.0.0/30", "10.0.1.0/30"])]
    );
}

#[test]
fn pools_without_cidrs_are_dropped_and_omitted() {
    let mut m = manager();
    m.mark_synced();
    m.upsert_node(&[entry("empty", &[]), entry("p", &["10.0.0.0/30"])], 0);
    assert_eq!(m.status(), "2 IPAM pool(s) available");
    assert_eq!(allocated(&mut m), vec![entry("p", &["10.0.0.0/30"])]);
    assert_eq!(m.status(), "1 IPAM pool(s) available");
    let err = next(&mut m, "o", "empty", Family::V4).unwrap_err();
    assert!(err.is_pool_not_ready());
}

#[test]
fn changed_only_when_different() {
    let mut m = MultiPoolManager::new(config(true, true, &[("default", 8)]));
    m.mark_synced();
    m.upsert_node(&[entry("default", &["10.0.22.0/24", "fd00:22::/96"])], 0);
    let first = m.pool_spec(&IpamPoolSpec::default(), t0());
    assert!(first.changed);
    let json = serde_json::to_string(&first.spec).unwrap();
    assert_eq!(
        json,
        r#"{"requested":[{"pool":"default","needed":{"ipv4-addrs":8,"ipv6-addrs":8}}],"allocated":[{"pool":"default","cidrs":["10.0.22.0/24","fd00:22::/96"]}]}"#
    );
    let second = m.pool_spec(&first.spec, t0());
    assert!(!second.changed);
    assert_eq!(second.spec, first.spec);
}

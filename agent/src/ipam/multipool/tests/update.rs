//! §4.3: consuming `spec.ipam.pools.allocated`.

use super::*;

#[test]
fn keeps_order_appends_in_spec_order_and_drops_unused() {
    let mut m = manager();
    m.upsert_node(
        &[entry("p", &["10.0.1.0/30", "10.0.0.0/30", "fd00::/126"])],
        0,
    );
    assert_eq!(
        order(&m, "p", Family::V4),
        vec![(net("10.0.1.0/30"), false), (net("10.0.0.0/30"), false)]
    );
    assert_eq!(order(&m, "p", Family::V6), vec![(net("fd00::/126"), false)]);
    // Spec now lists new CIDRs first, a host-bits duplicate and drops nothing in use.
    m.upsert_node(
        &[entry(
            "p",
            &[
                "10.0.3.0/30",
                "10.0.2.0/30",
                "10.0.0.0/30",
                "10.0.2.1/30",
                "10.0.1.0/30",
            ],
        )],
        0,
    );
    let want = nets(&["10.0.1.0/30", "10.0.0.0/30", "10.0.3.0/30", "10.0.2.0/30"]);
    let got: Vec<IpNet> = order(&m, "p", Family::V4)
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(got, want);
    // The v6 CIDR left the spec unused: dropped.
    assert!(order(&m, "p", Family::V6).is_empty());
    // Unused CIDRs that leave the spec are dropped.
    m.upsert_node(&[entry("p", &["10.0.2.0/30"])], 0);
    assert_eq!(
        order(&m, "p", Family::V4),
        vec![(net("10.0.2.0/30"), false)]
    );
}

#[test]
fn first_cidr_with_room_is_used() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.1.0/30", "10.0.0.0/30"])], 0);
    let got: Vec<_> = (0..4)
        .map(|i| next(&mut m, &format!("o{i}"), "p", Family::V4).unwrap())
        .collect();
    assert_eq!(
        got,
        ["10.0.1.1", "10.0.1.2", "10.0.0.1", "10.0.0.2"].map(ip)
    );
    assert_eq!(
        next(&mut m, "o5", "p", Family::V4).unwrap_err().to_string(),
        "all CIDR ranges are exhausted"
    );
}

#[test]
fn cidr_removed_while_in_use() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.0.0/30", "10.0.1.0/30"])], 0);
    assert_eq!(next(&mut m, "a", "p", Family::V4), Ok(ip("10.0.0.1")));
    m.upsert_node(&[entry("p", &["10.0.1.0/30"])], 0);
    assert_eq!(
        order(&m, "p", Family::V4),
        vec![(net("10.0.0.0/30"), true), (net("10.0.1.0/30"), false)]
    );
    // No new allocations from it, but it still counts as used and can be restored into.
    assert_eq!(next(&mut m, "b", "p", Family::V4), Ok(ip("10.0.1.1")));
    let usage = m.usage("p", Family::V4).unwrap();
    assert_eq!(
        usage,
        PoolUsage {
            used: 2,
            free: 1,
            cidrs: 2
        }
    );
    assert_eq!(m.capacity(Family::V4), 1);
    m.allocate_ip(ip("10.0.0.2"), "c", "p", t0()).unwrap();
    // Released in full, it is dropped on the next upsert.
    m.release_ip(ip("10.0.0.1"), "p").unwrap();
    m.release_ip(ip("10.0.0.2"), "p").unwrap();
    m.upsert_node(&[entry("p", &["10.0.1.0/30"])], 0);
    assert_eq!(
        order(&m, "p", Family::V4),
        vec![(net("10.0.1.0/30"), false)]
    );
}

#[test]
fn removed_cidr_that_returns_takes_allocations_again() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.0.0/29"])], 0);
    next(&mut m, "a", "p", Family::V4).unwrap();
    m.upsert_node(&[entry("p", &[])], 0);
    assert_eq!(order(&m, "p", Family::V4), vec![(net("10.0.0.0/29"), true)]);
    assert!(!m.has_available_ips("p", Family::V4));
    m.upsert_node(&[entry("p", &["10.0.0.0/29"])], 0);
    assert_eq!(
        order(&m, "p", Family::V4),
        vec![(net("10.0.0.0/29"), false)]
    );
    assert!(m.has_available_ips("p", Family::V4));
}

#[test]
fn too_small_cidr_is_released() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["0.0.0.0/1", "::/1", "10.0.0.0/32"])], 0);
    assert_eq!(
        order(&m, "p", Family::V4),
        vec![(net("10.0.0.0/32"), false)]
    );
    assert_eq!(m.released_cidrs("p", Family::V4), nets(&["0.0.0.0/1"]));
    assert_eq!(m.released_cidrs("p", Family::V6), nets(&["::/1"]));
    assert_eq!(next(&mut m, "a", "p", Family::V4), Ok(ip("10.0.0.0")));
    // Gone from the spec: forgotten.
    m.upsert_node(&[entry("p", &["10.0.0.0/32"])], 0);
    assert!(m.released_cidrs("p", Family::V4).is_empty());
}

#[test]
fn first_last_ip_change_only_without_in_use_ips() {
    let mut m = manager();
    m.upsert_node(&[entry("p", &["10.0.0.0/30", "fd00::/126"])], 0);
    m.allocate_ip(ip("10.0.0.1"), "a", "p", t0()).unwrap();
    let mut open = entry("p", &["10.0.0.0/30", "fd00::/126"]);
    open.allow_first_ip = true;
    open.allow_last_ip = true;
    m.upsert_node(std::slice::from_ref(&open), 0);
    // v4 has an IP in use: settings unchanged. v6 was idle: rebuilt.
    let err = m.allocate_ip(ip("10.0.0.0"), "b", "p", t0()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "provided IP is not in the valid range. The range of valid IPs is 10.0.0.0/30"
    );
    m.allocate_ip(ip("fd00::"), "b", "p", t0()).unwrap();
    m.allocate_ip(ip("fd00::3"), "c", "p", t0()).unwrap();
    m.release_ip(ip("10.0.0.1"), "p").unwrap();
    m.upsert_node(std::slice::from_ref(&open), 0);
    m.allocate_ip(ip("10.0.0.0"), "d", "p", t0()).unwrap();
    m.allocate_ip(ip("10.0.0.3"), "e", "p", t0()).unwrap();
}

#[test]
fn pools_missing_from_the_list_are_untouched() {
    let mut m = manager();
    m.upsert_node(
        &[entry("a", &["10.0.0.0/30"]), entry("b", &["10.1.0.0/30"])],
        0,
    );
    m.upsert_node(&[entry("a", &["10.0.4.0/30"])], 0);
    assert_eq!(
        order(&m, "b", Family::V4),
        vec![(net("10.1.0.0/30"), false)]
    );
    assert_eq!(m.pool_names().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(m.status(), "2 IPAM pool(s) available");
}

#[test]
fn disabled_family_is_ignored() {
    let mut m = MultiPoolManager::new(config(true, false, &[("p", 8)]));
    m.upsert_node(&[entry("p", &["10.0.0.0/30", "fd00::/126"])], 0);
    assert!(m.usage("p", Family::V6).is_none());
    assert!(m.all_pools_ready());
    let err = next(&mut m, "a", "p", Family::V6).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to allocate from pool \"p\" (family ipv6): pool not (yet) available"
    );
}

#[test]
fn all_pools_ready_needs_every_enabled_family() {
    let mut m = MultiPoolManager::new(config(true, true, &[("default", 8), ("mars", 4)]));
    assert!(!m.all_pools_ready());
    m.upsert_node(&[entry("default", &["10.0.0.0/30", "fd00::/126"])], 0);
    assert!(!m.all_pools_ready());
    m.upsert_node(&[entry("mars", &["10.9.0.0/30"])], 0);
    assert!(!m.all_pools_ready());
    m.upsert_node(&[entry("mars", &["10.9.0.0/30", "fd00:9::/126"])], 0);
    assert!(m.all_pools_ready());
}

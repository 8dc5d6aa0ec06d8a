use super::{alloc, expect, family, net, ready_with, req, spec, texts, view};
use crate::multipool::{MultiPoolError, PoolAllocator, PoolSpec, pool::addrs_in_prefix};

#[test]
fn addrs_in_prefix_follows_first_and_last_rules() {
    let cases: &[(&str, bool, bool, u128)] = &[
        ("10.0.0.0/24", false, false, 254),
        ("f00d::/48", false, false, 1_208_925_819_614_629_174_706_174),
        ("10.0.0.0/32", false, false, 1),
        ("10.0.0.0/31", false, false, 2),
        ("10.0.0.0/30", false, false, 2),
        ("10.0.0.0/30", true, false, 3),
        ("10.0.0.0/30", false, true, 3),
        ("10.0.0.0/30", true, true, 4),
        ("f00d::/126", true, true, 4),
        ("10.0.0.0/28", false, false, 14),
        ("::/0", true, true, u128::MAX),
    ];
    for (cidr, first, last, want) in cases {
        assert_eq!(
            addrs_in_prefix(&net(cidr), *first, *last),
            *want,
            "{cidr} {first} {last}"
        );
    }
}

#[test]
fn blocks_are_carved_until_the_demand_is_covered() {
    // (needed, allowFirstIP, allowLastIP, blocks of /28)
    let cases = [
        (0, false, false, 0),
        (1, false, false, 1),
        (14, false, false, 1),
        (15, false, false, 2),
        (40, false, false, 3),
        (42, false, false, 3),
        (43, false, false, 4),
        (15, true, false, 1),
        (16, false, true, 2),
        (48, true, true, 3),
        (49, true, true, 4),
    ];
    for (needed, allow_first_ip, allow_last_ip, blocks) in cases {
        let pool = PoolSpec {
            allow_first_ip,
            allow_last_ip,
            ..spec(family(&["10.0.0.0/24"], 28), None)
        };
        let mut allocator = ready_with(&[("p", pool)]);
        allocator
            .allocate_to_node("n", &[req("p", needed, 0)], &[])
            .unwrap();
        let got = allocator.allocated_pools("n");
        let count = got.first().map_or(0, |a| a.cidrs.len());
        assert_eq!(
            count, blocks,
            "needed {needed} first {allow_first_ip} last {allow_last_ip}"
        );
        if let Some(entry) = got.first() {
            assert_eq!(
                (entry.allow_first_ip, entry.allow_last_ip),
                (allow_first_ip, allow_last_ip)
            );
            assert_eq!(entry.cidrs[0], "10.0.0.0/28");
        }
    }
}

#[test]
fn existing_blocks_count_towards_the_demand() {
    let mut allocator = ready_with(&[("p", spec(family(&["10.0.0.0/24"], 28), None))]);
    let held = [alloc("p", &["10.0.0.32/28", "10.0.0.64/28"])];
    allocator
        .allocate_to_node("n", &[req("p", 40, 0)], &held)
        .unwrap();
    assert_eq!(
        view(&allocator, "n"),
        expect(&[("p", &["10.0.0.0/28", "10.0.0.32/28", "10.0.0.64/28"])])
    );
    // Demand met: nothing more.
    let now = [alloc("p", &["10.0.0.0/28", "10.0.0.32/28", "10.0.0.64/28"])];
    allocator
        .allocate_to_node("n", &[req("p", 42, 0)], &now)
        .unwrap();
    assert_eq!(allocator.pool_stats()[0].ipv4.in_use, 3);
}

#[test]
fn cilium_pool_allocator_walkthrough() {
    let default = spec(
        family(&["10.100.0.0/16", "10.200.0.0/16"], 24),
        family(&["fd00:100::/80", "fc00:100::/80"], 96),
    );
    let mut p = PoolAllocator::new(true, true);
    p.upsert_pool("default", &default).unwrap();
    let node1 = [alloc(
        "default",
        &["10.100.10.0/24", "10.100.20.0/24", "fd00:100:0:0:0:10::/96"],
    )];
    let want1 = expect(&[(
        "default",
        &["10.100.10.0/24", "10.100.20.0/24", "fd00:100::10:0:0/96"],
    )]);
    let demand = [req("default", 10, 10)];

    let err = p.allocate_to_node("node1", &demand, &node1).unwrap_err();
    assert!(err.is_not_ready());
    assert_eq!(err.to_string(), "allocator not ready");
    assert_eq!(view(&p, "node1"), want1);
    assert!(
        p.allocate_to_node("node2", &demand, &[])
            .unwrap_err()
            .is_not_ready()
    );
    assert!(p.allocated_pools("node2").is_empty());
    let steal = [alloc("default", &["10.100.10.0/24"])];
    assert!(
        p.allocate_to_node("node3", &[], &steal)
            .unwrap_err()
            .is_not_ready()
    );
    assert!(p.allocated_pools("node3").is_empty());

    p.restore_finished();
    p.allocate_to_node("node1", &demand, &node1).unwrap();
    assert_eq!(view(&p, "node1"), want1);
    p.allocate_to_node("node2", &demand, &[]).unwrap();
    assert_eq!(
        view(&p, "node2"),
        expect(&[("default", &["10.100.0.0/24", "fd00:100::/96"])])
    );
    assert_eq!(
        texts(p.allocate_to_node("node3", &[], &steal)),
        ["unable to reuse from pool default: cidr 10.100.10.0/24 has already been allocated"]
    );
    assert!(p.allocated_pools("node3").is_empty());

    // node1 drops 10.100.10.0/24; node3 may now have it.
    let node1 = [alloc("default", &["10.100.20.0/24", "fd00:100::10:0:0/96"])];
    p.allocate_to_node("node1", &demand, &node1).unwrap();
    p.allocate_to_node("node3", &[], &steal).unwrap();
    assert_eq!(
        view(&p, "node3"),
        expect(&[("default", &["10.100.10.0/24"])])
    );

    p.release_node("node2");
    assert!(p.allocated_pools("node2").is_empty());
    let node3 = [alloc("default", &["10.100.0.0/24", "10.100.10.0/24"])];
    p.allocate_to_node("node3", &[], &node3).unwrap();
    assert_eq!(
        view(&p, "node3"),
        expect(&[("default", &["10.100.0.0/24", "10.100.10.0/24"])])
    );

    p.allocate_to_node("node1", &[req("default", 300, 10)], &node1)
        .unwrap();
    assert_eq!(
        view(&p, "node1"),
        expect(&[(
            "default",
            &["10.100.1.0/24", "10.100.20.0/24", "fd00:100::10:0:0/96"]
        )])
    );
}

#[test]
fn first_and_last_ip_settings_change_how_many_blocks() {
    // Cilium's TestPoolAllocatorAllowFirstAndLastIPs: /30 blocks, 4 addresses needed.
    let cases: &[(bool, bool, &[&str])] = &[
        (false, false, &["10.0.0.0/30", "10.0.0.4/30"]),
        (true, false, &["10.0.0.0/30", "10.0.0.4/30"]),
        (false, true, &["10.0.0.0/30", "10.0.0.4/30"]),
        (true, true, &["10.0.0.0/30"]),
    ];
    for (first, last, want) in cases {
        let pool = PoolSpec {
            allow_first_ip: *first,
            allow_last_ip: *last,
            ..spec(family(&["10.0.0.0/29"], 30), None)
        };
        let mut p = PoolAllocator::new(true, false);
        p.upsert_pool("test-pool", &pool).unwrap();
        p.restore_finished();
        p.allocate_to_node("node", &[req("test-pool", 4, 0)], &[])
            .unwrap();
        let got = p.allocated_pools("node");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].cidrs, *want);
        assert_eq!(
            (got[0].allow_first_ip, got[0].allow_last_ip),
            (*first, *last)
        );
    }
}

#[test]
fn unlisted_blocks_are_released() {
    let mut p = ready_with(&[("p", spec(family(&["10.0.0.0/26"], 28), None))]);
    p.allocate_to_node("a", &[req("p", 40, 0)], &[]).unwrap();
    assert_eq!(p.pool_stats()[0].ipv4.in_use, 3);
    p.allocate_to_node("a", &[], &[alloc("p", &["10.0.0.16/28"])])
        .unwrap();
    assert_eq!(view(&p, "a"), expect(&[("p", &["10.0.0.16/28"])]));
    assert_eq!(p.pool_stats()[0].ipv4.in_use, 1);
    p.allocate_to_node("b", &[req("p", 30, 0)], &[]).unwrap();
    // Round robin from after a's last block: .48, then .0, then .32.
    assert_eq!(
        view(&p, "b"),
        expect(&[("p", &["10.0.0.0/28", "10.0.0.32/28", "10.0.0.48/28"])])
    );
    assert_eq!(p.pool_stats()[0].ipv4.free, 0);
}

#[test]
fn output_is_sorted_by_pool_then_family_length_and_address() {
    let mut p = ready_with(&[
        (
            "zeta",
            spec(family(&["10.0.0.0/16"], 24), family(&["fd00::/104"], 120)),
        ),
        ("alpha", spec(family(&["10.1.0.0/16"], 24), None)),
    ]);
    let listed = [
        alloc(
            "zeta",
            &["fd00::100/120", "10.0.10.0/24", "fd00::/120", "10.0.2.0/24"],
        ),
        alloc("alpha", &["10.1.9.0/24"]),
    ];
    p.allocate_to_node("n", &[], &listed).unwrap();
    assert_eq!(
        view(&p, "n"),
        expect(&[
            ("alpha", &["10.1.9.0/24"]),
            (
                "zeta",
                &["10.0.2.0/24", "10.0.10.0/24", "fd00::/120", "fd00::100/120"]
            ),
        ])
    );
}

#[test]
fn unknown_or_empty_pools_fail_while_others_are_served() {
    let mut p = ready_with(&[
        ("default", spec(family(&["10.0.0.0/24"], 26), None)),
        ("v4only", spec(family(&["10.1.0.0/24"], 26), None)),
    ]);
    let demand = [
        req("nope", 10, 0),
        req("default", 10, 0),
        req("v4only", 0, 5),
        req("nope", 0, 0),
    ];
    assert_eq!(
        texts(p.allocate_to_node("n", &demand, &[])),
        [
            "failed to allocate ipv4 address for node \"n\" from pool \"nope\": cannot allocate from non-existing pool: nope (create the CiliumPodIPPool \"nope\" or stop requesting it)",
            "failed to allocate ipv6 address for node \"n\" from pool \"v4only\": pool empty",
        ]
    );
    assert_eq!(view(&p, "n"), expect(&[("default", &["10.0.0.0/26"])]));
}

#[test]
fn pool_empty_keeps_what_was_carved() {
    let mut p = ready_with(&[("p", spec(family(&["10.0.0.0/28"], 30), None))]);
    let err = p
        .allocate_to_node("n", &[req("p", 10, 0)], &[])
        .unwrap_err();
    assert!(matches!(err.errors[..], [MultiPoolError::PoolEmpty { .. }]));
    assert_eq!(
        view(&p, "n"),
        expect(&[(
            "p",
            &["10.0.0.0/30", "10.0.0.4/30", "10.0.0.8/30", "10.0.0.12/30"]
        )])
    );
}

#[test]
fn garbage_in_allocated_names_the_field_and_loses_nothing_else() {
    let mut p = ready_with(&[("p", spec(family(&["10.0.0.0/24"], 28), None))]);
    p.allocate_to_node("n", &[], &[alloc("p", &["10.0.0.16/28", "10.0.0.32/28"])])
        .unwrap();
    let listed = [alloc("p", &["10.0.0.16/28", "banana", "10.0.0.32/28"])];
    assert_eq!(
        texts(p.allocate_to_node("n", &[req("p", 20, 0)], &listed)),
        [
            "failed to parse CIDR \"banana\" of pool \"p\" in spec.ipam.pools.allocated: invalid IP address syntax"
        ]
    );
    assert_eq!(
        view(&p, "n"),
        expect(&[("p", &["10.0.0.16/28", "10.0.0.32/28"])])
    );
}

#[test]
fn overlapping_prefix_of_another_node_is_refused() {
    let mut p = ready_with(&[("p", spec(family(&["10.0.0.0/24"], 28), None))]);
    p.allocate_to_node("a", &[req("p", 1, 0)], &[]).unwrap();
    assert_eq!(
        texts(p.allocate_to_node("b", &[], &[alloc("p", &["10.0.0.0/27"])])),
        ["unable to reuse from pool p: cidr 10.0.0.0/27 has already been allocated"]
    );
    assert_eq!(
        texts(p.allocate_to_node("b", &[], &[alloc("p", &["10.9.0.0/28"])])),
        ["unable to reuse from pool p: cidr 10.9.0.0/28 is not part of the requested pool"]
    );
    assert!(p.allocated_pools("b").is_empty());
}

#[test]
fn disabled_family_is_not_carved() {
    let mut p = PoolAllocator::new(true, false);
    p.upsert_pool(
        "p",
        &spec(family(&["10.0.0.0/24"], 28), family(&["fd00::/120"], 124)),
    )
    .unwrap();
    p.restore_finished();
    p.allocate_to_node("n", &[req("p", 1, 1)], &[]).unwrap();
    assert_eq!(view(&p, "n"), expect(&[("p", &["10.0.0.0/28"])]));
}

use super::{alloc, expect, family, net, ready_with, req, spec, texts, view};
use crate::{
    cidrset::BlockStats,
    multipool::{MultiPoolError, PoolAllocator, PoolSpec, PoolStats, Warning},
};

fn mars() -> PoolSpec {
    spec(
        family(&["10.10.0.0/16", "10.20.0.0/16"], 24),
        family(&["fe00:100::/80", "fb00:200::/80"], 96),
    )
}

fn has(p: &PoolAllocator, pool: &str, cidr: &str) -> bool {
    p.pool_has_cidr(pool, &net(cidr))
}

#[test]
fn immutable_settings_are_refused_and_leave_the_pool_unchanged() {
    let mut p = PoolAllocator::new(true, true);
    p.upsert_pool("mars", &mars()).unwrap();
    let with = |f: fn(&mut PoolSpec)| {
        let mut s = mars();
        s.ipv4.as_mut().unwrap().cidrs.push(net("10.30.0.0/16"));
        f(&mut s);
        s
    };
    let cases = [
        (
            with(|s| s.ipv4.as_mut().unwrap().mask_size = 25),
            "cannot change IPv4 mask size in existing pool \"mars\"",
        ),
        (
            with(|s| s.ipv6.as_mut().unwrap().mask_size = 97),
            "cannot change IPv6 mask size in existing pool \"mars\"",
        ),
        (
            with(|s| s.ipv6 = None),
            "cannot change IPv6 mask size in existing pool \"mars\"",
        ),
        (
            with(|s| s.allow_first_ip = true),
            "cannot change allowFirstIP/allowLastIP in existing pool \"mars\"",
        ),
        (
            with(|s| s.allow_last_ip = true),
            "cannot change allowFirstIP/allowLastIP in existing pool \"mars\"",
        ),
        (
            with(|s| s.ipv4.as_mut().unwrap().cidrs.push(net("10.10.128.0/17"))),
            "pool \"mars\": requested CIDR 10.10.128.0/17 collides with clusterCIDR: 10.10.0.0/16, nodeMask: 24",
        ),
        (
            with(|s| s.ipv4.as_mut().unwrap().cidrs.push(net("fd00::/64"))),
            "pool \"mars\": CIDR is not v4 family: fd00::/64",
        ),
    ];
    for (spec, want) in cases {
        let err = p.upsert_pool("mars", &spec).unwrap_err();
        assert_eq!(err.to_string(), want);
        assert!(has(&p, "mars", "10.20.0.0/16"));
        assert!(!has(&p, "mars", "10.30.0.0/16"));
        assert!(has(&p, "mars", "fb00:200::/80"));
    }
    // CIDR changes go through.
    let changed = spec(
        family(&["10.1.0.0/16", "10.3.0.0/16", "10.10.0.0/16"], 24),
        family(&["fa00:100::/80", "fc00:200::/80", "fe00:100::/80"], 96),
    );
    assert_eq!(p.upsert_pool("mars", &changed).unwrap(), []);
    for (cidr, want) in [
        ("10.1.0.0/16", true),
        ("10.3.0.0/16", true),
        ("10.10.0.0/16", true),
        ("10.20.0.0/16", false),
        ("fa00:100::/80", true),
        ("fb00:200::/80", false),
    ] {
        assert_eq!(has(&p, "mars", cidr), want, "{cidr}");
    }
}

#[test]
fn delete_pool() {
    let mut p = PoolAllocator::new(true, true);
    p.upsert_pool("mars", &mars()).unwrap();
    let err = p.delete_pool("saturn").unwrap_err();
    assert_eq!(
        err.to_string(),
        "pool \"saturn\" requested for deletion doesn't exist"
    );
    assert_eq!(p.delete_pool("mars").unwrap(), []);
    assert!(p.pool_stats().is_empty());
    assert!(matches!(
        p.delete_pool("mars"),
        Err(MultiPoolError::PoolNotFoundForDeletion { .. })
    ));
}

#[test]
fn orphans_on_delete_and_removal_then_readoption() {
    let test_pool = spec(
        family(&["10.100.0.0/16"], 24),
        family(&["fd00:100::/80"], 96),
    );
    let v6_only = spec(family(&[], 24), family(&["fd00:100::/80"], 96));
    let mut p = ready_with(&[("test-pool", test_pool.clone())]);
    let demand = [req("test-pool", 10, 10)];
    p.allocate_to_node("node1", &demand, &[]).unwrap();
    p.allocate_to_node("node2", &demand, &[]).unwrap();
    let want1 = expect(&[("test-pool", &["10.100.0.0/24", "fd00:100::/96"])]);
    let want2 = expect(&[("test-pool", &["10.100.1.0/24", "fd00:100::1:0:0/96"])]);
    assert_eq!(view(&p, "node1"), want1);
    assert_eq!(view(&p, "node2"), want2);

    // Delete: every block becomes an orphan, still reported.
    let warnings = p.delete_pool("test-pool").unwrap();
    let in_use = |node: &str| Warning::PoolStillInUse {
        pool: "test-pool".into(),
        node: node.into(),
    };
    assert_eq!(warnings, [in_use("node1"), in_use("node2")]);
    assert_eq!(warnings[0].to_string(), "pool still in use by node");
    assert!(p.nodes.is_empty());
    assert_eq!(view(&p, "node1"), want1);
    assert_eq!(view(&p, "node2"), want2);

    // Back again: re-adopted.
    let warnings = p.upsert_pool("test-pool", &test_pool).unwrap();
    assert_eq!(warnings.len(), 4);
    assert!(warnings.iter().all(Warning::is_info));
    assert_eq!(
        warnings[0].to_string(),
        "CIDR from pool already in use by node, marking it as allocated"
    );
    assert!(p.orphans.is_empty());
    assert_eq!(p.pool_stats()[0].ipv4.in_use, 2);

    // The v4 CIDR leaves the pool: its blocks become orphans.
    let warnings = p.upsert_pool("test-pool", &v6_only).unwrap();
    let still = |node: &str, cidr: &str| Warning::CidrStillInUse {
        cidr: net(cidr),
        pool: "test-pool".into(),
        node: node.into(),
    };
    assert_eq!(
        warnings,
        [
            still("node1", "10.100.0.0/24"),
            still("node2", "10.100.1.0/24")
        ]
    );
    assert_eq!(
        warnings[0].to_string(),
        "CIDR from pool still in use by node"
    );
    assert_eq!(view(&p, "node1"), want1);

    // A new node gets v6 only.
    let err = p.allocate_to_node("node3", &demand, &[]).unwrap_err();
    assert!(matches!(err.errors[..], [MultiPoolError::PoolEmpty { .. }]));
    assert_eq!(
        view(&p, "node3"),
        expect(&[("test-pool", &["fd00:100::2:0:0/96"])])
    );

    // v4 back: orphans re-adopted before anything is carved again.
    p.upsert_pool("test-pool", &test_pool).unwrap();
    assert!(p.orphans.is_empty());
    p.allocate_to_node("node3", &demand, &[]).unwrap();
    assert_eq!(
        view(&p, "node3"),
        expect(&[("test-pool", &["10.100.2.0/24", "fd00:100::3:0:0/96"])])
    );
}

#[test]
fn unknown_pool_at_restore_keeps_orphans_until_the_pool_comes() {
    let mut p = ready_with(&[]);
    let listed = [alloc("test-pool", &["10.100.0.0/24", "fd00:100::/96"])];
    assert_eq!(
        texts(p.allocate_to_node("node1", &[req("test-pool", 10, 10)], &listed)),
        [
            "unable to find pool test-pool, prefix 10.100.0.0/24 is still allocated to the node but is marked as orphan",
            "unable to find pool test-pool, prefix fd00:100::/96 is still allocated to the node but is marked as orphan",
            "failed to allocate ipv4 address for node \"node1\" from pool \"test-pool\": cannot allocate from non-existing pool: test-pool (create the CiliumPodIPPool \"test-pool\" or stop requesting it)",
            "failed to allocate ipv6 address for node \"node1\" from pool \"test-pool\": cannot allocate from non-existing pool: test-pool (create the CiliumPodIPPool \"test-pool\" or stop requesting it)",
        ]
    );
    let want = expect(&[("test-pool", &["10.100.0.0/24", "fd00:100::/96"])]);
    assert_eq!(view(&p, "node1"), want);
    // Another pool over the same range does not take them.
    let pool = spec(
        family(&["10.100.0.0/16"], 24),
        family(&["fd00:100::/80"], 96),
    );
    assert_eq!(p.upsert_pool("another-test-pool", &pool).unwrap(), []);
    assert_eq!(p.orphans.len(), 1);
    // Their own pool does.
    assert_eq!(p.upsert_pool("test-pool", &pool).unwrap().len(), 2);
    assert!(p.orphans.is_empty());
    assert_eq!(view(&p, "node1"), want);
    p.allocate_to_node("node1", &[req("test-pool", 10, 10)], &listed)
        .unwrap();
    assert_eq!(view(&p, "node1"), want);
}

#[test]
fn shrinking_a_pool_orphans_and_unlisting_drops_the_orphans() {
    let four = spec(
        family(
            &[
                "10.0.0.0/28",
                "10.0.0.16/28",
                "10.0.0.32/28",
                "10.0.0.48/28",
            ],
            28,
        ),
        None,
    );
    let two = spec(family(&["10.0.0.0/28", "10.0.0.16/28"], 28), None);
    let mut p = ready_with(&[("test-pool", four.clone())]);
    p.allocate_to_node("node", &[req("test-pool", 48, 0)], &[])
        .unwrap();
    let all = [
        "10.0.0.0/28",
        "10.0.0.16/28",
        "10.0.0.32/28",
        "10.0.0.48/28",
    ];
    assert_eq!(view(&p, "node"), expect(&[("test-pool", &all)]));
    let warnings = p.upsert_pool("test-pool", &two).unwrap();
    assert_eq!(warnings.len(), 2);
    assert!(has(&p, "test-pool", "10.0.0.16/28"));
    assert!(!has(&p, "test-pool", "10.0.0.32/28"));
    assert_eq!(view(&p, "node"), expect(&[("test-pool", &all)]));
    // The node drops the orphans: they are forgotten, and not re-adopted later.
    p.allocate_to_node("node", &[], &[alloc("test-pool", &all[..2])])
        .unwrap();
    assert_eq!(view(&p, "node"), expect(&[("test-pool", &all[..2])]));
    assert!(p.orphans.is_empty());
    assert_eq!(p.upsert_pool("test-pool", &four).unwrap(), []);
    p.allocate_to_node("other", &[req("test-pool", 1, 0)], &[])
        .unwrap();
    assert_eq!(
        view(&p, "other"),
        expect(&[("test-pool", &["10.0.0.32/28"])])
    );
}

#[test]
fn release_node_frees_blocks_and_forgets_orphans() {
    let pool = spec(family(&["10.0.0.0/24"], 26), None);
    let mut p = ready_with(&[("p", pool)]);
    let listed = [
        alloc("p", &["10.0.0.64/26"]),
        alloc("gone", &["10.9.0.0/24"]),
    ];
    assert_eq!(texts(p.allocate_to_node("n", &[], &listed)).len(), 1);
    p.release_node("n");
    assert!(p.allocated_pools("n").is_empty());
    assert!(p.orphans.is_empty());
    assert_eq!(
        p.pool_stats(),
        [PoolStats {
            pool: "p".into(),
            ipv4: BlockStats {
                in_use: 0,
                reserved: 0,
                free: 4
            },
            ipv6: BlockStats::default(),
        }]
    );
}

#[test]
fn pools_are_independent_even_when_they_overlap() {
    // As in Cilium: two pools over one range carve it separately.
    let pool = spec(family(&["10.0.0.0/16"], 24), None);
    let mut p = ready_with(&[("a", pool.clone()), ("b", pool)]);
    p.allocate_to_node("n", &[req("a", 10, 0), req("b", 10, 0)], &[])
        .unwrap();
    assert_eq!(
        view(&p, "n"),
        expect(&[("a", &["10.0.0.0/24"]), ("b", &["10.0.0.0/24"])])
    );
}

#[test]
fn blocks_of_a_removed_cidr_still_count_towards_the_demand() {
    let old = spec(family(&["10.0.0.0/16"], 24), None);
    let migrated = spec(family(&["10.1.0.0/16"], 24), None);
    let mut p = ready_with(&[("default", old)]);
    p.allocate_to_node("node", &[req("default", 8, 0)], &[])
        .unwrap();
    assert_eq!(view(&p, "node"), expect(&[("default", &["10.0.0.0/24"])]));
    // The CIDR migration: the old CIDR leaves the pool, the node's block is an orphan.
    assert_eq!(p.upsert_pool("default", &migrated).unwrap().len(), 1);
    // Its 254 addresses still cover a demand of 8: nothing of the new CIDR is taken.
    p.allocate_to_node(
        "node",
        &[req("default", 8, 0)],
        &[alloc("default", &["10.0.0.0/24"])],
    )
    .unwrap();
    assert_eq!(view(&p, "node"), expect(&[("default", &["10.0.0.0/24"])]));
    // A demand beyond them takes a block of the new CIDR for the rest only.
    p.allocate_to_node(
        "node",
        &[req("default", 300, 0)],
        &[alloc("default", &["10.0.0.0/24"])],
    )
    .unwrap();
    assert_eq!(
        view(&p, "node"),
        expect(&[("default", &["10.0.0.0/24", "10.1.0.0/24"])])
    );
}

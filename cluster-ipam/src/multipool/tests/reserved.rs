use std::net::IpAddr;

use super::{alloc, expect, family, ready_with, req, spec, texts, view};
use crate::{
    cidrset::BlockStats,
    multipool::{MultiPoolError, PoolAllocator, PoolSpec, ReservedRange},
};

fn range(start: &str, end: &str) -> ReservedRange {
    ReservedRange {
        start: start.parse::<IpAddr>().unwrap(),
        end: end.parse::<IpAddr>().unwrap(),
    }
}

fn reserved(mut pool: PoolSpec, ranges: &[ReservedRange]) -> PoolSpec {
    pool.reserved = ranges.to_vec();
    pool
}

fn small() -> PoolSpec {
    spec(family(&["10.0.0.0/30"], 31), None)
}

#[test]
fn no_new_block_overlaps_a_reserved_range() {
    let pool = reserved(
        spec(family(&["10.0.0.0/16"], 24), family(&["fd00::/112"], 120)),
        &[
            range("10.0.0.10", "10.0.0.20"),
            range("fd00::", "fd00::1ff"),
        ],
    );
    let mut p = ready_with(&[("test-pool", pool)]);
    p.allocate_to_node("node", &[req("test-pool", 1, 1)], &[])
        .unwrap();
    assert_eq!(
        view(&p, "node"),
        expect(&[("test-pool", &["10.0.1.0/24", "fd00::200/120"])])
    );
    let stats = &p.pool_stats()[0];
    assert_eq!(
        stats.ipv4,
        BlockStats {
            in_use: 1,
            reserved: 1,
            free: 254
        }
    );
    assert_eq!(
        stats.ipv6,
        BlockStats {
            in_use: 1,
            reserved: 2,
            free: 253
        }
    );
}

#[test]
fn reserved_ranges_can_be_removed() {
    let mut p = ready_with(&[(
        "test-pool",
        reserved(small(), &[range("10.0.0.0", "10.0.0.1")]),
    )]);
    p.allocate_to_node("node1", &[req("test-pool", 1, 0)], &[])
        .unwrap();
    assert_eq!(
        view(&p, "node1"),
        expect(&[("test-pool", &["10.0.0.2/31"])])
    );
    p.upsert_pool("test-pool", &small()).unwrap();
    let held = [alloc("test-pool", &["10.0.0.2/31"])];
    p.allocate_to_node("node1", &[req("test-pool", 1, 0)], &held)
        .unwrap();
    p.allocate_to_node("node2", &[req("test-pool", 1, 0)], &[])
        .unwrap();
    assert_eq!(
        view(&p, "node2"),
        expect(&[("test-pool", &["10.0.0.0/31"])])
    );
}

#[test]
fn held_block_stays_and_is_never_reissued_once_released() {
    let mut p = ready_with(&[("test-pool", small())]);
    let demand = [req("test-pool", 1, 0)];
    p.allocate_to_node("node1", &demand, &[]).unwrap();
    assert_eq!(
        view(&p, "node1"),
        expect(&[("test-pool", &["10.0.0.0/31"])])
    );
    p.upsert_pool(
        "test-pool",
        &reserved(small(), &[range("10.0.0.0", "10.0.0.1")]),
    )
    .unwrap();
    // Still held, also when the node lists it again.
    let held = [alloc("test-pool", &["10.0.0.0/31"])];
    p.allocate_to_node("node1", &demand, &held).unwrap();
    assert_eq!(
        view(&p, "node1"),
        expect(&[("test-pool", &["10.0.0.0/31"])])
    );
    // Released (the node drops it, then is deleted): never handed out again.
    p.allocate_to_node("node1", &[], &[]).unwrap();
    p.release_node("node1");
    p.allocate_to_node("node2", &demand, &[]).unwrap();
    assert_eq!(
        view(&p, "node2"),
        expect(&[("test-pool", &["10.0.0.2/31"])])
    );
    let err = p.allocate_to_node("node3", &demand, &[]).unwrap_err();
    assert!(matches!(err.errors[..], [MultiPoolError::PoolEmpty { .. }]));
    assert!(p.allocated_pools("node3").is_empty());
}

#[test]
fn node_listing_a_reserved_block_at_restore_keeps_it() {
    let mut p = PoolAllocator::new(true, false);
    p.upsert_pool(
        "test-pool",
        &reserved(small(), &[range("10.0.0.0", "10.0.0.1")]),
    )
    .unwrap();
    let held = [alloc("test-pool", &["10.0.0.0/31"])];
    assert!(
        p.allocate_to_node("node1", &[], &held)
            .unwrap_err()
            .is_not_ready()
    );
    p.restore_finished();
    p.allocate_to_node("node1", &[req("test-pool", 1, 0)], &held)
        .unwrap();
    assert_eq!(
        view(&p, "node1"),
        expect(&[("test-pool", &["10.0.0.0/31"])])
    );
    assert_eq!(
        p.pool_stats()[0].ipv4,
        BlockStats {
            in_use: 1,
            reserved: 0,
            free: 1
        }
    );
}

#[test]
fn reserved_range_outside_the_pool_is_refused() {
    let mut p = ready_with(&[("test-pool", small())]);
    for bad in [
        range("10.0.0.2", "10.0.0.9"),
        range("10.0.0.3", "10.0.0.2"),
        range("fd00::", "fd00::1"),
    ] {
        let err = p
            .upsert_pool(
                "test-pool",
                &reserved(small(), &[range("10.0.0.0", "10.0.0.0"), bad]),
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "reserved range {bad} of pool \"test-pool\" is not an ordered range inside one of its CIDRs"
            )
        );
        assert_eq!(p.pool_stats()[0].ipv4.reserved, 0);
    }
    assert_eq!(
        texts(p.allocate_to_node("n", &[req("test-pool", 6, 0)], &[])).len(),
        1
    );
    assert_eq!(p.pool_stats()[0].ipv4.in_use, 2);
}

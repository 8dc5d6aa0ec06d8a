//! Multi-pool nodes that still hold cluster-pool `podCIDRs` (not migrated, refused, or whose
//! migration update failed): their blocks stay taken, the refusal stays in the status.

use serde_json::json;

use super::*;
use crate::multipool::{FamilySpec, PoolSpec};

fn pool(cidr: &str) -> PoolView {
    PoolView {
        name: "default".into(),
        spec: Ok(PoolSpec {
            ipv4: Some(FamilySpec {
                cidrs: vec![cidr.parse().expect("cidr")],
                mask_size: 24,
            }),
            ..PoolSpec::default()
        }),
    }
}

fn asking(name: &str, addrs: u64) -> NodeView {
    NodeView::from_json(
        &json!({"metadata": {"name": name}, "spec": {"ipam": {"pools": {
        "requested": [{"pool": "default", "needed": {"ipv4-addrs": addrs}}]}}}}),
    )
}

fn refused(name: &str, cidrs: &[&str]) -> NodeView {
    NodeView::from_json(&json!({
        "metadata": {"name": name},
        "spec": {"ipam": {"podCIDRs": cidrs}},
        "status": {"ipam": {"operator-status": {"error":
            "migration to multi-pool IPAM failed: it is refused"}}},
    }))
}

fn blocks(write: &Write) -> Vec<String> {
    match &write.spec {
        Some(SpecPart::PoolsAllocated(pools)) => {
            pools.iter().flat_map(|p| p.cidrs.clone()).collect()
        }
        other => panic!("no blocks written: {other:?}"),
    }
}

#[test]
fn pod_cidrs_kept_by_a_node_are_never_handed_to_another() {
    let mut m = NodeManager::new(Box::new(MultiPoolAllocator::new(true, false)));
    m.pool_upsert(pool("10.0.0.0/22"));
    // One /24 of the node's own, one /23 (another mask) over two blocks, one outside.
    assert_eq!(
        m.upsert(refused(
            "old",
            &["10.0.0.0/24", "10.0.2.0/23", "192.168.0.0/24"]
        )),
        None,
        "nothing to write: the refusal stays as the migration wrote it"
    );
    m.upsert(asking("new", 254));
    let writes = m.restore_finished();
    assert_eq!(blocks(&writes[0]), ["10.0.1.0/24"], "{writes:?}");
    // The pool is full now: the pinned blocks are not free.
    let write = m.upsert(asking("new", 508)).expect("a write");
    assert!(
        write
            .error
            .as_deref()
            .is_some_and(|e| e.contains("pool empty")),
        "{write:?}"
    );
}

#[test]
fn the_migration_s_refusal_stays_while_the_node_keeps_its_pod_cidrs() {
    let mut m = NodeManager::new(Box::new(MultiPoolAllocator::new(true, false)));
    m.pool_upsert(pool("10.0.0.0/16"));
    m.restore_finished();
    assert_eq!(m.upsert(refused("old", &["10.0.0.0/24"])), None);
    // Migrated (by hand or by a later pass): the block is held through the pool, the
    // refusal goes.
    let migrated = NodeView::from_json(&json!({
        "metadata": {"name": "old"},
        "spec": {"ipam": {"pools": {"allocated": [{"pool": "default", "cidrs": ["10.0.0.0/24"]}]}}},
        "status": {"ipam": {"operator-status": {"error":
            "migration to multi-pool IPAM failed: it is refused"}}},
    }));
    let write = m.upsert(migrated).expect("the error is cleared");
    assert_eq!(write.error.as_deref(), Some(""));
    // Another node still cannot get the block: now it is held, not pinned.
    let write = m.upsert(asking("new", 254)).expect("a write");
    assert_eq!(blocks(&write), ["10.0.1.0/24"]);
}

#[test]
fn a_pool_created_later_and_a_deleted_node_see_the_pins() {
    let mut m = NodeManager::new(Box::new(MultiPoolAllocator::new(true, false)));
    m.upsert(refused("old", &["10.0.0.0/24"]));
    m.restore_finished();
    m.pool_upsert(pool("10.0.0.0/23"));
    let write = m.upsert(asking("new", 254)).expect("a write");
    assert_eq!(blocks(&write), ["10.0.1.0/24"]);
    // The old node is deleted: its block is free again.
    m.delete("old");
    let write = m.upsert(asking("new", 508)).expect("a write");
    assert_eq!(blocks(&write), ["10.0.0.0/24", "10.0.1.0/24"]);
}

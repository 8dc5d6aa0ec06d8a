use serde_json::json;

use super::*;
use crate::clusterpool::{ClusterPoolConfig, FamilyConfig};

fn manager() -> NodeManager {
    let config = ClusterPoolConfig {
        ipv4: FamilyConfig {
            enabled: true,
            cidrs: vec!["10.0.0.0/22".parse().expect("cidr")],
            mask_size: 24,
        },
        ..ClusterPoolConfig::default()
    };
    NodeManager::new(Box::new(ClusterPoolAllocator::new(&config).expect("valid")))
}

fn node(name: &str, cidrs: &[&str]) -> NodeView {
    NodeView::from_json(&json!({"metadata": {"name": name}, "spec": {"ipam": {"podCIDRs": cidrs}}}))
}

#[test]
fn existing_blocks_are_kept_before_new_ones_are_handed_out() {
    let mut m = manager();
    assert_eq!(
        m.upsert(node("new", &[])),
        None,
        "postponed until the restore"
    );
    assert_eq!(
        m.upsert(node("old", &["10.0.0.0/24"])),
        None,
        "already holds it"
    );
    let writes = m.restore_finished();
    assert_eq!(
        writes,
        [Write {
            node: "new".into(),
            spec: Some(SpecPart::PodCidrs(vec!["10.0.1.0/24".into()])),
            error: None,
        }]
    );
    // The same (stale) event again writes nothing: the view already holds the write.
    assert_eq!(m.upsert(node("new", &[])), None);
}

#[test]
fn a_conflict_is_reported_in_the_status_only() {
    let mut m = manager();
    m.upsert(node("a", &["10.0.0.0/24"]));
    m.restore_finished();
    let write = m.upsert(node("b", &["10.0.0.0/24"])).expect("a write");
    assert!(
        write
            .error
            .as_deref()
            .is_some_and(|e| e.contains("10.0.0.0/24")),
        "{write:?}"
    );
    let (counts, _) = m.usage();
    assert_eq!((counts.total, counts.in_deficit), (2, 1));
}

#[test]
fn ignored_and_deleted_nodes_release_nothing_twice() {
    let mut m = manager();
    m.restore_finished();
    let a = m.upsert(node("a", &[])).expect("gets a block");
    assert_eq!(a.spec, Some(SpecPart::PodCidrs(vec!["10.0.0.0/24".into()])));
    let mut ignored = node("x", &[]);
    ignored.ignored = true;
    assert_eq!(m.upsert(ignored), None);
    assert!(m.delete("a").is_empty());
    assert!(m.delete("a").is_empty());
    let b = m.upsert(node("b", &[])).expect("gets a block");
    // Round robin: the next index, not the released one.
    assert_eq!(b.spec, Some(SpecPart::PodCidrs(vec!["10.0.1.0/24".into()])));
    assert_eq!(m.node_names().collect::<Vec<_>>(), ["b"]);
}

#[test]
fn garbage_keeps_the_allocation_and_names_the_field() {
    let mut m = manager();
    m.restore_finished();
    m.upsert(node("a", &[]));
    let bad = NodeView::from_json(
        &json!({"metadata": {"name": "a"}, "spec": {"ipam": {"podCIDRs": "x"}}}),
    );
    let write = m.upsert(bad).expect("an error write");
    assert_eq!(write.spec, None);
    assert!(
        write
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with("spec.ipam.podCIDRs:"))
    );
    // Another node does not get a's block.
    let b = m.upsert(node("b", &[])).expect("b");
    assert_eq!(b.spec, Some(SpecPart::PodCidrs(vec!["10.0.1.0/24".into()])));
}

#[test]
fn a_stale_event_does_not_release_blocks_just_given() {
    use crate::multipool::{FamilySpec, PoolSpec};
    let mut m = NodeManager::new(Box::new(MultiPoolAllocator::new(true, false)));
    let _ = m.pool_upsert(PoolView {
        name: "default".into(),
        spec: Ok(PoolSpec {
            ipv4: Some(FamilySpec {
                cidrs: vec!["10.10.0.0/24".parse().expect("cidr")],
                mask_size: 28,
            }),
            ..PoolSpec::default()
        }),
    });
    m.restore_finished();
    let wanting = |allocated: serde_json::Value| {
        NodeView::from_json(
            &json!({"metadata": {"name": "n1"}, "spec": {"ipam": {"pools": {
            "requested": [{"pool": "default", "needed": {"ipv4-addrs": 20}}],
            "allocated": allocated}}}}),
        )
    };
    let write = m.upsert(wanting(json!(null))).expect("blocks carved");
    let Some(SpecPart::PoolsAllocated(pools)) = &write.spec else {
        panic!("{write:?}");
    };
    assert_eq!(pools[0].cidrs, ["10.10.0.0/28", "10.10.0.16/28"]);
    // The agent's own write raced ours: its event still lacks `allocated`.
    assert_eq!(m.upsert(wanting(json!(null))), None, "no second write");
    // Another node does not get those blocks.
    let other = NodeView::from_json(
        &json!({"metadata": {"name": "n2"}, "spec": {"ipam": {"pools": {
        "requested": [{"pool": "default", "needed": {"ipv4-addrs": 10}}]}}}}),
    );
    let write = m.upsert(other).expect("n2 gets a block");
    let Some(SpecPart::PoolsAllocated(pools)) = &write.spec else {
        panic!("{write:?}");
    };
    assert_eq!(pools[0].cidrs, ["10.10.0.32/28"]);
    // Once an event shows the write, the node's own list is taken as it is again.
    let shown = json!([{"pool": "default", "cidrs": ["10.10.0.0/28", "10.10.0.16/28"]}]);
    assert_eq!(m.upsert(wanting(shown)), None);
}

#[test]
fn an_overlapping_pool_is_refused_and_changes_nothing() {
    use crate::multipool::{FamilySpec, PoolSpec};
    let pool = |name: &str, cidr: &str| PoolView {
        name: name.into(),
        spec: Ok(PoolSpec {
            ipv4: Some(FamilySpec {
                cidrs: vec![cidr.parse().expect("cidr")],
                mask_size: 28,
            }),
            ..PoolSpec::default()
        }),
    };
    let mut m = NodeManager::new(Box::new(MultiPoolAllocator::new(true, false)));
    assert_eq!(
        m.pool_upsert(pool("a", "10.0.0.0/16"))
            .1
            .map(|r| r.to_string()),
        None
    );
    let (_, refused) = m.pool_upsert(pool("b", "10.0.5.0/24"));
    let refused = weft_k8s::error::chain(&refused.expect("refused"));
    assert!(
        refused.contains("spec.ipv4.cidrs 10.0.5.0/24 overlaps 10.0.0.0/16 of pool a"),
        "{refused}"
    );
    // The same pool may change its own CIDRs; b was never applied.
    assert_eq!(
        m.pool_upsert(pool("a", "10.0.0.0/8"))
            .1
            .map(|r| r.to_string()),
        None
    );
    assert_eq!(
        m.pool_upsert(pool("b", "11.0.0.0/24"))
            .1
            .map(|r| r.to_string()),
        None
    );
}

#[test]
fn observed_nodes_hold_what_they_list_and_get_nothing_more() {
    let mut m = manager();
    m.observe(&node("other", &["10.0.0.0/24"]));
    m.observe(&node("empty", &[]));
    assert_eq!(
        m.upsert(node("own", &[])),
        None,
        "postponed until the restore"
    );
    let writes = m.restore_finished();
    assert_eq!(
        writes,
        [Write {
            node: "own".into(),
            spec: Some(SpecPart::PodCidrs(vec!["10.0.1.0/24".into()])),
            error: None,
        }],
        "the observed nodes are not answered; other's block is not reissued"
    );
    assert_eq!(m.node_names().collect::<Vec<_>>(), ["own"]);
    assert_eq!(m.observed_names().collect::<Vec<_>>(), ["empty", "other"]);
    // The observed node drops its block and lists another: exactly that is held.
    m.observe(&node("other", &["10.0.2.0/24"]));
    assert!(m.delete("empty").is_empty());
    let next = m.upsert(node("next", &[])).expect("a block");
    assert_eq!(
        next.spec,
        Some(SpecPart::PodCidrs(vec!["10.0.3.0/24".into()]))
    );
    assert!(m.delete("other").is_empty());
    assert_eq!(m.observed_names().count(), 0);
}

#[test]
fn a_current_read_wins_over_a_write_handed_out() {
    use crate::multipool::{FamilySpec, PoolSpec};
    let mut m = NodeManager::new(Box::new(MultiPoolAllocator::new(true, false)));
    let _ = m.pool_upsert(PoolView {
        name: "default".into(),
        spec: Ok(PoolSpec {
            ipv4: Some(FamilySpec {
                cidrs: vec!["10.10.0.0/24".parse().expect("cidr")],
                mask_size: 28,
            }),
            ..PoolSpec::default()
        }),
    });
    m.restore_finished();
    let wanting = |needed: u64, allocated: serde_json::Value| {
        NodeView::from_json(
            &json!({"metadata": {"name": "n1"}, "spec": {"ipam": {"pools": {
            "requested": [{"pool": "default", "needed": {"ipv4-addrs": needed}}],
            "allocated": allocated}}}}),
        )
    };
    let write = m.upsert(wanting(20, json!(null))).expect("blocks carved");
    let Some(SpecPart::PoolsAllocated(pools)) = &write.spec else {
        panic!("{write:?}");
    };
    assert_eq!(pools[0].cidrs.len(), 2);
    // Read under the writer's lock: the node dropped its second block; that is what it holds.
    let dropped = json!([{"pool": "default", "cidrs": ["10.10.0.0/28"]}]);
    assert_eq!(m.upsert_current(wanting(5, dropped)), None);
    let held = m.node("n1").expect("n1");
    assert_eq!(held.allocated[0].cidrs, ["10.10.0.0/28"]);
}

mod pinned;

use serde_json::{Value, json};

use super::*;
use crate::crd::pool::CiliumPodIPPool;

fn node(doc: &Value) -> CiliumNode {
    serde_json::from_value(doc.clone()).expect("a CiliumNode")
}

fn pod_cidrs_node(name: &str, cidrs: &[&str]) -> CiliumNode {
    node(&json!({"metadata": {"name": name}, "spec": {"ipam": {"podCIDRs": cidrs}}}))
}

fn pools_node(name: &str, requested: &[(&str, u32)], allocated: &[(&str, &[&str])]) -> CiliumNode {
    let requested: Vec<Value> = (requested.iter())
        .map(|(pool, n)| json!({"pool": pool, "needed": {"ipv4-addrs": n}}))
        .collect();
    let allocated: Vec<Value> = (allocated.iter())
        .map(|(pool, cidrs)| json!({"pool": pool, "cidrs": cidrs}))
        .collect();
    node(&json!({"metadata": {"name": name},
                 "spec": {"ipam": {"pools": {"requested": requested, "allocated": allocated}}}}))
}

fn pool(doc: &Value) -> CiliumPodIPPool {
    serde_json::from_value(doc.clone()).expect("a pool")
}

fn snapshot(nodes: &[CiliumNode], pools: &[CiliumPodIPPool]) -> Snapshot {
    Snapshot {
        node_name: "node1".into(),
        nodes: nodes
            .iter()
            .map(|n| (n.metadata.name.clone(), n.clone()))
            .collect(),
        pools: pools
            .iter()
            .map(|p| (p.name().to_owned(), p.clone()))
            .collect(),
        synced: true,
        ..Snapshot::default()
    }
}

fn cluster_pool(v4: &[&str], mask: u8) -> OperatorConfig {
    let mut config = ClusterPoolConfig::default();
    config.ipv4.cidrs = v4.iter().map(|c| c.parse().expect("cidr")).collect();
    config.ipv4.mask_size = mask;
    OperatorConfig::ClusterPool(config)
}

fn cidrs(write: &OperatorWrite) -> Vec<String> {
    (write.pod_cidrs.iter().flatten())
        .map(ToString::to_string)
        .collect()
}

fn allocated(write: &OperatorWrite) -> Vec<(String, Vec<String>)> {
    (write.allocated.iter().flatten())
        .map(|a| {
            (
                a.pool.clone(),
                a.cidrs.iter().map(ToString::to_string).collect(),
            )
        })
        .collect()
}

#[test]
fn cluster_pool_restores_every_node_before_it_hands_out_a_block() {
    let mut op = InProcessOperator::new(&cluster_pool(&["10.240.0.0/16"], 24), "node1").unwrap();
    let own = pod_cidrs_node("node1", &[]);
    let other = pod_cidrs_node("node2", &["10.240.0.0/24"]);
    let snap = snapshot(&[own.clone(), other], &[]);
    let write = op.reconcile(&snap, Some(&own)).expect("a block");
    assert_eq!(
        cidrs(&write),
        ["10.240.1.0/24"],
        "node2's block is not reissued"
    );
    assert_eq!(write.error.as_deref(), Some(""));

    // Written back and read again: nothing more to do.
    let own = pod_cidrs_node("node1", &["10.240.1.0/24"]);
    let write = op
        .reconcile(&snapshot(std::slice::from_ref(&own), &[]), Some(&own))
        .expect("an answer");
    assert_eq!(write.pod_cidrs, None);
}

#[test]
fn cluster_pool_reports_a_foreign_block_with_ciliums_text() {
    let mut op = InProcessOperator::new(&cluster_pool(&["10.240.0.0/16"], 24), "node1").unwrap();
    let own = pod_cidrs_node("node1", &["10.9.0.0/24"]);
    let write = op
        .reconcile(&snapshot(std::slice::from_ref(&own), &[]), Some(&own))
        .expect("an error");
    assert_eq!(
        write.error.as_deref(),
        Some("allocator not configured for the requested CIDR 10.9.0.0/24")
    );
}

#[test]
fn bad_cluster_pool_settings_name_the_key() {
    let error = InProcessOperator::new(&cluster_pool(&["fd00::/104"], 24), "node1")
        .expect_err("a v6 CIDR in the v4 key");
    let text = crate::error::chain(&error);
    assert!(
        text.starts_with(
            "invalid cluster-pool-ipv4-cidr for the in-process cluster-pool allocator"
        ),
        "{text}"
    );
    assert!(text.contains("CIDR is not v4 family: fd00::/104"), "{text}");
    let error = InProcessOperator::new(&cluster_pool(&["10.0.0.0/16"], 8), "node1")
        .expect_err("a mask shorter than the CIDR");
    assert!(
        error.to_string().contains("cluster-pool-ipv4-mask-size"),
        "{error}"
    );
    let mut v6_without_cidr = ClusterPoolConfig::default();
    v6_without_cidr.ipv4.cidrs = vec!["10.0.0.0/16".parse().unwrap()];
    v6_without_cidr.ipv6.enabled = true;
    let error = InProcessOperator::new(&OperatorConfig::ClusterPool(v6_without_cidr), "node1")
        .expect_err("IPv6 without a CIDR");
    assert!(
        crate::error::chain(&error)
            .contains("cluster-pool-ipv6-cidr must be provided when using ClusterPool"),
        "{error}"
    );
}

fn small_pool() -> CiliumPodIPPool {
    pool(
        &json!({"apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
                 "metadata": {"name": "small"},
                 "spec": {"ipv4": {"cidrs": ["10.220.0.0/24"], "maskSize": 28}}}),
    )
}

#[test]
fn multi_pool_carves_when_requested_grows_and_takes_back_what_the_agent_drops() {
    let mut op = InProcessOperator::new(
        &OperatorConfig::MultiPool {
            ipv4: true,
            ipv6: false,
        },
        "node1",
    )
    .unwrap();
    let pools = [small_pool()];
    let own = pools_node("node1", &[("small", 10)], &[]);
    let write = op
        .reconcile(&snapshot(std::slice::from_ref(&own), &pools), Some(&own))
        .unwrap();
    assert_eq!(
        allocated(&write),
        [("small".to_owned(), vec!["10.220.0.0/28".to_owned()])]
    );

    // 15 addresses needed, 14 per block: a second block.
    let own = pools_node("node1", &[("small", 15)], &[("small", &["10.220.0.0/28"])]);
    let write = op
        .reconcile(&snapshot(std::slice::from_ref(&own), &pools), Some(&own))
        .unwrap();
    assert_eq!(
        allocated(&write),
        [(
            "small".to_owned(),
            vec!["10.220.0.0/28".to_owned(), "10.220.0.16/28".to_owned()]
        )]
    );

    // The agent released the second block: it stays released and is free for the next node.
    let own = pools_node("node1", &[("small", 5)], &[("small", &["10.220.0.0/28"])]);
    let write = op
        .reconcile(&snapshot(std::slice::from_ref(&own), &pools), Some(&own))
        .unwrap();
    assert_eq!(
        allocated(&write),
        [("small".to_owned(), vec!["10.220.0.0/28".to_owned()])]
    );
    assert_eq!(write.error.as_deref(), Some(""));
}

#[test]
fn multi_pool_never_reissues_another_nodes_block_and_honours_reserved_ranges() {
    let mut op = InProcessOperator::new(
        &OperatorConfig::MultiPool {
            ipv4: true,
            ipv6: false,
        },
        "node1",
    )
    .unwrap();
    let v2 = pool(
        &json!({"apiVersion": "cilium.io/v2", "kind": "CiliumPodIPPool",
        "metadata": {"name": "small"},
        "spec": {"ipv4": {"cidrs": ["10.220.0.0/24"], "maskSize": 28,
                          "pool": [{"cidr": "10.220.0.0/24",
                                    "reservedRanges": [{"start": "10.220.0.0", "end": "10.220.0.31"}]}]}}}),
    );
    let own = pools_node("node1", &[("small", 20)], &[]);
    let other = pools_node("node2", &[], &[("small", &["10.220.0.32/28"])]);
    let write = op
        .reconcile(&snapshot(&[own.clone(), other], &[v2]), Some(&own))
        .unwrap();
    assert_eq!(
        allocated(&write),
        [(
            "small".to_owned(),
            vec!["10.220.0.48/28".to_owned(), "10.220.0.64/28".to_owned()]
        )]
    );
}

#[test]
fn multi_pool_errors_are_written_and_unknown_pools_kept() {
    let mut op = InProcessOperator::new(
        &OperatorConfig::MultiPool {
            ipv4: true,
            ipv6: false,
        },
        "node1",
    )
    .unwrap();
    let own = pools_node("node1", &[("nowhere", 1)], &[("gone", &["10.9.0.0/28"])]);
    let write = op
        .reconcile(&snapshot(std::slice::from_ref(&own), &[]), Some(&own))
        .unwrap();
    assert_eq!(
        allocated(&write),
        [("gone".to_owned(), vec!["10.9.0.0/28".to_owned()])]
    );
    let error = write.error.unwrap_or_default();
    assert!(
        error.contains("cannot allocate from non-existing pool: nowhere"),
        "{error}"
    );
}

#[test]
fn an_unreadable_node_document_holds_everything_back() {
    let mut op = InProcessOperator::new(&cluster_pool(&["10.240.0.0/16"], 24), "node1").unwrap();
    let own = pod_cidrs_node("node1", &[]);
    let mut snap = snapshot(std::slice::from_ref(&own), &[]);
    snap.problems.insert(
        PathBuf::from("/store/ciliumnodes/node2.yaml"),
        "field `spec.ipam.podCIDRs[0]`: invalid".into(),
    );
    assert_eq!(
        op.reconcile(&snap, Some(&own)),
        None,
        "node2's blocks are unknown"
    );
    snap.problems.clear();
    let write = op.reconcile(&snap, Some(&own)).expect("fixed: a block");
    assert_eq!(cidrs(&write), ["10.240.0.0/24"]);
}

#[test]
fn the_agent_configuration_picks_the_allocator() {
    let resolve = |pairs: &[(&str, &str)]| {
        let layer = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OperatorConfig::for_agent(&AgentConfig::resolve([&layer]).expect("valid"))
    };
    assert_eq!(
        resolve(&[("ipam", "cluster-pool")]),
        None,
        "no cluster CIDR: podCIDRs as written"
    );
    let Some(OperatorConfig::ClusterPool(config)) = resolve(&[
        ("ipam", "cluster-pool"),
        ("cluster-pool-ipv4-cidr", "10.0.0.0/16 10.1.0.0/16"),
        ("enable-ipv6", "true"),
    ]) else {
        panic!("cluster-pool");
    };
    assert_eq!(config.ipv4.cidrs.len(), 2);
    assert_eq!(config.ipv4.mask_size, 24);
    assert!(config.ipv6.enabled && config.ipv6.cidrs.is_empty());
    assert_eq!(
        resolve(&[("ipam", "multi-pool"), ("enable-ipv6", "true")]),
        Some(OperatorConfig::MultiPool {
            ipv4: true,
            ipv6: true
        })
    );
    assert_eq!(resolve(&[("ipam", "crd")]), None);
}

//! Bad node entries and missing pools are found and worded with the field path and the fix.

use serde_json::json;

use super::*;
use crate::{
    crd::{
        ipam::AllocationIp,
        meta::{Namespace, Pod},
        node::{CiliumNode, NodeAddress},
        pool::CiliumPodIPPool,
    },
    ipam::{
        input::Labelled,
        selection::{IP_POOL_ANNOTATION, ObjectLookup},
    },
};

fn node(pool: &[&str], addresses: &[(&str, &str)]) -> NodeInput {
    let mut node = CiliumNode::new("node1");
    let ipam = node.ipam_spec_mut();
    for key in pool {
        ipam.pool.insert((*key).to_owned(), AllocationIp::default());
    }
    node.spec.addresses = addresses
        .iter()
        .map(|(t, ip)| NodeAddress {
            address_type: (*t).to_owned(),
            ip: (*ip).to_owned(),
            ..NodeAddress::default()
        })
        .collect();
    NodeInput::from(&node)
}

#[test]
fn bad_pool_keys_and_addresses_are_named_with_their_field_path() {
    let node = node(
        &["10.99.0.5", "10.99.0.300"],
        &[
            ("InternalIP", "192.0.2.10"),
            ("CiliumInternalIP", "10.99.0.999"),
        ],
    );
    let text: Vec<String> = node_problems(IpamMode::Crd, &node)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(text.len(), 2, "{text:?}");
    assert!(
        text[0]
            .starts_with("CiliumNode node1 spec.ipam.pool[\"10.99.0.300\"] is not an IP address"),
        "{text:?}"
    );
    assert!(
        text[1].starts_with(
            "CiliumNode node1 spec.addresses[1].ip \"10.99.0.999\" (CiliumInternalIP) is not an IP address"
        ),
        "{text:?}"
    );
    // Modes that do not read spec.ipam.pool do not complain about it.
    let text: Vec<String> = node_problems(IpamMode::ClusterPool, &node)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(text.len(), 1, "{text:?}");
    assert!(text[0].contains("spec.addresses[1]"), "{text:?}");
    assert!(
        node_problems(
            IpamMode::Crd,
            &self::node(&["10.99.0.5"], &[("InternalIP", "fd00::1")])
        )
        .is_empty()
    );
}

struct Objects(Vec<Pod>, Namespace);

impl ObjectLookup for Objects {
    fn pod(&self, namespace: &str, name: &str) -> Option<Labelled<'_>> {
        self.0
            .iter()
            .find(|p| p.metadata.namespace == namespace && p.metadata.name == name)
            .map(|p| Labelled::from(&p.metadata))
    }
    fn namespace(&self, name: &str) -> Option<Labelled<'_>> {
        (self.1.metadata.name == name).then(|| Labelled::from(&self.1.metadata))
    }
}

fn pod(name: &str, pool: Option<&str>) -> Pod {
    let annotations = pool.map_or_else(|| json!({}), |p| json!({ IP_POOL_ANNOTATION: p }));
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
        "annotations": annotations}}))
    .expect("pod")
}

fn pool(name: &str) -> PoolInput {
    let pool: CiliumPodIPPool =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).expect("pool");
    PoolInput::from(&pool)
}

#[test]
fn a_pod_naming_a_pool_that_does_not_exist_is_a_problem() {
    let objects = Objects(
        vec![
            pod("web", None),
            pod("typo", Some("bleu")),
            pod("ok", Some("blue")),
        ],
        serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("ns"),
    );
    let pools = [pool("default"), pool("blue")];
    let ctx = SelectionContext {
        ipam_mode: "multi-pool",
        pools_synced: true,
        default_pool: "default",
        objects: &objects,
        pools: &pools,
    };
    let owners = ["default/web", "default/typo", "default/ok", "default/gone"];
    let found = missing_pools(owners, &[Family::V6, Family::V4], &ctx);
    assert_eq!(found.len(), 1, "{found:?}");
    let text = found[0].to_string();
    assert!(
        text.starts_with(
            "pod default/typo asks for pool bleu (pod annotation ipam.cilium.io/ip-pool; ipv6, \
             ipv4), but pool bleu does not exist: no CiliumPodIPPool bleu"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("create the pool, or fix the annotation"),
        "{text}"
    );
    // Without the default pool, a pod no annotation or selector places needs it created.
    let only_blue = [pool("blue")];
    let ctx_without_default = SelectionContext {
        pools: &only_blue,
        ..ctx
    };
    let found = missing_pools(["default/web"], &[Family::V4], &ctx_without_default);
    let text = found.first().map(ToString::to_string).unwrap_or_default();
    assert!(
        text.starts_with("pod default/web asks for pool default (default pool (no match); ipv4)")
            && text.ends_with("until it does: create the pool"),
        "{text}"
    );
    // Outside multi-pool there are no pool objects to miss.
    let ctx = SelectionContext {
        ipam_mode: "cluster-pool",
        ..ctx
    };
    assert!(missing_pools(owners, &[Family::V4], &ctx).is_empty());
}

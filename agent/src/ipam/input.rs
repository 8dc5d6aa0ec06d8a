//! What IPAM reads, as its own types: the one adapter from the wire types to the fields the
//! allocators and pool selection use. The own CiliumNode becomes a [`NodeInput`] (and the parts
//! a write-back is computed against a [`NodeOutput`]), a CiliumPodIPPool a [`PoolInput`] with
//! its selectors compiled, and a pod's or namespace's metadata a [`Labelled`]. Past the
//! manager's entry points, the rest of `ipam` never names a CiliumNode, a CiliumPodIPPool, a
//! Pod or a Namespace, so a change of the wire types stays here. The allocators' entries (a CRD pool entry, a multi-pool
//! allocation) are still the wire structs they write back.

use std::collections::BTreeMap;

use ipnet::IpNet;

use super::labels::{self, Selector};
use crate::crd::{
    azure::AzureInterface,
    eni::eni_allocated,
    ipam::{AllocationIp, IpamPoolAllocation, IpamPoolSpec, ReleaseState},
    meta::{LabelSelector, ObjectMeta},
    node::CiliumNode,
    pool::CiliumPodIPPool,
};

/// The own CiliumNode as IPAM reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeInput {
    /// `metadata.name`.
    pub name: String,
    /// `spec.ipam.podCIDRs` (host-scope modes).
    pub pod_cidrs: Vec<IpNet>,
    /// `spec.ipam.pool` (CRD modes); `None` when it is empty.
    pub crd_pool: Option<BTreeMap<String, AllocationIp>>,
    /// `status.ipam.release-ips` (CRD modes' release handshake).
    pub release_ips: BTreeMap<String, ReleaseState>,
    /// `spec.ipam.min-allocate`.
    pub min_allocate: u32,
    /// `spec.ipam.pre-allocate`.
    pub pre_allocate: u32,
    /// `spec.ipam.pools.allocated` (multi-pool).
    pub pools_allocated: Vec<IpamPoolAllocation>,
    /// The allocation the ENI spec and status describe (eni mode), if any.
    pub eni_allocated: Option<IpamPoolAllocation>,
    /// `spec.ipam.static-ip-tags`.
    pub static_ip_tags: BTreeMap<String, String>,
    /// `status.ipam.assigned-static-ip`.
    pub assigned_static_ip: String,
    /// `spec.addresses`, as (type, ip) text: an entry that is not an address is a problem to
    /// report, not a decoding error.
    pub addresses: Vec<(String, String)>,
    /// The VPC's primary CIDR as `status.eni.enis` reports it (eni): the first ENI, in id
    /// order, with a `vpc.primary-cidr`, masked (a node belongs to one VPC).
    pub eni_vpc_cidr: Option<IpNet>,
    /// The subnet CIDR as `status.azure.interfaces` reports it (azure): the first interface
    /// with `subnet.cidr`, else its legacy `cidr`, masked.
    pub azure_subnet_cidr: Option<IpNet>,
}

impl From<&CiliumNode> for NodeInput {
    fn from(node: &CiliumNode) -> Self {
        let ipam = node.spec.ipam.clone().unwrap_or_default();
        let status = node.status.as_ref();
        let ipam_status = status.and_then(|s| s.ipam.as_ref());
        Self {
            name: node.metadata.name.clone(),
            pod_cidrs: ipam.pod_cidrs,
            crd_pool: (!ipam.pool.is_empty()).then_some(ipam.pool),
            release_ips: ipam_status
                .map(|i| i.release_ips.clone())
                .unwrap_or_default(),
            min_allocate: ipam.min_allocate,
            pre_allocate: ipam.pre_allocate,
            pools_allocated: ipam.pools.map(|p| p.allocated).unwrap_or_default(),
            eni_allocated: eni_allocated(
                node.spec.eni.as_ref(),
                status.and_then(|s| s.eni.as_ref()),
            ),
            static_ip_tags: ipam.static_ip_tags,
            assigned_static_ip: ipam_status
                .map(|i| i.assigned_static_ip.clone())
                .unwrap_or_default(),
            addresses: node
                .spec
                .addresses
                .iter()
                .map(|a| (a.address_type.clone(), a.ip.clone()))
                .collect(),
            eni_vpc_cidr: status
                .and_then(|s| s.eni.as_ref())
                .and_then(|eni| {
                    eni.enis
                        .values()
                        .find_map(|e| e.vpc.as_ref().and_then(|v| v.primary_cidr))
                })
                .map(|cidr| cidr.trunc()),
            azure_subnet_cidr: status
                .and_then(|s| s.azure.as_ref())
                .and_then(|azure| {
                    azure
                        .interfaces
                        .iter()
                        .find_map(AzureInterface::subnet_cidr)
                })
                .map(|cidr| cidr.trunc()),
        }
    }
}

/// A CiliumPodIPPool as pool selection and the allocators read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolInput {
    /// The pool's name.
    pub name: String,
    /// It has an IPv4 part (`spec.ipv4`).
    pub ipv4: bool,
    /// It has an IPv6 part (`spec.ipv6`).
    pub ipv6: bool,
    /// `ipam.cilium.io/skip-masquerade: "true"`.
    pub skip_masquerade: bool,
    /// Its selectors; `None` when the pool selects no pod (neither selector set, or one does not
    /// compile, which makes Cilium skip the pool).
    pub selector: Option<PoolSelector>,
}

/// The compiled selectors of a pool; a selector the pool leaves out matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolSelector {
    /// `spec.podSelector`, matched against the pod's labels.
    pub pod: Selector,
    /// `spec.namespaceSelector`, matched against the namespace's labels.
    pub namespace: Selector,
}

impl From<&CiliumPodIPPool> for PoolInput {
    fn from(pool: &CiliumPodIPPool) -> Self {
        let spec = &pool.spec;
        Self {
            name: pool.name().to_owned(),
            ipv4: spec.ipv4.is_some(),
            ipv6: spec.ipv6.is_some(),
            skip_masquerade: pool.skip_masquerade(),
            selector: pool_selector(spec.pod_selector.as_ref(), spec.namespace_selector.as_ref()),
        }
    }
}

impl PoolInput {
    /// Every pool of `pools`, converted.
    pub fn all<'a>(pools: impl IntoIterator<Item = &'a CiliumPodIPPool>) -> Vec<Self> {
        pools.into_iter().map(Self::from).collect()
    }
}

/// Both selectors compiled (both first: a bad one skips the pool whatever the other says).
fn pool_selector(
    pod: Option<&LabelSelector>,
    namespace: Option<&LabelSelector>,
) -> Option<PoolSelector> {
    if pod.is_none() && namespace.is_none() {
        return None;
    }
    let compile = |s: Option<&LabelSelector>| s.map_or(Ok(Selector::default()), labels::compile);
    Some(PoolSelector {
        pod: compile(pod).ok()?,
        namespace: compile(namespace).ok()?,
    })
}

/// What pool selection reads of a pod or a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Labelled<'a> {
    /// `metadata.labels`.
    pub labels: &'a BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: &'a BTreeMap<String, String>,
}

impl<'a> From<&'a ObjectMeta> for Labelled<'a> {
    fn from(metadata: &'a ObjectMeta) -> Self {
        Self {
            labels: &metadata.labels,
            annotations: &metadata.annotations,
        }
    }
}

/// What a write-back is computed against: the parts of the own CiliumNode the agent writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeOutput {
    /// `spec.ipam.pools` as it is now (multi-pool, eni).
    pub pools: IpamPoolSpec,
    /// `status.ipam.used` holds entries (the multi-pool modes clear them).
    pub has_used: bool,
}

impl From<Option<&CiliumNode>> for NodeOutput {
    fn from(node: Option<&CiliumNode>) -> Self {
        Self {
            pools: node
                .and_then(|n| n.spec.ipam.as_ref())
                .and_then(|i| i.pools.clone())
                .unwrap_or_default(),
            has_used: node
                .and_then(|n| n.status.as_ref())
                .and_then(|s| s.ipam.as_ref())
                .is_some_and(|i| !i.used.is_empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(value: serde_json::Value) -> CiliumNode {
        serde_json::from_value(value).expect("CiliumNode")
    }

    #[test]
    fn the_adapter_reads_what_the_allocators_use() {
        let n = node(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "n1"},
            "spec": {"ipam": {
                "podCIDRs": ["10.4.0.0/24"],
                "pool": {"10.0.0.5": {"resource": "eni-1"}},
                "min-allocate": 2, "pre-allocate": 3,
                "pools": {"allocated": [{"pool": "default", "cidrs": ["10.9.0.0/28"]}]},
                "static-ip-tags": {"env": "prod"},
            }, "addresses": [{"type": "InternalIP", "ip": "10.0.0.300"}]},
            "status": {"ipam": {
                "used": {"10.0.0.5": {"owner": "web/a"}},
                "release-ips": {"10.0.0.6": "marked-for-release"},
                "assigned-static-ip": "20.1.2.3",
            }},
        }));
        let input = NodeInput::from(&n);
        assert_eq!(
            input.pod_cidrs,
            ["10.4.0.0/24".parse::<IpNet>().expect("cidr")]
        );
        assert_eq!(
            input
                .crd_pool
                .as_ref()
                .map(|p| p.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["10.0.0.5".to_owned()])
        );
        assert_eq!(input.release_ips.len(), 1);
        assert_eq!((input.min_allocate, input.pre_allocate), (2, 3));
        assert_eq!(input.pools_allocated.len(), 1);
        assert_eq!(input.pools_allocated[0].pool, "default");
        assert_eq!(input.static_ip_tags["env"], "prod");
        assert_eq!(input.assigned_static_ip, "20.1.2.3");
        assert_eq!(input.name, "n1");
        assert_eq!(
            input.addresses,
            [("InternalIP".to_owned(), "10.0.0.300".to_owned())]
        );
        let output = NodeOutput::from(Some(&n));
        assert_eq!(output.pools.allocated.len(), 1);
        assert!(output.has_used);

        let bare = node(json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                               "metadata": {"name": "n1"}}));
        assert_eq!(
            NodeInput::from(&bare),
            NodeInput {
                name: "n1".to_owned(),
                ..NodeInput::default()
            }
        );
        assert_eq!(NodeOutput::from(Some(&bare)), NodeOutput::default());
        assert_eq!(NodeOutput::from(None), NodeOutput::default());
    }

    fn pool(value: serde_json::Value) -> PoolInput {
        PoolInput::from(&serde_json::from_value::<CiliumPodIPPool>(value).expect("pool"))
    }

    #[test]
    fn a_pool_is_read_with_its_selectors_compiled() {
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        let blue = pool(json!({
            "metadata": {"name": "blue",
                         "annotations": {"ipam.cilium.io/skip-masquerade": "true"}},
            "spec": {"ipv6": {"cidrs": ["fd00::/104"], "maskSize": 120},
                     "podSelector": {"matchLabels": {"color": "blue"}}},
        }));
        assert_eq!(blue.name, "blue");
        assert_eq!(
            (blue.ipv4, blue.ipv6, blue.skip_masquerade),
            (false, true, true)
        );
        let selector = blue.selector.expect("a pod selector");
        assert!(selector.pod.matches(&labels(&[("color", "blue")])));
        assert!(!selector.pod.matches(&labels(&[("color", "red")])));
        // The selector the pool leaves out matches every namespace.
        assert!(selector.namespace.matches(&labels(&[])));

        let plain = pool(json!({"metadata": {"name": "plain"},
                                "spec": {"ipv4": {"cidrs": ["10.0.0.0/16"]}}}));
        assert_eq!((plain.ipv4, plain.skip_masquerade), (true, false));
        assert_eq!(plain.selector, None, "no selector: selects no pod");
        let bad = pool(json!({"metadata": {"name": "bad"}, "spec": {
            "podSelector": {"matchLabels": {"color": "blue"}},
            "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Near"}]},
        }}));
        assert_eq!(
            bad.selector, None,
            "one selector does not compile: the pool is skipped"
        );
    }
}

//! What IPAM reads of the own CiliumNode, as its own types: the one adapter from the wire
//! type ([`CiliumNode`]) to the fields the allocators use. The manager's backends see only
//! [`NodeInput`] and [`NodeOutput`], never the CiliumNode, so a change of the wire type stays
//! here. The allocators' entries (a CRD pool entry, a multi-pool allocation) are still the
//! wire structs they write back.

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::crd::{
    eni::eni_allocated,
    ipam::{AllocationIp, IpamPoolAllocation, IpamPoolSpec, ReleaseState},
    node::CiliumNode,
};

/// The own CiliumNode as IPAM reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeInput {
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
}

impl From<&CiliumNode> for NodeInput {
    fn from(node: &CiliumNode) -> Self {
        let ipam = node.spec.ipam.clone().unwrap_or_default();
        let status = node.status.as_ref();
        let ipam_status = status.and_then(|s| s.ipam.as_ref());
        Self {
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
            }},
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
        let output = NodeOutput::from(Some(&n));
        assert_eq!(output.pools.allocated.len(), 1);
        assert!(output.has_used);

        let bare = node(json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                               "metadata": {"name": "n1"}}));
        assert_eq!(NodeInput::from(&bare), NodeInput::default());
        assert_eq!(NodeOutput::from(Some(&bare)), NodeOutput::default());
        assert_eq!(NodeOutput::from(None), NodeOutput::default());
    }
}

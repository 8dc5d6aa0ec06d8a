//! What the cloud node manager reads of a CiliumNode, through the one tolerant reader
//! ([`weft_cluster_ipam::node::NodeRead`]) the block allocators use too: a part of the wrong
//! form becomes an error naming its path on that node and reads as empty, every other part is
//! kept, and values the strict wire type would refuse (a negative `pre-allocate`, which Cilium
//! keeps) are read as Cilium reads them. Pure.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::{Map, Value};
use weft_cluster_ipam::node::NodeRead;
use weft_k8s::{
    crd::ipam::{IpamPoolAllocation, IpamPoolRequest},
    resource::FieldError,
};

use super::CloudProvider;

/// The pool a 1.20+ agent of a cloud mode reports its demand for.
const DEFAULT_POOL: &str = "default";

/// The view of a node under provider `P`.
pub type ViewOf<P> =
    CloudNodeView<<P as CloudProvider>::NodeSpec, <P as CloudProvider>::NodeStatus>;

/// The cloud manager's view of one CiliumNode: what every cloud reads, and the provider's parts
/// of spec (`S`) and status (`T`).
#[derive(Debug, Clone, Default)]
pub struct CloudNodeView<S, T> {
    /// `metadata.name`.
    pub name: String,
    /// Annotated `ipam.cilium.io/ignore: "true"`.
    pub ignored: bool,
    /// `spec.instance-id` (lower-cased provider ID).
    pub instance_id: String,
    /// The provider's part of the spec (`spec.azure`, `spec.eni`).
    pub provider: S,
    /// `spec.ipam.pre-allocate` (0 when unset).
    pub pre_allocate: i64,
    /// `spec.ipam.min-allocate`.
    pub min_allocate: i64,
    /// `spec.ipam.max-allocate`.
    pub max_allocate: i64,
    /// `spec.ipam.max-above-watermark`.
    pub max_above_watermark: i64,
    /// `spec.ipam.static-ip-tags`.
    pub static_ip_tags: BTreeMap<String, String>,
    /// `spec.ipam.pool`: address → owning resource.
    pub pool: BTreeMap<String, String>,
    /// Keys of `status.ipam.used`.
    pub used: BTreeSet<String>,
    /// The IPv4 demand of pool `default` in `spec.ipam.pools.requested` (a 1.20+ agent
    /// reports its demand there instead of `status.ipam.used`).
    pub requested_default: Option<u64>,
    /// The IPv6 demand of pool `default` in `spec.ipam.pools.requested`.
    pub requested_default_v6: u64,
    /// The IPv4 CIDRs of `spec.ipam.pools.allocated` (every pool), which a 1.20+ agent of a
    /// cloud mode writes with what it keeps; `None` when the node has no `spec.ipam.pools`
    /// (a 1.19 agent).
    pub allocated_v4: Option<BTreeSet<Ipv4Net>>,
    /// `status.ipam.release-ips`: address → handshake state.
    pub release_ips: BTreeMap<String, String>,
    /// `status.ipam.assigned-static-ip`.
    pub assigned_static_ip: String,
    /// `status.ipam.operator-status.error`.
    pub operator_error: String,
    /// The provider's part of the status as the object shows it (compared before writing it
    /// again; a part that does not read as the provider's reads as empty, and is rewritten).
    pub provider_status: T,
    /// The fields of the wrong form, each with its path (shared: a view is cloned per round).
    pub invalid: Arc<[FieldError]>,
}

/// An entry of `spec.ipam.pool`: the resource that owns the address.
#[derive(Deserialize, Default)]
struct Owner {
    #[serde(default)]
    resource: String,
}

impl<S: DeserializeOwned + Default, T: DeserializeOwned + Default> CloudNodeView<S, T> {
    /// Read a CiliumNode object (as the API server sent it); the provider's parts are
    /// `spec.<field>` and `status.<field>`.
    #[must_use]
    pub fn from_json(doc: &Value, field: &str) -> Self {
        let mut read = NodeRead::new(doc);
        let ipam = |key| ["spec", "ipam", key];
        let status = |key| ["status", "ipam", key];
        let pool: BTreeMap<String, Owner> = read.part(&ipam("pool"));
        let used: Map<String, Value> = read.part(&status("used"));
        let requested: Option<Vec<IpamPoolRequest>> =
            read.try_part(&["spec", "ipam", "pools", "requested"]);
        let allocated: Option<Vec<IpamPoolAllocation>> =
            read.try_part(&["spec", "ipam", "pools", "allocated"]);
        let allocated_v4 = (requested.is_some() || allocated.is_some()).then(|| {
            (allocated.iter().flatten())
                .flat_map(|entry| &entry.cidrs)
                .filter_map(|cidr| match cidr.trunc() {
                    IpNet::V4(v4) => Some(v4),
                    IpNet::V6(_) => None,
                })
                .collect()
        });
        let default = (requested.iter().flatten()).find(|r| r.pool == DEFAULT_POOL);
        let mut view = Self {
            name: read.name().to_owned(),
            ignored: read.ignored(),
            instance_id: read.part(&["spec", "instance-id"]),
            provider: read.part(&["spec", field]),
            pre_allocate: read.part(&ipam("pre-allocate")),
            min_allocate: read.part(&ipam("min-allocate")),
            max_allocate: read.part(&ipam("max-allocate")),
            max_above_watermark: read.part(&ipam("max-above-watermark")),
            static_ip_tags: read.part(&ipam("static-ip-tags")),
            pool: pool.into_iter().map(|(ip, o)| (ip, o.resource)).collect(),
            used: used.into_iter().map(|(ip, _)| ip).collect(),
            requested_default: default.map(|r| u64::from(r.needed.ipv4_addrs)),
            requested_default_v6: default.map_or(0, |r| u64::from(r.needed.ipv6_addrs)),
            allocated_v4,
            release_ips: read.part(&status("release-ips")),
            assigned_static_ip: read.part(&status("assigned-static-ip")),
            operator_error: String::new(),
            provider_status: T::default(),
            invalid: Arc::default(),
        };
        view.invalid = read.finish().into();
        // The operator's own parts of the status: one of the wrong form reads as empty and is
        // replaced by the next write, without an error on the node.
        let mut own = NodeRead::new(doc);
        view.operator_error = own.part(&["status", "ipam", "operator-status", "error"]);
        view.provider_status = own.part(&["status", field]);
        view
    }

    /// The error text for `operator-status` when fields have the wrong form: each
    /// `path: problem`, joined by `; `.
    #[must_use]
    pub fn invalid_text(&self) -> Option<String> {
        (!self.invalid.is_empty()).then(|| {
            let texts: Vec<String> = (self.invalid.iter())
                .map(|e| format!("{}: {}", e.path, e.source))
                .collect();
            texts.join("; ")
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use weft_k8s::crd::azure::{AzureSpec, AzureStatus};

    use super::*;

    type View = CloudNodeView<AzureSpec, AzureStatus>;

    #[test]
    fn reads_what_the_cloud_manager_needs() {
        let view = View::from_json(
            &json!({
                "metadata": {"name": "n1"},
                "spec": {
                    "instance-id": "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1",
                    "azure": {"interface-name": "eth0"},
                    "ipam": {
                        "pre-allocate": -1, "min-allocate": 2, "max-above-watermark": 3,
                        "static-ip-tags": {"env": "prod"},
                        "pool": {"10.0.0.5": {"resource": "/nic/a"}, "10.0.0.6": {}}
                    }
                },
                "status": {"ipam": {
                    "used": {"10.0.0.5": {"owner": "default/p"}},
                    "release-ips": {"10.0.0.6": "ready-for-release"},
                    "assigned-static-ip": "20.0.0.1"
                }}
            }),
            "azure",
        );
        assert!(view.invalid.is_empty(), "{:?}", view.invalid_text());
        assert!(view.instance_id.ends_with("/vm1"));
        assert_eq!(view.provider.interface_name, "eth0");
        assert_eq!(
            (
                view.pre_allocate,
                view.min_allocate,
                view.max_allocate,
                view.max_above_watermark
            ),
            (-1, 2, 0, 3)
        );
        assert_eq!(view.static_ip_tags["env"], "prod");
        assert_eq!(view.pool["10.0.0.5"], "/nic/a");
        assert_eq!(view.pool["10.0.0.6"], "");
        assert!(view.used.contains("10.0.0.5"));
        assert_eq!(view.release_ips["10.0.0.6"], "ready-for-release");
        assert_eq!(view.assigned_static_ip, "20.0.0.1");
    }

    #[test]
    fn garbage_names_the_field() {
        for (doc, field) in [
            (json!({"spec": {"instance-id": 5}}), "spec.instance-id"),
            (
                json!({"spec": {"azure": {"interface-name": 5}}}),
                "spec.azure.interface-name",
            ),
            (json!({"spec": {"azure": []}}), "spec.azure"),
            (
                json!({"spec": {"ipam": {"pre-allocate": "8"}}}),
                "spec.ipam.pre-allocate",
            ),
            (json!({"spec": {"ipam": {"pool": []}}}), "spec.ipam.pool"),
            (
                json!({"spec": {"ipam": {"pool": {"10.0.0.1": {"resource": 1}}}}}),
                "spec.ipam.pool.10.0.0.1.resource",
            ),
            (
                json!({"spec": {"ipam": {"static-ip-tags": {"a": 1}}}}),
                "spec.ipam.static-ip-tags.a",
            ),
            (
                json!({"status": {"ipam": {"used": "x"}}}),
                "status.ipam.used",
            ),
        ] {
            let view = View::from_json(&doc, "azure");
            let paths: Vec<&str> = view.invalid.iter().map(|e| e.path.as_str()).collect();
            assert_eq!(paths, [field], "{doc}");
        }
    }
}

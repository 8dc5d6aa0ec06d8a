//! Where the agent's view of the cluster lives: its own CiliumNode, the CiliumPodIPPools and
//! CiliumNodeConfigs, and the metadata of pods and namespaces. A store publishes snapshots
//! (`tokio::sync::watch`) and takes the agent's write-backs of the fields it owns; the embedded
//! store keeps documents in a directory, the Kubernetes store (`k8s::KubeStore`) talks to the API
//! server. This module never imports `k8s`: the Kubernetes store implements [`Store`] from there,
//! and the daemon, the composition root, picks one of the two (`daemon::NodeStore`).
//! Nothing here allocates addresses: `ipam` decides, the store only reads and writes.

pub mod embedded;
pub mod writeback;

use std::{
    collections::BTreeMap,
    hash::{Hash as _, Hasher as _},
    net::IpAddr,
    path::PathBuf,
    sync::Arc,
};

use tokio::sync::watch;

use crate::crd::{
    endpoint::CiliumEndpoint,
    identity::CiliumIdentity,
    ipam::NodeIpamWrite,
    meta::{Namespace, Pod},
    node::CiliumNode,
    nodeconfig::CiliumNodeConfig,
    pool::CiliumPodIPPool,
};
use crate::ipam::input::Labelled;

/// Everything the agent reads, as of one moment. The collections that grow with the cluster
/// (CiliumNodes, CiliumEndpoints, CiliumIdentities) are persistent maps: a copy costs nothing,
/// a changed copy shares everything that did not change, and two copies are diffed by skipping
/// what they share ([`imbl::OrdMap::diff`]).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The node this agent runs on (`--node-name`).
    pub node_name: String,
    /// Every CiliumNode by name (the own one included).
    pub nodes: imbl::OrdMap<String, CiliumNode>,
    /// CiliumPodIPPools by name.
    pub pools: BTreeMap<String, CiliumPodIPPool>,
    /// CiliumNodeConfigs by (namespace, name).
    pub node_configs: BTreeMap<(String, String), CiliumNodeConfig>,
    /// Pods by (namespace, name).
    pub pods: BTreeMap<(String, String), Pod>,
    /// Namespaces by name.
    pub namespaces: BTreeMap<String, Namespace>,
    /// What the agent keeps of the CiliumEndpoints of every node, by (namespace, name)
    /// (Kubernetes only).
    pub endpoints: imbl::OrdMap<(String, String), Arc<EndpointSummary>>,
    /// CiliumIdentities by name (the numeric identity; Kubernetes only).
    pub identities: imbl::OrdMap<String, CiliumIdentity>,
    /// Documents that exist but could not be read, with the reason (never overwritten).
    pub problems: BTreeMap<PathBuf, String>,
    /// The first full read finished.
    pub synced: bool,
    /// The embedded store's count of directory reads, this one included (1 for the first);
    /// 0 from the Kubernetes store, whose objects carry resourceVersions instead.
    pub revision: u64,
}

/// How [`Snapshot::write_base`] names a read of the embedded store.
pub const EMBEDDED_BASE_PREFIX: &str = "weft-store-read-";

impl Snapshot {
    /// This agent's own CiliumNode, if it exists and parses.
    #[must_use]
    pub fn own_node(&self) -> Option<&CiliumNode> {
        self.nodes.get(&self.node_name)
    }

    /// The base of a write-back computed from this snapshot ([`Store::write_node`]): the own
    /// CiliumNode's resourceVersion (Kubernetes), or which read of the embedded store it is.
    #[must_use]
    pub fn write_base(&self) -> String {
        if self.revision > 0 {
            return format!("{EMBEDDED_BASE_PREFIX}{}", self.revision);
        }
        self.own_node()
            .map(|n| n.metadata.resource_version.clone())
            .unwrap_or_default()
    }
}

/// What the agent keeps of a CiliumEndpoint: where the pod is and who it is (for the IPCache),
/// and a digest of its status (to tell whether one of this node's own is up to date). The
/// whole object is not kept: a cluster has one per pod, and the ones cilium-agent writes carry
/// kilobytes of policy, health and controller state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointSummary {
    /// `status.identity.id`, when it is a security identity number.
    pub identity: Option<u32>,
    /// `status.networking.node`: the address of the node the pod runs on, if it parses.
    pub node_ip: Option<IpAddr>,
    /// The pod's addresses (`status.networking.addressing`) that parse.
    pub ips: Box<[IpAddr]>,
    /// [`status_digest`] of `status` as decoded.
    pub status_digest: u64,
}

impl From<&CiliumEndpoint> for EndpointSummary {
    fn from(cep: &CiliumEndpoint) -> Self {
        let status = cep.status.as_ref();
        let networking = status.and_then(|s| s.networking.as_ref());
        let ips = networking
            .into_iter()
            .flat_map(|n| &n.addressing)
            .flat_map(|pair| [&pair.ipv4, &pair.ipv6])
            .filter_map(|ip| ip.parse().ok())
            .collect();
        Self {
            identity: status
                .and_then(|s| s.identity.as_ref())
                .and_then(|id| u32::try_from(id.id).ok()),
            node_ip: networking.and_then(|n| n.node_ip.parse().ok()),
            ips,
            status_digest: status_digest(
                &serde_json::to_value(&cep.status).unwrap_or(serde_json::Value::Null),
            ),
        }
    }
}

/// A digest of a CiliumEndpoint's `status`: equal statuses have equal digests (JSON objects
/// serialize with sorted keys); different ones collide with a chance of about 2^-64.
#[must_use]
pub fn status_digest(status: &serde_json::Value) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    status.to_string().hash(&mut hasher);
    hasher.finish()
}

impl crate::ipam::selection::ObjectLookup for Snapshot {
    fn pod(&self, namespace: &str, name: &str) -> Option<Labelled<'_>> {
        self.pods
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|pod| Labelled::from(&pod.metadata))
    }

    fn namespace(&self, name: &str) -> Option<Labelled<'_>> {
        self.namespaces
            .get(name)
            .map(|namespace| Labelled::from(&namespace.metadata))
    }
}

/// What the agent writes back to its own CiliumNode (see [`NodeIpamWrite`]).
pub type NodeWrite = NodeIpamWrite;

/// What the operator's allocator, run in-process on the embedded store, writes to the own
/// CiliumNode: the parts Cilium's operator owns. `None` leaves a part as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorWrite {
    /// `spec.ipam.podCIDRs` (cluster-pool).
    pub pod_cidrs: Option<Vec<ipnet::IpNet>>,
    /// `spec.ipam.pools.allocated` (multi-pool).
    pub allocated: Option<Vec<crate::crd::ipam::IpamPoolAllocation>>,
    /// `status.ipam.operator-status.error`; an empty text clears it.
    pub error: Option<String>,
}

/// Coalesce two write-backs: each carries the whole of every part it has, so the newer part
/// wins and parts only the older one has are kept.
#[must_use]
pub fn merge_writes(old: Option<NodeWrite>, new: NodeWrite) -> NodeWrite {
    let old = old.unwrap_or_default();
    NodeWrite {
        used: new.used.or(old.used),
        release_ips: new.release_ips.or(old.release_ips),
        pools: new.pools.or(old.pools),
        cilium_internal_ips: new.cilium_internal_ips.or(old.cilium_internal_ips),
    }
}

/// A source of snapshots that accepts write-backs of the own CiliumNode.
pub trait Store {
    /// Snapshots, newest first; the receiver sees every change after the first full read.
    fn snapshots(&self) -> watch::Receiver<Arc<Snapshot>>;

    /// Record what the agent wants written, computed from the snapshot whose
    /// [`Snapshot::write_base`] is `base_version`; the store writes it debounced, only if it
    /// changes the document, and keeps every field the agent does not own.
    fn write_node(&self, write: NodeWrite, base_version: &str);

    /// Write a pending write-back now (shutdown, tests), bypassing the debounce.
    fn flush(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store directory cannot be used.
    #[error("store directory {path}: {source}; create it or pass another --store")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A document could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The document.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A document does not parse; it is reported and never overwritten.
    #[error("{path}: fix the document, weft will not overwrite it: {source}")]
    Parse {
        /// The document.
        path: PathBuf,
        /// What is wrong, with the offending field's path.
        #[source]
        source: ParseError,
    },
    /// The own CiliumNode document does not exist yet.
    #[error("CiliumNode {name} is not in the store ({path}); create it")]
    NoNode {
        /// The node name.
        name: String,
        /// Where it is expected.
        path: PathBuf,
    },
    /// Writing the own CiliumNode to the API server failed (the write stays queued). The
    /// source is the Kubernetes store's typed error (a 409 Conflict and a 5xx stay apart);
    /// print it with [`crate::error::chain`] to say why.
    #[error("writing CiliumNode")]
    Kube {
        /// The Kubernetes store's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Watching the directory failed.
    #[error("watching {path} for changes")]
    Watch {
        /// The directory.
        path: PathBuf,
        /// The inotify error.
        #[source]
        source: std::io::Error,
    },
}

/// Why a store document does not parse (its text is the whole reason, so a chain of
/// [`StoreError::Parse`] does not repeat it).
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The text is not valid JSON (a `.json` document).
    #[error("{source}")]
    Json {
        /// The parser's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The text is not valid YAML.
    #[error("{source}")]
    Yaml {
        /// The parser's error, with line and column.
        #[source]
        source: serde_norway::Error,
    },
    /// The document parses but a field does not match its type.
    #[error("field `{field}`: {source}")]
    Field {
        /// The offending field's path (`spec.ipam.pools.allocated[0].cidrs[0]`).
        field: String,
        /// What is wrong with it.
        #[source]
        source: serde_json::Error,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_endpoint_summary_keeps_where_and_who() {
        let cep: CiliumEndpoint = serde_json::from_value(json!({
            "metadata": {"name": "b", "namespace": "web"},
            "status": {"identity": {"id": 4242, "labels": ["k8s:app=web"]},
                       "networking": {"addressing": [{"ipv4": "10.2.0.7", "ipv6": "fd00::7"}],
                                      "node": "192.0.2.2"},
                       "policy": {"realized": {"allowed-ingress-identities": [1, 2, 3]}}},
        }))
        .expect("cep");
        let summary = EndpointSummary::from(&cep);
        assert_eq!(summary.identity, Some(4242));
        assert_eq!(summary.node_ip, Some("192.0.2.2".parse().unwrap()));
        assert_eq!(
            &*summary.ips,
            &[
                "10.2.0.7".parse::<IpAddr>().unwrap(),
                "fd00::7".parse().unwrap()
            ]
        );
        let status = serde_json::to_value(&cep.status).expect("status");
        assert_eq!(summary.status_digest, status_digest(&status));
        let mut other = status.clone();
        other["identity"]["id"] = json!(4243);
        assert_ne!(summary.status_digest, status_digest(&other));

        let bad: CiliumEndpoint = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "web"},
            "status": {"identity": {"id": -1},
                       "networking": {"addressing": [{"ipv4": "nope"}], "node": "n2"}},
        }))
        .expect("cep");
        let summary = EndpointSummary::from(&bad);
        assert_eq!(
            (summary.identity, summary.node_ip, summary.ips.len()),
            (None, None, 0),
            "what does not parse is left out"
        );
    }

    #[test]
    fn the_status_digest_does_not_depend_on_key_order() {
        // A status read from the API server (its key order) and one the agent builds compare
        // by digest; this fails if serde_json ever keeps insertion order (`preserve_order`).
        let a: serde_json::Value =
            serde_json::from_str(r#"{"id": 7, "state": "ready", "identity": {"id": 9}}"#)
                .expect("json");
        let b: serde_json::Value =
            serde_json::from_str(r#"{"identity": {"id": 9}, "state": "ready", "id": 7}"#)
                .expect("json");
        assert_eq!(status_digest(&a), status_digest(&b));
    }
}

//! The operator's allocators, in-process on a single host. With `--store` there is no
//! cilium-operator to answer the own CiliumNode, so the embedded store feeds its documents to
//! the same node manager the operator runs (`weft_cluster_ipam::manager`): cluster-pool hands
//! out `spec.ipam.podCIDRs` from the `cluster-pool-*` settings, multi-pool carves the
//! CiliumPodIPPools into `spec.ipam.pools.allocated` as `requested` grows and takes blocks back
//! when the agent drops them. The other nodes' documents are only observed (the agent never
//! writes them: exactly what each lists is held); every CiliumNode document is occupied first
//! (the restore), then the own node is answered; errors go to
//! `status.ipam.operator-status.error`.
//!
//! This module turns the store's snapshot into the manager's events and the manager's answer
//! into what to write ([`OperatorWrite`]); it allocates nothing itself. It reads no file and
//! writes none: the store calls [`InProcessOperator::reconcile`] with its snapshot and the
//! freshly read own document, under its writer lock. Against Kubernetes the real operator
//! does this, and nothing here runs.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
};

use tracing::{info, warn};
use weft_cluster_ipam::{
    Family,
    cidrset::CidrSetError,
    clusterpool::{ClusterPoolConfig, ClusterPoolError},
    manager::{ClusterPoolAllocator, MultiPoolAllocator, NodeManager, SpecPart, Write},
    node::NodeView,
    pool::PoolView,
};

use crate::{
    config::{
        AgentConfig,
        reference::{
            CLUSTER_POOL_IPV4_CIDR, CLUSTER_POOL_IPV4_MASK_SIZE, CLUSTER_POOL_IPV6_CIDR,
            CLUSTER_POOL_IPV6_MASK_SIZE,
        },
    },
    crd::{ipam::IpamPoolAllocation, node::CiliumNode, pool::CiliumPodIPPool},
    ipam::mode::IpamMode,
    store::{OperatorWrite, Snapshot},
};

/// Which allocator runs in-process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperatorConfig {
    /// Cluster-pool, from the `cluster-pool-*` settings.
    ClusterPool(ClusterPoolConfig),
    /// Multi-pool over the store's CiliumPodIPPools, for the enabled families.
    MultiPool {
        /// `enable-ipv4`.
        ipv4: bool,
        /// `enable-ipv6`.
        ipv6: bool,
    },
}

impl OperatorConfig {
    /// The in-process allocator for `config`: multi-pool in `multi-pool` mode; cluster-pool in
    /// `cluster-pool` mode once a `cluster-pool-ipv4-cidr` or `cluster-pool-ipv6-cidr` is set
    /// (without one the agent uses the podCIDRs written into its CiliumNode, as before); none
    /// in the other modes.
    #[must_use]
    pub fn for_agent(config: &AgentConfig) -> Option<Self> {
        match config.ipam {
            IpamMode::ClusterPool => {
                let pool = &config.cluster_pool;
                (!pool.ipv4.cidrs.is_empty() || !pool.ipv6.cidrs.is_empty())
                    .then(|| Self::ClusterPool(pool.clone()))
            }
            IpamMode::MultiPool => Some(Self::MultiPool {
                ipv4: config.enable_ipv4,
                ipv6: config.enable_ipv6,
            }),
            _ => None,
        }
    }
}

/// Why the in-process allocator cannot start.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The cluster-pool settings do not make an allocator (Cilium's text is the source).
    #[error("invalid {key} for the in-process cluster-pool allocator ({fix})")]
    ClusterPool {
        /// The cilium-config key to fix.
        key: &'static str,
        /// How.
        fix: &'static str,
        /// What the allocator said.
        #[source]
        source: ClusterPoolError,
    },
}

/// Which cluster-pool setting of a family an error points at.
#[derive(Clone, Copy)]
enum Setting {
    Cidr,
    MaskSize,
}

impl OperatorError {
    fn cluster_pool(source: ClusterPoolError) -> Self {
        let key = |family: Family, what: Setting| {
            let row = match (family, what) {
                (Family::V4, Setting::Cidr) => CLUSTER_POOL_IPV4_CIDR,
                (Family::V4, Setting::MaskSize) => CLUSTER_POOL_IPV4_MASK_SIZE,
                (Family::V6, Setting::Cidr) => CLUSTER_POOL_IPV6_CIDR,
                (Family::V6, Setting::MaskSize) => CLUSTER_POOL_IPV6_MASK_SIZE,
            };
            row.name()
        };
        let (key, fix) = match &source {
            ClusterPoolError::CidrRequired { family } => (
                key(*family, Setting::Cidr),
                "set it, or switch the family off with enable-ipv4/enable-ipv6",
            ),
            ClusterPoolError::CidrForbidden { family } => (
                key(*family, Setting::Cidr),
                "remove it, or switch the family on with enable-ipv4/enable-ipv6",
            ),
            ClusterPoolError::InitAllocator { family, source } => match source {
                CidrSetError::MaskSizeInvalid { .. }
                | CidrSetError::SubnetTooBig { .. }
                | CidrSetError::MaskShorterThanCluster { .. } => (
                    key(*family, Setting::MaskSize),
                    "use a node block prefix length between the CIDRs' prefix length and the \
                     address length (IPv6: at most 16 bits longer than the CIDR's)",
                ),
                CidrSetError::WrongFamily { .. } => (
                    key(*family, Setting::Cidr),
                    "list only CIDRs of that family",
                ),
                _ => (
                    key(*family, Setting::Cidr),
                    "list CIDRs that do not overlap",
                ),
            },
            _ => (
                CLUSTER_POOL_IPV4_CIDR.name(),
                "check the cluster-pool settings",
            ),
        };
        Self::ClusterPool { key, fix, source }
    }
}

/// The operator's allocator for one node's store.
#[derive(Debug)]
pub struct InProcessOperator {
    node_name: String,
    manager: NodeManager,
    /// Multi-pool mode (the whole `allocated` list is written each time).
    multi_pool: bool,
    /// The pool documents fed to the manager, by name (a pool is fed again when it changes).
    pools: BTreeMap<String, CiliumPodIPPool>,
    /// CiliumNode documents that do not parse and were never read: their blocks are unknown.
    unknown: BTreeSet<PathBuf>,
    /// The own node's last error, to log each one once.
    last_error: String,
}

impl InProcessOperator {
    /// The allocator of `config` for node `node_name`; nothing handed out before the first
    /// [`InProcessOperator::reconcile`].
    ///
    /// # Errors
    /// The cluster-pool settings do not make an allocator: the error names the key.
    pub fn new(config: &OperatorConfig, node_name: &str) -> Result<Self, OperatorError> {
        let manager = match config {
            OperatorConfig::ClusterPool(pool) => NodeManager::new(Box::new(
                ClusterPoolAllocator::new(pool).map_err(OperatorError::cluster_pool)?,
            )),
            OperatorConfig::MultiPool { ipv4, ipv6 } => {
                NodeManager::new(Box::new(MultiPoolAllocator::new(*ipv4, *ipv6)))
            }
        };
        Ok(Self {
            node_name: node_name.to_owned(),
            manager,
            multi_pool: matches!(config, OperatorConfig::MultiPool { .. }),
            pools: BTreeMap::new(),
            unknown: BTreeSet::new(),
            last_error: String::new(),
        })
    }

    /// One pass: feed the pools and the other nodes of `snapshot`, then answer `own` (the
    /// own CiliumNode as just read; `None`: it does not exist). The first pass occupies every
    /// node's blocks before it hands out any. Returns what to write to the own document, if
    /// anything; nothing while a CiliumNode document that was never read does not parse.
    pub fn reconcile(
        &mut self,
        snapshot: &Snapshot,
        own: Option<&CiliumNode>,
    ) -> Option<OperatorWrite> {
        if self.blocked(snapshot) {
            return None;
        }
        self.feed_pools(snapshot);
        let name = self.node_name.clone();
        let write = if self.manager.restored() {
            self.observe_others(snapshot);
            self.own(own)
        } else {
            // The own node's blocks first: its pods use them.
            let _ = self.own(own);
            self.observe_others(snapshot);
            let writes = self.manager.restore_finished();
            info!(
                nodes = snapshot.nodes.len(),
                "in-process allocator: every CiliumNode's blocks occupied"
            );
            writes.into_iter().find(|w| w.node == name)
        };
        let answer = self.answer(own.is_some(), write)?;
        if let Some(error) = &answer.error
            && *error != self.last_error
        {
            if error.is_empty() {
                info!(node = %name, "in-process allocator: the node's error is cleared");
            } else {
                warn!(node = %name, %error, "in-process allocator: status.ipam.operator-status.error");
            }
            self.last_error.clone_from(error);
        }
        Some(answer)
    }

    /// Feeds the own node as just read (`None`: it is gone, its blocks are released).
    fn own(&mut self, own: Option<&CiliumNode>) -> Option<Write> {
        let Some(node) = own else {
            let _ = self.manager.delete(&self.node_name);
            return None;
        };
        self.manager.upsert_current(NodeView::from_node(node))
    }

    /// What to write to the own document: cluster-pool's `podCIDRs` when they change,
    /// multi-pool's whole `allocated` list, and the error either way.
    fn answer(&self, exists: bool, write: Option<Write>) -> Option<OperatorWrite> {
        let view = self.manager.node(&self.node_name).filter(|_| exists)?;
        let (pod_cidrs, allocated) = match write.and_then(|w| w.spec) {
            // The allocator prints the prefixes it holds; they parse back.
            Some(SpecPart::PodCidrs(cidrs)) => (
                Some(cidrs.iter().filter_map(|c| c.parse().ok()).collect()),
                None,
            ),
            _ if self.multi_pool => (None, Some(allocations(view))),
            _ => (None, None),
        };
        Some(OperatorWrite {
            pod_cidrs,
            allocated,
            error: Some(view.operator_error.clone()),
        })
    }

    /// Upserts changed pools and deletes those whose document is gone.
    fn feed_pools(&mut self, snapshot: &Snapshot) {
        for (name, pool) in &snapshot.pools {
            if self.pools.get(name) == Some(pool) {
                continue;
            }
            self.pools.insert(name.clone(), pool.clone());
            let _ = self.manager.pool_upsert(PoolView::from_pool(pool));
        }
        let gone: Vec<String> = (self.pools.keys())
            .filter(|name| !snapshot.pools.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            self.pools.remove(&name);
            let _ = self.manager.pool_delete(&name);
        }
    }

    /// Observes every other node; forgets deleted ones.
    fn observe_others(&mut self, snapshot: &Snapshot) {
        let others = snapshot.nodes.iter().filter(|(n, _)| **n != self.node_name);
        for (_, node) in others {
            self.manager.observe(&NodeView::from_node(node));
        }
        let gone: Vec<String> = (self.manager.observed_names())
            .filter(|n| !snapshot.nodes.contains_key(*n))
            .map(str::to_owned)
            .collect();
        for name in gone {
            let _ = self.manager.delete(&name);
        }
    }

    /// Whether a CiliumNode document that was never read does not parse (logged when that
    /// set changes).
    fn blocked(&mut self, snapshot: &Snapshot) -> bool {
        let unknown: BTreeSet<PathBuf> = (snapshot.problems.keys())
            .filter(|path| {
                let dir = path.parent().and_then(|d| d.file_name());
                let name = path.file_stem().and_then(|n| n.to_str());
                dir.is_some_and(|d| d == "ciliumnodes")
                    && name.is_some_and(|n| !snapshot.nodes.contains_key(n))
            })
            .cloned()
            .collect();
        if unknown != self.unknown {
            for path in &unknown {
                warn!(path = %path.display(), "in-process allocator waits: this CiliumNode does not parse, so the blocks it holds are unknown; fix it");
            }
            self.unknown = unknown;
        }
        !self.unknown.is_empty()
    }
}

/// The manager's `spec.ipam.pools.allocated` of a node in the wire form.
fn allocations(view: &NodeView) -> Vec<IpamPoolAllocation> {
    (view.allocated.iter())
        .map(|a| IpamPoolAllocation {
            pool: a.pool.clone(),
            allow_first_ip: a.allow_first_ip,
            allow_last_ip: a.allow_last_ip,
            // The allocator prints the prefixes it holds; they parse back.
            cidrs: a.cidrs.iter().filter_map(|c| c.parse().ok()).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests;

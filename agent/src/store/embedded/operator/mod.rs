//! The operator's allocators, in-process on a single host. With `--store` there is no
//! cilium-operator to answer the own CiliumNode, so the embedded store runs weft-operator's
//! pure cores over its documents: cluster-pool hands out `spec.ipam.podCIDRs` from the
//! `cluster-pool-*` settings, multi-pool carves the CiliumPodIPPools into
//! `spec.ipam.pools.allocated` as `requested` grows and takes blocks back when the agent drops
//! them. Every CiliumNode document is occupied first (the restore), then the own node is
//! answered; errors go to `status.ipam.operator-status.error`.
//!
//! This module converts the wire types, feeds the cores and says what to write
//! ([`OperatorWrite`]). It reads no file and writes none: the store calls
//! [`InProcessOperator::reconcile`] with its snapshot and the freshly read own document, under
//! its writer lock. Against Kubernetes the real operator does this, and nothing here runs.

mod clusterpool;
mod multipool;

use std::{collections::BTreeSet, path::PathBuf};

use tracing::{info, warn};
use weft_cluster_ipam::{
    Family,
    cidrset::CidrSetError,
    clusterpool::{ClusterPoolConfig, ClusterPoolError},
};

use self::{clusterpool::ClusterPoolDriver, multipool::MultiPoolDriver};
use crate::{
    config::AgentConfig,
    crd::node::CiliumNode,
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
        key: String,
        /// How.
        fix: &'static str,
        /// What the allocator said.
        #[source]
        source: ClusterPoolError,
    },
}

impl OperatorError {
    fn cluster_pool(source: ClusterPoolError) -> Self {
        let key =
            |family: Family, what: &str| format!("cluster-pool-{}-{what}", family.flag_name());
        let (key, fix) = match &source {
            ClusterPoolError::CidrRequired { family } => (
                key(*family, "cidr"),
                "set it, or switch the family off with enable-ipv4/enable-ipv6",
            ),
            ClusterPoolError::CidrForbidden { family } => (
                key(*family, "cidr"),
                "remove it, or switch the family on with enable-ipv4/enable-ipv6",
            ),
            ClusterPoolError::InitAllocator { family, source } => match source {
                CidrSetError::MaskSizeInvalid { .. }
                | CidrSetError::SubnetTooBig { .. }
                | CidrSetError::MaskShorterThanCluster { .. } => (
                    key(*family, "mask-size"),
                    "use a node block prefix length between the CIDRs' prefix length and the \
                     address length (IPv6: at most 16 bits longer than the CIDR's)",
                ),
                CidrSetError::WrongFamily { .. } => {
                    (key(*family, "cidr"), "list only CIDRs of that family")
                }
                _ => (key(*family, "cidr"), "list CIDRs that do not overlap"),
            },
            _ => (
                "cluster-pool-ipv4-cidr".to_owned(),
                "check the cluster-pool settings",
            ),
        };
        Self::ClusterPool { key, fix, source }
    }
}

#[derive(Debug)]
enum Core {
    ClusterPool(ClusterPoolDriver),
    MultiPool(MultiPoolDriver),
}

/// The operator's allocator for one node's store.
#[derive(Debug)]
pub struct InProcessOperator {
    node_name: String,
    core: Core,
    restored: bool,
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
        let core = match config {
            OperatorConfig::ClusterPool(pool) => Core::ClusterPool(
                ClusterPoolDriver::new(pool).map_err(OperatorError::cluster_pool)?,
            ),
            OperatorConfig::MultiPool { ipv4, ipv6 } => {
                Core::MultiPool(MultiPoolDriver::new(*ipv4, *ipv6))
            }
        };
        Ok(Self {
            node_name: node_name.to_owned(),
            core,
            restored: false,
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
        let name = self.node_name.clone();
        if let Core::MultiPool(core) = &mut self.core {
            core.pools(snapshot);
        }
        if self.restored {
            self.others(snapshot, &name);
        } else {
            // The own node's blocks first: its pods use them.
            let _ = self.own(&name, own);
            self.others(snapshot, &name);
            match &mut self.core {
                Core::ClusterPool(core) => core.restore_finished(),
                Core::MultiPool(core) => core.restore_finished(),
            }
            self.restored = true;
            info!(
                nodes = snapshot.nodes.len(),
                "in-process allocator: every CiliumNode's blocks occupied"
            );
        }
        let write = self.own(&name, own)?;
        if let Some(error) = &write.error
            && *error != self.last_error
        {
            if error.is_empty() {
                info!(node = %name, "in-process allocator: the node's error is cleared");
            } else {
                warn!(node = %name, %error, "in-process allocator: status.ipam.operator-status.error");
            }
            self.last_error.clone_from(error);
        }
        Some(write)
    }

    fn own(&mut self, name: &str, own: Option<&CiliumNode>) -> Option<OperatorWrite> {
        match &mut self.core {
            Core::ClusterPool(core) => core.own(name, own),
            Core::MultiPool(core) => core.own(name, own),
        }
    }

    fn others(&mut self, snapshot: &Snapshot, own: &str) {
        match &mut self.core {
            Core::ClusterPool(core) => core.others(snapshot, own),
            Core::MultiPool(core) => core.others(snapshot, own),
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

#[cfg(test)]
mod tests;

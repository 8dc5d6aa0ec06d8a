//! Cluster-pool mode as an [`Allocator`]: each CiliumNode's `spec.ipam.podCIDRs` from the
//! cluster pool ([`ClusterPool`]).

use std::collections::BTreeSet;

use ipnet::IpNet;
use tracing::debug;

use super::{Allocator, BlockUsage, Desired, NodeUsage, ReconfigureError, SpecPart};
use crate::{
    Family,
    clusterpool::{ClusterPool, ClusterPoolConfig, ClusterPoolError},
    node::NodeView,
};

/// Addresses in a block (saturating at `u64::MAX`).
pub(super) fn block_addresses(net: &IpNet) -> u64 {
    let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
    1u64.checked_shl(host_bits).unwrap_or(u64::MAX)
}

/// The cluster-pool allocator behind the node manager.
#[derive(Debug)]
pub struct ClusterPoolAllocator {
    pool: ClusterPool,
}

impl ClusterPoolAllocator {
    /// Builds the cluster pool from `config`.
    ///
    /// # Errors
    /// Cilium's refusals: a missing or forbidden CIDR, a CIDR of the wrong family, colliding
    /// CIDRs, a mask size outside the limits.
    pub fn new(config: &ClusterPoolConfig) -> Result<Self, ClusterPoolError> {
        Ok(Self {
            pool: ClusterPool::new(config)?,
        })
    }
}

impl Allocator for ClusterPoolAllocator {
    fn upsert(&mut self, node: &NodeView) -> Desired {
        if let Some(text) = node.invalid_text() {
            return Desired {
                error: text,
                ..Desired::default()
            };
        }
        let result = self.pool.allocate_node(&node.name, &node.pod_cidrs);
        let error = match (&result.error, result.postponed) {
            (Some(e), _) => e.to_string(),
            (None, true) => node.operator_error.clone(),
            (None, false) => String::new(),
        };
        Desired {
            spec: result.pod_cidrs.map(SpecPart::PodCidrs),
            error,
            warnings: result
                .warnings
                .iter()
                .map(|w| match w {
                    crate::clusterpool::Warning::DuplicateCidr { error, .. } => {
                        format!("{w} error=\"{error}\"")
                    }
                })
                .collect(),
            postponed: result.postponed,
        }
    }

    fn reconfigure(&mut self, cluster_pool: &ClusterPoolConfig) -> Result<(), ReconfigureError> {
        self.pool
            .reconfigure(cluster_pool)
            .map_err(|source| ReconfigureError::ClusterPool { source })
    }

    fn occupy(&mut self, node: &NodeView) {
        let name = &node.name;
        let listed: BTreeSet<IpNet> = (node.pod_cidrs.iter())
            .filter_map(|c| c.parse::<IpNet>().ok())
            .map(|c| c.trunc())
            .collect();
        let held: BTreeSet<IpNet> =
            (self.pool.node_cidrs(name).unwrap_or_default().into_iter()).collect();
        if held == listed {
            return;
        }
        self.pool.release_node(name);
        if node.pod_cidrs.is_empty() {
            return;
        }
        let result = self.pool.allocate_node(name, &node.pod_cidrs);
        for warning in &result.warnings {
            debug!(node = %name, %warning, "another node's CiliumNode lists a block held elsewhere");
        }
        if let Some(error) = &result.error {
            debug!(node = %name, %error, "another node's podCIDRs are not all occupied");
        }
    }

    fn release(&mut self, node: &str) {
        self.pool.release_node(node);
    }

    fn restore_finished(&mut self) -> Vec<String> {
        self.pool.restore_finished()
    }

    fn usage(&self, node: &NodeView) -> NodeUsage {
        let held = self.pool.node_cidrs(&node.name).unwrap_or_default();
        NodeUsage {
            available: held
                .iter()
                .map(block_addresses)
                .fold(0, u64::saturating_add),
            needed: 0,
        }
    }

    fn blocks(&self) -> Vec<BlockUsage> {
        let stats = self.pool.stats();
        [(Family::V4, stats.ipv4), (Family::V6, stats.ipv6)]
            .into_iter()
            .filter(|(_, s)| s.in_use + s.free + s.reserved > 0)
            .map(|(family, s)| BlockUsage {
                pool: "cluster-pool".to_owned(),
                family,
                in_use: s.in_use,
                free: s.free,
            })
            .collect()
    }
}

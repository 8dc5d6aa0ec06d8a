//! The cluster-pool side of the in-process operator: weft-operator's [`ClusterPool`] fed with
//! the store's CiliumNodes. Other nodes' documents are the truth for their blocks (the agent
//! never writes them): exactly what each lists is occupied, again whenever that differs from
//! what it holds. The own node goes through Cilium's per-node flow, whose result becomes
//! `spec.ipam.podCIDRs` and `status.ipam.operator-status.error`.

use std::collections::BTreeSet;

use ipnet::IpNet;
use tracing::{debug, warn};
use weft_cluster_ipam::clusterpool::{ClusterPool, ClusterPoolConfig, ClusterPoolError, Warning};

use crate::{
    crd::node::CiliumNode,
    store::{OperatorWrite, Snapshot},
};

/// The cluster-pool allocator and the other nodes it was fed.
#[derive(Debug)]
pub(super) struct ClusterPoolDriver {
    pool: ClusterPool,
    others: BTreeSet<String>,
}

impl ClusterPoolDriver {
    /// Validates the settings and builds the allocator (not ready).
    pub(super) fn new(config: &ClusterPoolConfig) -> Result<Self, ClusterPoolError> {
        Ok(Self {
            pool: ClusterPool::new(config)?,
            others: BTreeSet::new(),
        })
    }

    /// Every node was fed once: fresh blocks may now be handed out.
    pub(super) fn restore_finished(&mut self) {
        let _postponed = self.pool.restore_finished();
    }

    /// Occupies exactly what each other node lists; forgets deleted nodes.
    pub(super) fn others(&mut self, snapshot: &Snapshot, own: &str) {
        let mut seen = BTreeSet::new();
        for (name, node) in snapshot.nodes.iter().filter(|(name, _)| *name != own) {
            seen.insert(name.clone());
            let listed: BTreeSet<IpNet> = (node.ipam_spec().pod_cidrs.iter())
                .map(IpNet::trunc)
                .collect();
            let held: BTreeSet<IpNet> = self
                .pool
                .node_cidrs(name)
                .unwrap_or_default()
                .into_iter()
                .collect();
            if held == listed {
                continue;
            }
            self.pool.release_node(name);
            if listed.is_empty() {
                continue;
            }
            let result = self
                .pool
                .allocate_node(name, &strings(&node.ipam_spec().pod_cidrs));
            for warning in &result.warnings {
                debug!(node = %name, %warning, "another node's CiliumNode lists a block held elsewhere");
            }
            if let Some(error) = &result.error {
                debug!(node = %name, %error, "another node's podCIDRs are not all occupied");
            }
        }
        for gone in self.others.difference(&seen) {
            self.pool.release_node(gone);
        }
        self.others = seen;
    }

    /// The own node's answer (`None`: nothing to write yet, or the node is gone).
    pub(super) fn own(&mut self, name: &str, node: Option<&CiliumNode>) -> Option<OperatorWrite> {
        let Some(node) = node else {
            self.pool.release_node(name);
            return None;
        };
        let result = self
            .pool
            .allocate_node(name, &strings(&node.ipam_spec().pod_cidrs));
        for warning in &result.warnings {
            let Warning::DuplicateCidr { error, .. } = warning;
            warn!(node = %name, %error, "{warning}");
        }
        if result.postponed && result.pod_cidrs.is_none() && result.error.is_none() {
            return None;
        }
        let pod_cidrs = result.pod_cidrs.map(|cidrs| {
            // The allocator prints the prefixes it holds; they parse back.
            cidrs.iter().filter_map(|c| c.parse().ok()).collect()
        });
        Some(OperatorWrite {
            pod_cidrs,
            allocated: None,
            error: Some(result.error.map(|e| e.to_string()).unwrap_or_default()),
        })
    }
}

fn strings(cidrs: &[IpNet]) -> Vec<String> {
    cidrs.iter().map(ToString::to_string).collect()
}

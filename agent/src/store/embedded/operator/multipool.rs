//! The multi-pool side of the in-process operator: weft-operator's [`PoolAllocator`] fed with
//! the store's CiliumPodIPPools and CiliumNodes. A pool is upserted when its document changes
//! (a pool that does not convert, or that the allocator refuses, keeps its last accepted
//! version, and is reported once); other nodes only occupy what they list; the own node's
//! `requested` is carved into `spec.ipam.pools.allocated`, with the pools'
//! `allowFirstIP`/`allowLastIP` copied as Cilium's operator does.

use std::collections::{BTreeMap, BTreeSet};

use tracing::{debug, info, warn};
use weft_cluster_ipam::{
    multipool::{Allocated, PoolAllocator, PoolSpec, Requested, Warning},
    pool::pool_spec,
};

use crate::{
    crd::{ipam::IpamPoolAllocation, node::CiliumNode},
    store::{OperatorWrite, Snapshot},
};

/// The multi-pool allocator and the pool specs it was given.
#[derive(Debug)]
pub(super) struct MultiPoolDriver {
    allocator: PoolAllocator,
    /// The specs the allocator holds, by pool.
    applied: BTreeMap<String, PoolSpec>,
    /// Pools whose current document was refused, with the reason (reported once).
    refused: BTreeMap<String, String>,
    /// The other nodes fed last time.
    others: BTreeSet<String>,
}

impl MultiPoolDriver {
    /// An allocator serving the enabled families, without pools, not ready.
    pub(super) fn new(ipv4: bool, ipv6: bool) -> Self {
        Self {
            allocator: PoolAllocator::new(ipv4, ipv6),
            applied: BTreeMap::new(),
            refused: BTreeMap::new(),
            others: BTreeSet::new(),
        }
    }

    /// Every node was fed once: blocks may now be carved.
    pub(super) fn restore_finished(&mut self) {
        self.allocator.restore_finished();
    }

    /// Upserts changed pools and deletes those whose document is gone.
    pub(super) fn pools(&mut self, snapshot: &Snapshot) {
        for (name, pool) in &snapshot.pools {
            let result = pool_spec(pool).map_err(|e| e.to_string()).and_then(|spec| {
                if self.applied.get(name) == Some(&spec) {
                    return Ok(None);
                }
                let warnings = self
                    .allocator
                    .upsert_pool(name, &spec)
                    .map_err(|e| format!("CiliumPodIPPool {name}: {e}"))?;
                Ok(Some((spec, warnings)))
            });
            match result {
                Ok(None) => {
                    self.refused.remove(name);
                }
                Ok(Some((spec, warnings))) => {
                    log_warnings(&warnings);
                    debug!(pool = %name, "pool applied");
                    self.applied.insert(name.clone(), spec);
                    self.refused.remove(name);
                }
                Err(reason) => {
                    if self.refused.get(name) != Some(&reason) {
                        warn!(pool = %name, %reason, "pool not applied; the allocator keeps its last accepted version");
                        self.refused.insert(name.clone(), reason);
                    }
                }
            }
        }
        let gone: Vec<String> = (self.applied.keys())
            .filter(|name| !snapshot.pools.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            self.applied.remove(&name);
            self.refused.remove(&name);
            match self.allocator.delete_pool(&name) {
                Ok(warnings) => log_warnings(&warnings),
                Err(error) => debug!(pool = %name, %error, "deleting a pool"),
            }
        }
        self.refused
            .retain(|name, _| snapshot.pools.contains_key(name));
    }

    /// Occupies what every other node lists (they request nothing here); forgets deleted nodes.
    pub(super) fn others(&mut self, snapshot: &Snapshot, own: &str) {
        let mut seen = BTreeSet::new();
        for (name, node) in snapshot.nodes.iter().filter(|(name, _)| *name != own) {
            seen.insert(name.clone());
            if let Err(failure) = self
                .allocator
                .allocate_to_node(name, &[], &allocated_of(node))
                && !failure.is_not_ready()
            {
                debug!(node = %name, error = %failure, "another node's allocated CIDRs are not all occupied");
            }
        }
        for gone in self.others.difference(&seen) {
            self.allocator.release_node(gone);
        }
        self.others = seen;
    }

    /// The own node's answer (`None`: nothing to write yet, or the node is gone).
    pub(super) fn own(&mut self, name: &str, node: Option<&CiliumNode>) -> Option<OperatorWrite> {
        let Some(node) = node else {
            self.allocator.release_node(name);
            return None;
        };
        let requested: Vec<Requested> = (node.ipam_spec().pools().requested.iter())
            .map(|r| Requested {
                pool: r.pool.clone(),
                ipv4_addrs: u64::from(r.needed.ipv4_addrs),
                ipv6_addrs: u64::from(r.needed.ipv6_addrs),
            })
            .collect();
        let error = match self
            .allocator
            .allocate_to_node(name, &requested, &allocated_of(node))
        {
            Ok(()) => String::new(),
            Err(failure) if failure.is_not_ready() => return None,
            Err(failure) => failure.to_string(),
        };
        let allocated = (self.allocator.allocated_pools(name).into_iter())
            .map(|a| IpamPoolAllocation {
                pool: a.pool,
                allow_first_ip: a.allow_first_ip,
                allow_last_ip: a.allow_last_ip,
                // The allocator prints the prefixes it holds; they parse back.
                cidrs: a.cidrs.iter().filter_map(|c| c.parse().ok()).collect(),
            })
            .collect();
        Some(OperatorWrite {
            pod_cidrs: None,
            allocated: Some(allocated),
            error: Some(error),
        })
    }
}

/// A node's `spec.ipam.pools.allocated` as the allocator's input.
fn allocated_of(node: &CiliumNode) -> Vec<Allocated> {
    (node.ipam_spec().pools().allocated.iter())
        .map(|a| Allocated {
            pool: a.pool.clone(),
            cidrs: a.cidrs.iter().map(ToString::to_string).collect(),
            ..Allocated::default()
        })
        .collect()
}

fn log_warnings(warnings: &[Warning]) {
    for warning in warnings {
        match warning {
            Warning::Readopted { cidr, pool, node } => {
                info!(%cidr, %pool, %node, "{warning}");
            }
            Warning::CidrStillInUse { cidr, pool, node } => {
                warn!(%cidr, %pool, %node, "{warning}");
            }
            Warning::ReadoptFailed {
                pool, node, error, ..
            } => warn!(%pool, %node, %error, "{warning}"),
            Warning::PoolStillInUse { pool, node } => warn!(%pool, %node, "{warning}"),
        }
    }
}

//! Multi-pool mode as an [`Allocator`]: blocks of CiliumPodIPPools carved into each
//! CiliumNode's `spec.ipam.pools.allocated` as its `requested` demand grows
//! ([`PoolAllocator`]). A node's `spec.ipam.podCIDRs` (not migrated from cluster-pool) are
//! kept taken ([`PoolAllocator::pin`]), and the migration's refusal it shows is kept in its
//! `operator-status`.

use std::collections::BTreeMap;

use ipnet::IpNet;
use tracing::debug;

use super::{
    Allocator, BlockUsage, Desired, NodeUsage, PoolRefused, SpecPart, clusterpool::block_addresses,
};
use crate::{
    Family, migration,
    multipool::{PoolAllocator, PoolSpec, Warning},
    node::NodeView,
};

/// The multi-pool allocator behind the node manager.
#[derive(Debug)]
pub struct MultiPoolAllocator {
    pools: PoolAllocator,
    /// The CIDRs of each applied pool, to refuse a pool overlapping another.
    cidrs: BTreeMap<String, Vec<IpNet>>,
}

impl MultiPoolAllocator {
    /// An allocator with no pools yet, for the enabled families.
    #[must_use]
    pub fn new(ipv4: bool, ipv6: bool) -> Self {
        Self {
            pools: PoolAllocator::new(ipv4, ipv6),
            cidrs: BTreeMap::new(),
        }
    }
}

fn warning_line(w: &Warning) -> String {
    match w {
        Warning::CidrStillInUse { cidr, pool, node }
        | Warning::Readopted { cidr, pool, node }
        | Warning::ReadoptFailed {
            cidr, pool, node, ..
        } => format!("{w} cidr={cidr} pool={pool} node={node}"),
        Warning::PoolStillInUse { pool, node } => format!("{w} pool={pool} node={node}"),
    }
}

/// Usable addresses of a block, with the first/last rule of its pool.
fn usable(cidr: &IpNet, first: bool, last: bool) -> u64 {
    let all = block_addresses(cidr);
    if all <= 2 {
        return all;
    }
    all - u64::from(!first) - u64::from(!last)
}

/// The node's `spec.ipam.podCIDRs` that parse (held outside every pool until migrated).
fn pod_cidrs(node: &NodeView) -> Vec<IpNet> {
    (node.pod_cidrs.iter())
        .filter_map(|c| c.parse::<IpNet>().ok())
        .map(|c| c.trunc())
        .collect()
}

/// The migration's refusal the node still shows, while it keeps its podCIDRs (the operator's
/// migration pass wrote it; the allocator does not know the reason, and must not clear it).
fn migration_error(node: &NodeView) -> Option<&str> {
    (!node.pod_cidrs.is_empty() && node.operator_error.starts_with(migration::FAILED_PREFIX))
        .then_some(node.operator_error.as_str())
}

/// `own` after the migration's refusal, one per line.
fn with_migration_error(node: &NodeView, own: String) -> String {
    match migration_error(node) {
        Some(refusal) if own.is_empty() => refusal.to_owned(),
        Some(refusal) => format!("{refusal}\n{own}"),
        None => own,
    }
}

impl Allocator for MultiPoolAllocator {
    fn upsert(&mut self, node: &NodeView) -> Desired {
        self.pools.pin(&node.name, pod_cidrs(node));
        if let Some(text) = node.invalid_text() {
            return Desired {
                error: text,
                ..Desired::default()
            };
        }
        match self
            .pools
            .allocate_to_node(&node.name, &node.requested, &node.allocated)
        {
            Err(failure) if failure.is_not_ready() => Desired {
                error: node.operator_error.clone(),
                postponed: true,
                ..Desired::default()
            },
            result => Desired {
                spec: Some(SpecPart::PoolsAllocated(
                    self.pools.allocated_pools(&node.name),
                )),
                error: with_migration_error(
                    node,
                    result
                        .err()
                        .map(|f| format!("multi-pool allocation failed: {f}"))
                        .unwrap_or_default(),
                ),
                ..Desired::default()
            },
        }
    }

    fn occupy(&mut self, node: &NodeView) {
        self.pools.pin(&node.name, pod_cidrs(node));
        if let Err(failure) = self
            .pools
            .allocate_to_node(&node.name, &[], &node.allocated)
            && !failure.is_not_ready()
        {
            debug!(node = %node.name, error = %failure, "another node's allocated CIDRs are not all occupied");
        }
    }

    fn release(&mut self, node: &str) {
        self.pools.release_node(node);
    }

    fn restore_finished(&mut self) -> Vec<String> {
        self.pools.restore_finished();
        Vec::new()
    }

    fn pool_upsert(&mut self, name: &str, spec: &PoolSpec) -> Result<Vec<String>, PoolRefused> {
        let mine: Vec<(&str, IpNet)> = [("ipv4", &spec.ipv4), ("ipv6", &spec.ipv6)]
            .into_iter()
            .filter_map(|(f, s)| s.as_ref().map(|s| (f, s)))
            .flat_map(|(f, s)| s.cidrs.iter().map(move |c| (f, *c)))
            .collect();
        for (other, theirs) in self.cidrs.iter().filter(|(n, _)| *n != name) {
            for (family, cidr) in &mine {
                if let Some(clash) = theirs
                    .iter()
                    .find(|t| t.contains(&cidr.network()) || cidr.contains(&t.network()))
                {
                    return Err(PoolRefused::Overlap {
                        pool: name.to_owned(),
                        family,
                        cidr: *cidr,
                        clash: *clash,
                        other: other.clone(),
                    });
                }
            }
        }
        let warnings =
            self.pools
                .upsert_pool(name, spec)
                .map_err(|source| PoolRefused::Rejected {
                    pool: name.to_owned(),
                    source,
                })?;
        self.cidrs
            .insert(name.to_owned(), mine.into_iter().map(|(_, c)| c).collect());
        Ok(warnings.iter().map(warning_line).collect())
    }

    fn pool_delete(&mut self, name: &str) -> Vec<String> {
        self.cidrs.remove(name);
        match self.pools.delete_pool(name) {
            Ok(warnings) => warnings.iter().map(warning_line).collect(),
            Err(error) => vec![error.to_string()],
        }
    }

    fn usage(&self, node: &NodeView) -> NodeUsage {
        let mut available = [0u64; 2];
        for entry in self.pools.allocated_pools(&node.name) {
            for cidr in entry.cidrs.iter().filter_map(|c| c.parse::<IpNet>().ok()) {
                let slot = usize::from(Family::of(&cidr) == Family::V6);
                available[slot] = available[slot].saturating_add(usable(
                    &cidr,
                    entry.allow_first_ip,
                    entry.allow_last_ip,
                ));
            }
        }
        let requested = node.requested.iter().fold([0u64; 2], |acc, r| {
            [
                acc[0].saturating_add(r.ipv4_addrs),
                acc[1].saturating_add(r.ipv6_addrs),
            ]
        });
        NodeUsage {
            available: available[0].saturating_add(available[1]),
            needed: requested[0].saturating_sub(available[0])
                + requested[1].saturating_sub(available[1]),
        }
    }

    fn blocks(&self) -> Vec<BlockUsage> {
        self.pools
            .pool_stats()
            .into_iter()
            .flat_map(|p| {
                [(Family::V4, p.ipv4), (Family::V6, p.ipv6)]
                    .into_iter()
                    .filter(|(_, s)| s.in_use + s.free + s.reserved > 0)
                    .map(move |(family, s)| BlockUsage {
                        pool: p.pool.clone(),
                        family,
                        in_use: s.in_use,
                        free: s.free,
                    })
            })
            .collect()
    }
}

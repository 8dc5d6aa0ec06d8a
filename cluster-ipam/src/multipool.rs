//! [`PoolAllocator`]: Cilium's multi-pool operator allocator
//! (`operator/pkg/ipam/allocator/multipool`). It owns the CiliumPodIPPool pools (one list of
//! [`CidrSet`](super::cidrset::CidrSet)s per family), which node holds which blocks of which pool, and the orphans:
//! blocks nodes still hold whose pool or cluster CIDR is gone. It never reads or writes a
//! CiliumNode or a CiliumPodIPPool: the caller passes specs in and writes
//! [`PoolAllocator::allocated_pools`] and the error text out.
//!
//! Pool updates live in `upsert`, node carving in `carve`, one pool's sets in `pool`, the
//! input, output and warning types in `types`.
//!
//! `reservedRanges` (CiliumPodIPPool v2) are honoured: no new block overlaps one; a block a
//! node holds inside one stays with it until released, and is not handed out again while
//! the range is reserved.

mod carve;
mod pool;
mod types;
mod upsert;

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;
use thiserror::Error;

use self::pool::Pool;
pub use self::types::{Allocated, FamilySpec, PoolSpec, PoolStats, Requested, Warning};
pub use crate::cidrset::ReservedRange;
use crate::{Family, cidrset::CidrSetError};

/// Errors of the multi-pool allocator (Cilium's texts unless said otherwise).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MultiPoolError {
    /// An upsert changed a family's mask size (absent family = 0).
    #[error("cannot change {family} mask size in existing pool {pool:?}")]
    MaskSizeChanged {
        /// The pool.
        pool: String,
        /// The family.
        family: Family,
    },
    /// An upsert changed `allowFirstIP` or `allowLastIP`.
    #[error("cannot change allowFirstIP/allowLastIP in existing pool {pool:?}")]
    FirstLastIpChanged {
        /// The pool.
        pool: String,
    },
    /// A family's CIDR list does not make sets (ours: names the pool).
    #[error("pool {pool:?}: {source}")]
    Cidrs {
        /// The pool.
        pool: String,
        /// What the set builder said.
        #[source]
        source: CidrSetError,
    },
    /// A reserved range lies in none of the pool's CIDRs (ours).
    #[error(
        "reserved range {range} of pool {pool:?} is not an ordered range inside one of its CIDRs"
    )]
    ReservedRangeOutside {
        /// The pool.
        pool: String,
        /// The range.
        range: ReservedRange,
    },
    /// `delete_pool` of an unknown pool.
    #[error("pool {pool:?} requested for deletion doesn't exist")]
    PoolNotFoundForDeletion {
        /// The pool.
        pool: String,
    },
    /// Allocation before [`PoolAllocator::restore_finished`] (`ErrAllocatorNotReady`).
    #[error("allocator not ready")]
    NotReady,
    /// A `spec.ipam.pools.allocated` entry is not a CIDR (ours: names the field).
    #[error(
        "failed to parse CIDR {value:?} of pool {pool:?} in spec.ipam.pools.allocated: {source}"
    )]
    InvalidAllocatedCidr {
        /// The pool of the entry.
        pool: String,
        /// The value as written.
        value: String,
        /// The parser's complaint.
        #[source]
        source: ipnet::AddrParseError,
    },
    /// An allocated CIDR of a pool that does not exist: kept as an orphan.
    #[error(
        "unable to find pool {pool}, prefix {cidr} is still allocated to the node but is marked \
         as orphan"
    )]
    OrphanUnknownPool {
        /// The pool named by the node.
        pool: String,
        /// The CIDR.
        cidr: IpNet,
    },
    /// An allocated CIDR (partly) held by another node.
    #[error("unable to reuse from pool {pool}: cidr {cidr} has already been allocated")]
    AlreadyAllocated {
        /// The pool.
        pool: String,
        /// The CIDR.
        cidr: IpNet,
    },
    /// An allocated CIDR outside every CIDR of its pool.
    #[error("unable to reuse from pool {pool}: cidr {cidr} is not part of the requested pool")]
    NotInPool {
        /// The pool.
        pool: String,
        /// The CIDR.
        cidr: IpNet,
    },
    /// A requested pool does not exist (Cilium's text plus the fix).
    #[error(
        "failed to allocate {} address for node {node:?} from pool {pool:?}: cannot allocate from \
         non-existing pool: {pool} (create the CiliumPodIPPool {pool:?} or stop requesting it)",
        family.flag_name()
    )]
    UnknownPool {
        /// The node.
        node: String,
        /// The pool.
        pool: String,
        /// The family asked for.
        family: Family,
    },
    /// Every CIDR of the pool's family is full.
    #[error(
        "failed to allocate {} address for node {node:?} from pool {pool:?}: pool empty",
        family.flag_name()
    )]
    PoolEmpty {
        /// The node.
        node: String,
        /// The pool.
        pool: String,
        /// The family asked for.
        family: Family,
    },
}

/// Checks `spec` as the allocator takes a new pool `name` (CIDR families, collisions, mask
/// sizes), without an allocator: for pools created from the configuration, refused before
/// they reach the cluster.
///
/// # Errors
/// [`MultiPoolError::Cidrs`] or [`MultiPoolError::ReservedRangeOutside`], as
/// [`PoolAllocator::upsert_pool`] would refuse the pool.
pub fn check_pool(name: &str, spec: &PoolSpec) -> Result<(), MultiPoolError> {
    Pool::plan(name, None, spec).map(drop)
}

/// Every error of one [`PoolAllocator::allocate_to_node`] run; the other pools were still
/// served. Displays like Go's `errors.Join` (one per line), the inner text of
/// `status.ipam.operator-status.error`.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{}", join(errors))]
pub struct AllocateFailure {
    /// In the order they happened.
    pub errors: Vec<MultiPoolError>,
}

impl AllocateFailure {
    /// Whether this is only [`MultiPoolError::NotReady`] (retry after the restore).
    #[must_use]
    pub fn is_not_ready(&self) -> bool {
        self.errors == [MultiPoolError::NotReady]
    }
}

fn join(errors: &[MultiPoolError]) -> String {
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    texts.join("\n")
}

/// The blocks of one node in one pool, per family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct FamilyCidrs {
    v4: BTreeSet<IpNet>,
    v6: BTreeSet<IpNet>,
}

impl FamilyCidrs {
    const fn family(&self, family: Family) -> &BTreeSet<IpNet> {
        match family {
            Family::V4 => &self.v4,
            Family::V6 => &self.v6,
        }
    }

    fn insert(&mut self, cidr: IpNet) {
        match Family::of(&cidr) {
            Family::V4 => self.v4.insert(cidr),
            Family::V6 => self.v6.insert(cidr),
        };
    }

    fn remove(&mut self, cidr: &IpNet) -> bool {
        match Family::of(cidr) {
            Family::V4 => self.v4.remove(cidr),
            Family::V6 => self.v6.remove(cidr),
        }
    }

    fn contains(&self, cidr: &IpNet) -> bool {
        self.family(Family::of(cidr)).contains(cidr)
    }

    fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = &IpNet> {
        self.v4.iter().chain(&self.v6)
    }
}

/// node → pool → blocks.
type Holdings = BTreeMap<String, BTreeMap<String, FamilyCidrs>>;

/// Adds `cidr` to `node`'s blocks of `pool` in `holdings`.
fn hold(holdings: &mut Holdings, node: &str, pool: &str, cidr: IpNet) {
    holdings
        .entry(node.to_owned())
        .or_default()
        .entry(pool.to_owned())
        .or_default()
        .insert(cidr);
}

/// Removes `cidr` from `node`'s blocks of `pool`, dropping emptied entries.
fn unhold(holdings: &mut Holdings, node: &str, pool: &str, cidr: &IpNet) -> bool {
    let Some(pools) = holdings.get_mut(node) else {
        return false;
    };
    let removed = pools.get_mut(pool).is_some_and(|cidrs| cidrs.remove(cidr));
    if pools.get(pool).is_some_and(FamilyCidrs::is_empty) {
        pools.remove(pool);
    }
    if pools.is_empty() {
        holdings.remove(node);
    }
    removed
}

/// The multi-pool allocator.
#[derive(Clone, Debug)]
pub struct PoolAllocator {
    ipv4_enabled: bool,
    ipv6_enabled: bool,
    pools: BTreeMap<String, Pool>,
    nodes: Holdings,
    orphans: Holdings,
    /// Blocks nodes hold outside every pool (unmigrated `spec.ipam.podCIDRs`): reserved in
    /// every pool they overlap.
    pinned: BTreeMap<String, Vec<IpNet>>,
    ready: bool,
}

impl PoolAllocator {
    /// An allocator without pools, serving the enabled families, not ready.
    #[must_use]
    pub const fn new(ipv4_enabled: bool, ipv6_enabled: bool) -> Self {
        Self {
            ipv4_enabled,
            ipv6_enabled,
            pools: BTreeMap::new(),
            nodes: BTreeMap::new(),
            orphans: BTreeMap::new(),
            pinned: BTreeMap::new(),
            ready: false,
        }
    }

    /// Every existing CiliumNode was passed once: blocks may now be handed out.
    pub const fn restore_finished(&mut self) {
        self.ready = true;
    }

    /// Whether [`PoolAllocator::restore_finished`] was called.
    #[must_use]
    pub const fn is_ready(&self) -> bool {
        self.ready
    }

    /// Releases every block of `node` (CiliumNode deleted) and forgets its orphans
    /// (Cilium keeps a deleted node's orphans).
    pub fn release_node(&mut self, node: &str) {
        self.orphans.remove(node);
        self.pin(node, Vec::new());
        let Some(pools) = self.nodes.remove(node) else {
            return;
        };
        for (name, cidrs) in pools {
            if let Some(pool) = self.pools.get_mut(&name) {
                for cidr in cidrs.iter() {
                    pool.release(cidr);
                }
            }
        }
    }

    /// Keeps `cidrs`, blocks `node` holds outside every pool (its `spec.ipam.podCIDRs` not
    /// migrated to multi-pool), taken: no block overlapping one is handed out, in any pool,
    /// until the node drops them (an empty list) or is released. Blocks already held stay.
    pub fn pin(&mut self, node: &str, mut cidrs: Vec<IpNet>) {
        cidrs.sort_unstable();
        cidrs.dedup();
        let unchanged = match self.pinned.get(node) {
            Some(old) => *old == cidrs,
            None => cidrs.is_empty(),
        };
        if unchanged {
            return;
        }
        if cidrs.is_empty() {
            self.pinned.remove(node);
        } else {
            self.pinned.insert(node.to_owned(), cidrs);
        }
        self.apply_pins(None);
    }

    /// Re-reserves the pins in every pool (or only in `only`).
    pub(super) fn apply_pins(&mut self, only: Option<&str>) {
        let pins: Vec<IpNet> = self.pinned.values().flatten().copied().collect();
        for (name, pool) in &mut self.pools {
            if only.is_some_and(|o| o != name) {
                continue;
            }
            // The spec's ranges were checked when the pool was applied and the pins are
            // clipped to each set, so this cannot be refused.
            let _ = pool.set_pins(name, &pins);
        }
    }

    /// The node's `spec.ipam.pools.allocated`: held blocks and orphans per pool, pools by
    /// name, CIDRs v4 then v6, each ordered like `netip.Prefix.Compare`.
    #[must_use]
    pub fn allocated_pools(&self, node: &str) -> Vec<Allocated> {
        let mut merged: BTreeMap<&str, Vec<IpNet>> = BTreeMap::new();
        for holdings in [&self.nodes, &self.orphans] {
            for (pool, cidrs) in holdings.get(node).into_iter().flatten() {
                merged
                    .entry(pool)
                    .or_default()
                    .extend(cidrs.iter().copied());
            }
        }
        merged
            .into_iter()
            .map(|(name, mut cidrs)| {
                cidrs.sort_by(crate::family::prefix_cmp);
                cidrs.dedup();
                let (allow_first_ip, allow_last_ip) =
                    self.pools.get(name).map_or((false, false), Pool::flags);
                Allocated {
                    pool: name.to_owned(),
                    cidrs: cidrs.iter().map(ToString::to_string).collect(),
                    allow_first_ip,
                    allow_last_ip,
                }
            })
            .collect()
    }

    /// Block counts per pool, by name.
    #[must_use]
    pub fn pool_stats(&self) -> Vec<PoolStats> {
        self.pools
            .iter()
            .map(|(name, pool)| PoolStats {
                pool: name.clone(),
                ipv4: pool.stats(Family::V4),
                ipv6: pool.stats(Family::V6),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;

//! The multi-pool manager (Cilium `pkg/ipam/multipool_manager.go`, `pool.go`) used by the
//! `multi-pool` mode and, with linear pre-allocation, by `eni`: pools of CIDRs per family fed
//! from `spec.ipam.pools.allocated`, allocation with pending-allocation bookkeeping, the
//! demand written to `spec.ipam.pools.requested` ([`demand`]) and the write-back of
//! `spec.ipam.pools` with excess CIDRs released ([`writeback`]). Pure: the caller feeds
//! `CiliumNode` upserts, passes `now` and randomness, and does the write. Pool selection for
//! a pod is not here.

mod alloc;
mod cidr;
pub mod demand;
mod pending;
pub mod writeback;

use std::{collections::BTreeMap, net::IpAddr};

use cidr::CidrPool;
use ipnet::IpNet;
pub use pending::PENDING_ALLOCATION_TTL;
use pending::Pending;
use thiserror::Error;
use tracing::warn;

use super::{Family, hostscope::HostScopeError, prealloc::PreAllocMap};
use crate::crd::ipam::IpamPoolAllocation;

/// The pool whose pre-allocation `spec.ipam.pre-allocate` overrides (always this literal
/// name, not the configured default pool).
pub const PRE_ALLOCATE_OVERRIDE_POOL: &str = "default";

/// Errors of the multi-pool manager, with Cilium's texts.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MultiPoolError {
    /// The pool (or its family) is not known locally yet (`ErrPoolNotReadyYet`).
    #[error("unable to allocate from pool \"{pool}\" (family {family}): pool not (yet) available")]
    PoolNotReady {
        /// The pool.
        pool: String,
        /// The family.
        family: Family,
    },
    /// Same, when reserving a specific address.
    #[error(
        "unable to reserve IP {ip} from pool \"{pool}\" (family {family}): pool not (yet) available"
    )]
    PoolNotReadyForIp {
        /// The address.
        ip: IpAddr,
        /// The pool.
        pool: String,
        /// The family.
        family: Family,
    },
    /// Every CIDR of the pool is removed or full.
    #[error("all CIDR ranges are exhausted")]
    Exhausted,
    /// No CIDR of the pool contains the address.
    #[error("IP {ip} not in range of any CIDR")]
    NotInAnyCidr {
        /// The address.
        ip: IpAddr,
    },
    /// The CIDR containing the address refused it (taken, or a reserved address).
    #[error(transparent)]
    Range {
        /// The range's error.
        #[from]
        source: HostScopeError,
    },
    /// Release from a pool (or family) not known locally.
    #[error("unable to release IP {ip} of unknown pool \"{pool}\" (family {family})")]
    UnknownPool {
        /// The address.
        ip: IpAddr,
        /// The pool.
        pool: String,
        /// The family.
        family: Family,
    },
    /// The caller's skip-masquerade lookup does not know the pool; its text is kept as is.
    #[error(transparent)]
    SkipMasquerade {
        /// The lookup's error.
        #[from]
        source: PoolNotFound,
    },
}

/// The skip-masquerade lookup does not know a pool (Cilium's stateDB lookup error).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("IP pool '{pool}' not found in stateDB table")]
pub struct PoolNotFound {
    /// The pool.
    pub pool: String,
}

impl MultiPoolError {
    /// Whether this is Cilium's `ErrPoolNotReadyYet` (either wording).
    #[must_use]
    pub const fn is_pool_not_ready(&self) -> bool {
        matches!(
            self,
            Self::PoolNotReady { .. } | Self::PoolNotReadyForIp { .. }
        )
    }
}

/// A skip-masquerade lookup that never skips (ENI mode has none).
///
/// # Errors
/// Never.
pub const fn never_skip_masquerade(_pool: &str) -> Result<bool, PoolNotFound> {
    Ok(false)
}

/// Static configuration of the manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiPoolConfig {
    /// IPv4 enabled.
    pub ipv4: bool,
    /// IPv6 enabled.
    pub ipv6: bool,
    /// Pre-allocation per pool (`--ipam-multi-pool-pre-allocation`).
    pub pre_alloc: PreAllocMap,
    /// Linear demand `inUse + pending + preAlloc` (ENI) instead of `neededIPCeil`.
    pub linear_pre_alloc: bool,
}

impl MultiPoolConfig {
    /// `multi-pool` mode: the parsed pre-allocation flag, `neededIPCeil` demand.
    #[must_use]
    pub const fn multi_pool(ipv4: bool, ipv6: bool, pre_alloc: PreAllocMap) -> Self {
        Self {
            ipv4,
            ipv6,
            pre_alloc,
            linear_pre_alloc: false,
        }
    }

    /// `eni` mode: `{"default": 8}`, linear demand.
    #[must_use]
    pub fn eni(ipv4: bool, ipv6: bool) -> Self {
        Self {
            ipv4,
            ipv6,
            pre_alloc: BTreeMap::from([(PRE_ALLOCATE_OVERRIDE_POOL.to_owned(), 8)]),
            linear_pre_alloc: true,
        }
    }
}

/// A successful allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiPoolAllocation {
    /// The address.
    pub ip: IpAddr,
    /// The pool it came from.
    pub pool: String,
    /// Exclude from masquerading (allocate-next only; always false for specific addresses).
    pub skip_masquerade: bool,
}

/// A pool and family the node waits for at start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolWait {
    /// The pool.
    pub pool: String,
    /// The family without a free address.
    pub family: Family,
    /// The family holds CIDRs (all used); `false`: it has none yet.
    pub has_cidrs: bool,
}

/// Usage of one pool and family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolUsage {
    /// Addresses in use (removed CIDRs included).
    pub used: u64,
    /// Free addresses in CIDRs that still take allocations.
    pub free: u64,
    /// CIDRs held (removed ones included).
    pub cidrs: usize,
}

/// Both families of one pool; a disabled family is `None`.
#[derive(Clone, Debug)]
struct PoolPair {
    v4: Option<CidrPool>,
    v6: Option<CidrPool>,
}

impl PoolPair {
    const fn family(&self, family: Family) -> Option<&CidrPool> {
        match family {
            Family::V4 => self.v4.as_ref(),
            Family::V6 => self.v6.as_ref(),
        }
    }

    const fn family_mut(&mut self, family: Family) -> Option<&mut CidrPool> {
        match family {
            Family::V4 => self.v4.as_mut(),
            Family::V6 => self.v6.as_mut(),
        }
    }
}

/// The multi-pool manager.
#[derive(Clone, Debug)]
pub struct MultiPoolManager {
    config: MultiPoolConfig,
    pools: BTreeMap<String, PoolPair>,
    pending: Pending,
    /// The local `CiliumNode` resource has delivered its `Sync` event.
    synced: bool,
    /// `RestoreFinished()` per family: IPv4, IPv6.
    restored: [bool; 2],
}

impl MultiPoolManager {
    /// A manager with no pools yet.
    #[must_use]
    pub fn new(config: MultiPoolConfig) -> Self {
        Self {
            config,
            pools: BTreeMap::new(),
            pending: Pending::default(),
            synced: false,
            restored: [false; 2],
        }
    }

    /// A `CiliumNode` upsert: applies each `spec.ipam.pools.allocated` entry, in order (pools
    /// missing from the list are untouched), then `spec.ipam.pre-allocate > 0` overrides the
    /// pre-allocation of the literal pool `default`.
    pub fn upsert_node(&mut self, allocated: &[IpamPoolAllocation], pre_allocate: u32) {
        for entry in allocated {
            self.upsert_pool(entry);
        }
        if pre_allocate > 0 {
            let value = i32::try_from(pre_allocate).unwrap_or(i32::MAX);
            self.config
                .pre_alloc
                .insert(PRE_ALLOCATE_OVERRIDE_POOL.to_owned(), value);
        }
    }

    fn upsert_pool(&mut self, entry: &IpamPoolAllocation) {
        let flags = (entry.allow_first_ip, entry.allow_last_ip);
        let (ipv4, ipv6) = (self.config.ipv4, self.config.ipv6);
        let pair = self
            .pools
            .entry(entry.pool.clone())
            .or_insert_with(|| PoolPair {
                v4: ipv4.then(|| CidrPool::new(flags.0, flags.1)),
                v6: ipv6.then(|| CidrPool::new(flags.0, flags.1)),
            });
        for family in [Family::V4, Family::V6] {
            let Some(pool) = pair.family_mut(family) else {
                continue;
            };
            if pool.flags() != flags {
                if pool.in_use() == 0 {
                    *pool = CidrPool::new(flags.0, flags.1);
                } else {
                    warn!(
                        pool = %entry.pool,
                        %family,
                        "ignoring changed first/last IP settings for pool with in-use IPs"
                    );
                }
            }
            let cidrs: Vec<IpNet> = entry
                .cidrs
                .iter()
                .map(IpNet::trunc)
                .filter(|c| cidr_family(c) == family)
                .collect();
            pool.update(&cidrs);
        }
    }

    /// The local `CiliumNode` resource delivered its `Sync` event: from now on the write-back
    /// computes `allocated` instead of passing it through.
    pub const fn mark_synced(&mut self) {
        self.synced = true;
    }

    /// `RestoreFinished()` for `family`: excess CIDRs of that family may now be released.
    pub const fn restore_finished(&mut self, family: Family) {
        self.restored[family_index(family)] = true;
    }

    /// Whether `pool` has a free address of `family` (the startup wait).
    #[must_use]
    pub fn has_available_ips(&self, pool: &str, family: Family) -> bool {
        self.cidr_pool(pool, family)
            .is_some_and(CidrPool::has_available_ips)
    }

    /// Whether every pre-allocation pool has a free address in every enabled family
    /// (`waitForAllPools` may stop).
    #[must_use]
    pub fn all_pools_ready(&self) -> bool {
        self.pools_not_ready().is_empty()
    }

    /// What keeps [`Self::all_pools_ready`] false: each pre-allocation pool and enabled family
    /// without a free address, and whether that family holds any CIDR (`false`: none yet).
    #[must_use]
    pub fn pools_not_ready(&self) -> Vec<PoolWait> {
        let enabled = [
            (self.config.ipv4, Family::V4),
            (self.config.ipv6, Family::V6),
        ];
        self.config
            .pre_alloc
            .keys()
            .flat_map(|pool| {
                enabled
                    .iter()
                    .filter(|(on, family)| *on && !self.has_available_ips(pool, *family))
                    .map(|&(_, family)| PoolWait {
                        pool: pool.clone(),
                        family,
                        has_cidrs: self
                            .cidr_pool(pool, family)
                            .is_some_and(|p| p.cidr_count() > 0),
                    })
            })
            .collect()
    }

    /// Usage of `pool` and `family`, if known locally.
    #[must_use]
    pub fn usage(&self, pool: &str, family: Family) -> Option<PoolUsage> {
        self.cidr_pool(pool, family).map(|p| PoolUsage {
            used: p.in_use(),
            free: p.capacity(),
            cidrs: p.cidr_count(),
        })
    }

    /// `Capacity()`: free addresses of `family` over all pools, removed CIDRs excluded.
    #[must_use]
    pub fn capacity(&self, family: Family) -> u64 {
        self.pools
            .values()
            .filter_map(|p| p.family(family))
            .map(CidrPool::capacity)
            .sum()
    }

    /// The `Dump` status: `"<n> IPAM pool(s) available"`.
    #[must_use]
    pub fn status(&self) -> String {
        format!("{} IPAM pool(s) available", self.pools.len())
    }

    /// Allocated addresses of `family`, per pool.
    #[must_use]
    pub fn allocated(&self, family: Family) -> BTreeMap<String, Vec<IpAddr>> {
        self.pools
            .iter()
            .filter_map(|(name, p)| Some((name.clone(), p.family(family)?.allocated().collect())))
            .collect()
    }

    /// The CIDRs of `pool` and `family` released and not yet gone from the spec.
    #[must_use]
    pub fn released_cidrs(&self, pool: &str, family: Family) -> Vec<IpNet> {
        self.cidr_pool(pool, family)
            .map(|p| p.released().collect())
            .unwrap_or_default()
    }

    /// The pools known locally, by name.
    pub fn pool_names(&self) -> impl Iterator<Item = &str> {
        self.pools.keys().map(String::as_str)
    }

    fn cidr_pool(&self, pool: &str, family: Family) -> Option<&CidrPool> {
        self.pools.get(pool).and_then(|p| p.family(family))
    }
}

const fn family_index(family: Family) -> usize {
    match family {
        Family::V4 => 0,
        Family::V6 => 1,
    }
}

const fn cidr_family(cidr: &IpNet) -> Family {
    match cidr {
        IpNet::V4(_) => Family::V4,
        IpNet::V6(_) => Family::V6,
    }
}

#[cfg(test)]
mod tests;

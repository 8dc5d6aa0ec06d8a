//! How full the node's pools are, for `weft-agent status` and the metrics: capacity and use
//! per pool and family, what the node still needs from the operator, and the Cilium-style
//! status line (`IPv4: 7/254 allocated from 10.4.0.0/24`, `2 IPAM pool(s) available`). Reads
//! the allocators (each mode's backend fills its part); the only thing it changes is purging
//! expired pending allocations (multi-pool demand), as every write-back does.

use std::time::Instant;

use ipnet::IpNet;

use super::IpamManager;
use crate::ipam::Family;

/// Capacity and use of one pool in one family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolStat {
    /// Pool name (the default pool in the host-scope and CRD modes).
    pub pool: String,
    /// Address family.
    pub family: Family,
    /// Addresses the pool can hand out (Cilium's `Capacity()`; multi-pool: in use + free).
    pub capacity: u64,
    /// Addresses in use (router included).
    pub used: u64,
    /// The allocation CIDR (host-scope modes only).
    pub cidr: Option<IpNet>,
    /// CIDRs the pool holds (multi-pool; 1 for host-scope, 0 for CRD).
    pub cidrs: usize,
}

/// The node's IPAM usage at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IpamUsage {
    /// Per pool and family, sorted by pool then family.
    pub pools: Vec<PoolStat>,
    /// Addresses the node asks for beyond what it holds (multi-pool demand, CRD minimum).
    pub needed: u64,
    /// Cilium's `Dump` status for the enabled families, e.g. `IPv4: 7/254 allocated from
    /// 10.4.0.0/24` or `2 IPAM pool(s) available`.
    pub status: String,
}

impl IpamUsage {
    /// Capacity over every pool and family.
    #[must_use]
    pub fn capacity(&self) -> u64 {
        self.pools.iter().map(|p| p.capacity).sum()
    }

    /// Addresses in use over every pool and family.
    #[must_use]
    pub fn used(&self) -> u64 {
        self.pools.iter().map(|p| p.used).sum()
    }

    /// Free addresses over every pool and family.
    #[must_use]
    pub fn available(&self) -> u64 {
        self.pools
            .iter()
            .map(|p| p.capacity.saturating_sub(p.used))
            .sum()
    }
}

pub(super) fn to_u64(n: impl TryInto<u64>) -> u64 {
    n.try_into().unwrap_or(u64::MAX)
}

impl IpamManager {
    /// Usage of every pool and family now (`now` ages pending multi-pool allocations).
    #[must_use]
    pub fn usage(&mut self, now: Instant) -> IpamUsage {
        let mut families = self.families();
        families.sort();
        self.backend
            .usage(&families, &self.config.default_pool, now)
    }
}

//! How full the node's pools are, for `weft-agent status` and the metrics: capacity and use
//! per pool and family, what the node still needs from the operator, and the Cilium-style
//! status line (`IPv4: 7/254 allocated from 10.4.0.0/24`, `2 IPAM pool(s) available`). Reads
//! the allocators; the only thing it changes is purging expired pending allocations (multi-pool
//! demand), as every write-back does.

use std::time::Instant;

use ipnet::IpNet;

use super::{Backend, IpamManager, family_word};
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

fn to_u64(n: impl TryInto<u64>) -> u64 {
    n.try_into().unwrap_or(u64::MAX)
}

impl IpamManager {
    /// Usage of every pool and family now (`now` ages pending multi-pool allocations).
    #[must_use]
    pub fn usage(&mut self, now: Instant) -> IpamUsage {
        let families = {
            let mut f = self.families();
            f.sort();
            f
        };
        let default_pool = self.config.default_pool.clone();
        let mut usage = IpamUsage::default();
        match &mut self.backend {
            Backend::HostScope { v4, v6 } => {
                let mut parts = Vec::new();
                for family in families {
                    let slot = if family == Family::V4 { &*v4 } else { &*v6 };
                    let Some(a) = slot else {
                        parts.push(format!("{}: not configured", family_word(family)));
                        continue;
                    };
                    parts.push(format!("{}: {}", family_word(family), a.status()));
                    usage.pools.push(PoolStat {
                        pool: default_pool.clone(),
                        family,
                        capacity: to_u64(a.capacity()),
                        used: a.used(),
                        cidr: Some(a.cidr()),
                        cidrs: 1,
                    });
                }
                usage.status = parts.join(", ");
            }
            Backend::Crd(crd) => {
                let mut parts = Vec::new();
                for family in families {
                    parts.push(format!("{}: {}", family_word(family), crd.status(family)));
                    usage.pools.push(PoolStat {
                        pool: default_pool.clone(),
                        family,
                        capacity: to_u64(crd.capacity(family)),
                        used: to_u64(crd.allocated_count(family)),
                        cidr: None,
                        cidrs: 0,
                    });
                }
                usage.status = parts.join(", ");
                let capacity: usize = [Family::V4, Family::V6]
                    .into_iter()
                    .map(|f| crd.capacity(f))
                    .sum();
                usage.needed = to_u64(self.min_required.saturating_sub(capacity));
            }
            Backend::Multi(multi) => {
                usage.status = multi.status();
                let names: Vec<String> = multi.pool_names().map(str::to_owned).collect();
                for name in &names {
                    for &family in &families {
                        let Some(u) = multi.usage(name, family) else {
                            continue;
                        };
                        usage.pools.push(PoolStat {
                            pool: name.clone(),
                            family,
                            capacity: u.used + u.free,
                            used: u.used,
                            cidr: None,
                            cidrs: u.cidrs,
                        });
                    }
                }
                for (name, demand) in multi.demand(now) {
                    for family in &families {
                        let wanted = u64::from(match family {
                            Family::V4 => demand.ipv4_addrs,
                            Family::V6 => demand.ipv6_addrs,
                        });
                        let held = usage
                            .pools
                            .iter()
                            .find(|p| p.pool == name && p.family == *family)
                            .map_or(0, |p| p.capacity);
                        usage.needed += wanted.saturating_sub(held);
                    }
                }
            }
            Backend::Delegated => "delegated to plugin".clone_into(&mut usage.status),
        }
        usage
    }
}

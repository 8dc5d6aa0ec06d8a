//! Demand: what the agent writes to `spec.ipam.pools.requested` (Cilium
//! `computeNeededIPsPerPoolLocked`): addresses in use plus pending allocations, rounded up by
//! the pool's pre-allocation with [`needed_ip_ceil`] (or [`linear_pre_alloc`] for ENI), per
//! enabled family. Reads the manager's state; the only thing it changes is purging expired
//! pending allocations.

use std::{collections::BTreeMap, time::Instant};

use super::MultiPoolManager;
use crate::{
    crd::ipam::{IpamPoolDemand, IpamPoolRequest},
    ipam::Family,
};

/// Cilium `neededIPCeil`: `x` when `p == 0`; otherwise `x` rounded up to the next-but-one
/// multiple of `p` when not a multiple, the next one when it is (`ceil((x+p)/p)*p`), so at
/// least `p` addresses stay free. Go integer division semantics (truncating).
#[must_use]
pub const fn needed_ip_ceil(x: i64, p: i64) -> i64 {
    if p == 0 {
        return x;
    }
    let quotient = x / p;
    if x % p > 0 {
        (quotient + 2) * p
    } else {
        (quotient + 1) * p
    }
}

/// Linear pre-allocation (ENI): `x + p`.
#[must_use]
pub const fn linear_pre_alloc(x: i64, p: i64) -> i64 {
    x + p
}

/// Clamps a computed demand into the wire type.
fn to_wire(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

impl MultiPoolManager {
    /// Demand per pool, for every local pool, every pool with pending allocations and every
    /// pre-allocation pool (zero demands included). Expired pending allocations are purged
    /// first.
    pub fn demand(&mut self, now: Instant) -> BTreeMap<String, IpamPoolDemand> {
        self.pending.purge_expired(now);
        let mut raw: BTreeMap<String, [i64; 2]> = BTreeMap::new();
        for (name, pair) in &self.pools {
            let used = |f| {
                pair.family(f)
                    .map_or(0, |p| i64::try_from(p.in_use()).unwrap_or(i64::MAX))
            };
            raw.insert(name.clone(), [used(Family::V4), used(Family::V6)]);
        }
        for name in self.pending.pools() {
            let entry = raw.entry(name.to_owned()).or_default();
            for (slot, family) in entry.iter_mut().zip([Family::V4, Family::V6]) {
                *slot += i64::try_from(self.pending.count(name, family)).unwrap_or(i64::MAX);
            }
        }
        let enabled = [self.config.ipv4, self.config.ipv6];
        for (name, &pre) in &self.config.pre_alloc {
            let entry = raw.entry(name.clone()).or_default();
            for (slot, on) in entry.iter_mut().zip(enabled) {
                if on {
                    *slot = if self.config.linear_pre_alloc {
                        linear_pre_alloc(*slot, i64::from(pre))
                    } else {
                        needed_ip_ceil(*slot, i64::from(pre))
                    };
                }
            }
        }
        // A disabled family is never asked for, even when a restore of one of its addresses
        // left a pending allocation behind.
        raw.into_iter()
            .map(|(name, [v4, v6])| {
                let (v4, v6) = (
                    if self.config.ipv4 { v4 } else { 0 },
                    if self.config.ipv6 { v6 } else { 0 },
                );
                let demand = IpamPoolDemand {
                    ipv4_addrs: to_wire(v4),
                    ipv6_addrs: to_wire(v6),
                };
                (name, demand)
            })
            .collect()
    }

    /// `spec.ipam.pools.requested`: the non-zero demands, sorted by pool name.
    pub fn requested(&mut self, now: Instant) -> Vec<IpamPoolRequest> {
        requested_from(&self.demand(now))
    }
}

/// The `requested` list of a demand map: pools with 0 in both families are omitted.
pub(super) fn requested_from(demand: &BTreeMap<String, IpamPoolDemand>) -> Vec<IpamPoolRequest> {
    demand
        .iter()
        .filter(|(_, d)| d.ipv4_addrs != 0 || d.ipv6_addrs != 0)
        .map(|(pool, needed)| IpamPoolRequest {
            pool: pool.clone(),
            needed: *needed,
        })
        .collect()
}

//! The `spec.ipam.pools` write-back (Cilium `updateLocalNode`): the demand as `requested`,
//! the CIDRs still held as `allocated` after releasing excess ones (only for families whose
//! restore finished), in Cilium's order. Decides what to write and whether it differs; the
//! `Update` call, its debouncing and conflict retries belong to the caller.

use std::time::Instant;

use super::{MultiPoolManager, demand::requested_from};
use crate::{
    crd::ipam::{IpamPoolAllocation, IpamPoolSpec},
    ipam::Family,
};

/// The result of [`MultiPoolManager::pool_spec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSpecUpdate {
    /// The new `spec.ipam.pools`.
    pub spec: IpamPoolSpec,
    /// Whether it differs from the current one (write only then).
    pub changed: bool,
}

impl MultiPoolManager {
    /// Computes the new `spec.ipam.pools` from `current` (the resource's present value):
    ///
    /// 1. demand (expired pending allocations purged) → `requested`;
    /// 2. per local pool and family whose restore finished, release excess CIDRs keeping
    ///    `max(needed − inUse, 0)` free, reclaiming released CIDRs when short;
    /// 3. `allocated`: per pool (by name) the v4 CIDRs sorted by (prefix length, address),
    ///    then the v6 ones likewise, with the pool's `allowFirstIP`/`allowLastIP`; pools left
    ///    with no CIDR are dropped locally and omitted;
    /// 4. before [`MultiPoolManager::mark_synced`], `allocated` is `current`'s, unchanged.
    pub fn pool_spec(&mut self, current: &IpamPoolSpec, now: Instant) -> PoolSpecUpdate {
        let demand = self.demand(now);
        let requested = requested_from(&demand);
        let restored = self.restored;
        let mut allocated = Vec::with_capacity(self.pools.len());
        self.pools.retain(|name, pair| {
            let needed = demand.get(name).copied().unwrap_or_default();
            let mut cidrs = Vec::new();
            let mut flags = None;
            let families = [
                (Family::V4, needed.ipv4_addrs, restored[0]),
                (Family::V6, needed.ipv6_addrs, restored[1]),
            ];
            for (family, needed, restored) in families {
                let Some(pool) = pair.family_mut(family) else {
                    continue;
                };
                if restored {
                    pool.release_excess(u64::from(needed).saturating_sub(pool.in_use()));
                }
                cidrs.extend(pool.sorted_cidrs());
                flags.get_or_insert(pool.flags());
            }
            if cidrs.is_empty() {
                return false;
            }
            let (allow_first_ip, allow_last_ip) = flags.unwrap_or_default();
            allocated.push(IpamPoolAllocation {
                pool: name.clone(),
                allow_first_ip,
                allow_last_ip,
                cidrs,
            });
            true
        });
        let allocated = if self.synced {
            allocated
        } else {
            current.allocated.clone()
        };
        let spec = IpamPoolSpec {
            requested,
            allocated,
        };
        let changed = spec != *current;
        PoolSpecUpdate { spec, changed }
    }
}

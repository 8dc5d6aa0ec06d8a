//! [`CidrPool`]: one family of one multi-pool pool (Cilium `cidrPool`): the ordered list of
//! CIDR ranges, the `removed` mark on in-use CIDRs that left the spec, the `released` set of
//! CIDRs handed back, and the excess-release walk. It knows neither pool names nor owners.

use std::{collections::BTreeSet, net::IpAddr};

use ipnet::IpNet;
use tracing::{debug, warn};

use super::MultiPoolError;
use crate::ipam::{Random, hostscope::CidrRange};

/// One CIDR of the pool.
#[derive(Clone, Debug)]
struct Slot {
    range: CidrRange,
    /// In use but no longer in the spec: no new allocations, still counted as used.
    removed: bool,
}

/// The CIDRs of one pool and family.
#[derive(Clone, Debug)]
pub(super) struct CidrPool {
    allow_first_ip: bool,
    allow_last_ip: bool,
    slots: Vec<Slot>,
    released: BTreeSet<IpNet>,
}

impl CidrPool {
    /// An empty pool whose ranges use these first/last-IP settings.
    pub(super) const fn new(allow_first_ip: bool, allow_last_ip: bool) -> Self {
        Self {
            allow_first_ip,
            allow_last_ip,
            slots: Vec::new(),
            released: BTreeSet::new(),
        }
    }

    /// `(allowFirstIP, allowLastIP)`.
    pub(super) const fn flags(&self) -> (bool, bool) {
        (self.allow_first_ip, self.allow_last_ip)
    }

    /// Applies the spec's CIDRs of this family (masked) (Cilium `updatePool`): drops
    /// duplicates, forgets released CIDRs that left the spec, keeps existing ranges in their
    /// order (dropping unused ones that left the spec, marking used ones `removed`), then
    /// appends new CIDRs in spec order, except released ones; a CIDR with nothing
    /// allocatable goes straight to `released`.
    pub(super) fn update(&mut self, cidrs: &[IpNet]) {
        let mut wanted = BTreeSet::new();
        let mut ordered = Vec::with_capacity(cidrs.len());
        for cidr in cidrs {
            if wanted.insert(*cidr) {
                ordered.push(*cidr);
            } else {
                warn!(%cidr, "ignoring duplicate CIDR");
            }
        }
        self.released.retain(|cidr| wanted.contains(cidr));

        let mut existing = BTreeSet::new();
        let mut slots = Vec::with_capacity(self.slots.len() + ordered.len());
        for mut slot in self.slots.drain(..) {
            let cidr = slot.range.cidr();
            if wanted.contains(&cidr) {
                slot.removed = false;
            } else if slot.range.used() == 0 {
                continue;
            } else {
                if !slot.removed {
                    warn!(%cidr, "in-use CIDR was removed from spec");
                }
                slot.removed = true;
            }
            existing.insert(cidr);
            slots.push(slot);
        }
        for cidr in ordered {
            if existing.contains(&cidr) || self.released.contains(&cidr) {
                continue;
            }
            let range = CidrRange::new(cidr, self.allow_first_ip, self.allow_last_ip);
            if range.free() == 0 {
                warn!(%cidr, "skipping too-small CIDR");
                self.released.insert(cidr);
                continue;
            }
            existing.insert(cidr);
            slots.push(Slot {
                range,
                removed: false,
            });
        }
        self.slots = slots;
    }

    /// A random free address in the first CIDR that is neither removed nor full.
    pub(super) fn allocate_next(
        &mut self,
        rng: &mut (impl Random + ?Sized),
    ) -> Result<IpAddr, MultiPoolError> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| !s.removed && s.range.free() > 0)
            .ok_or(MultiPoolError::Exhausted)?;
        Ok(slot.range.allocate_next(rng)?)
    }

    /// Reserves `ip` in the first CIDR containing it (removed ones included).
    pub(super) fn allocate(&mut self, ip: IpAddr) -> Result<(), MultiPoolError> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.range.cidr().contains(&ip))
            .ok_or(MultiPoolError::NotInAnyCidr { ip })?;
        Ok(slot.range.allocate(ip)?)
    }

    /// Frees `ip` in the first CIDR containing it; unknown addresses are ignored.
    pub(super) fn release(&mut self, ip: IpAddr) {
        if let Some(slot) = self.slots.iter_mut().find(|s| s.range.cidr().contains(&ip)) {
            slot.range.release(ip);
        }
    }

    /// Addresses in use, removed CIDRs included.
    pub(super) fn in_use(&self) -> u64 {
        self.slots.iter().map(|s| s.range.used()).sum()
    }

    /// Free addresses in CIDRs that still take allocations (Cilium's `capacity()`).
    pub(super) fn capacity(&self) -> u64 {
        self.slots
            .iter()
            .filter(|s| !s.removed)
            .map(|s| s.range.free())
            .sum()
    }

    /// Whether some non-removed CIDR has a free address.
    pub(super) fn has_available_ips(&self) -> bool {
        self.slots.iter().any(|s| !s.removed && s.range.free() > 0)
    }

    /// Number of CIDRs held (removed ones included).
    pub(super) const fn cidr_count(&self) -> usize {
        self.slots.len()
    }

    /// The allocated addresses, CIDR by CIDR.
    pub(super) fn allocated(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.slots.iter().flat_map(|s| s.range.allocated())
    }

    /// The CIDRs to write back, sorted by (prefix length, address), removed ones included.
    pub(super) fn sorted_cidrs(&self) -> Vec<IpNet> {
        let mut cidrs: Vec<IpNet> = self.slots.iter().map(|s| s.range.cidr()).collect();
        cidrs.sort_by_key(|c| (c.prefix_len(), c.network()));
        cidrs
    }

    /// Cilium `releaseExcessCIDRsMultiPool(neededFree)`: when short of free addresses,
    /// reclaim released CIDRs in (address, prefix length) order until the need is met; then
    /// walk the CIDRs in reverse and release each unused one whose free addresses can go
    /// while keeping at least `needed_free` free overall.
    pub(super) fn release_excess(&mut self, needed_free: u64) {
        let mut total_free: u64 = self.slots.iter().map(|s| s.range.free()).sum();
        while total_free < needed_free {
            let Some(cidr) = self.released.pop_first() else {
                break;
            };
            let range = CidrRange::new(cidr, self.allow_first_ip, self.allow_last_ip);
            debug!(%cidr, "reclaiming released CIDR");
            total_free += range.free();
            self.slots.push(Slot {
                range,
                removed: false,
            });
        }
        let mut kept = Vec::with_capacity(self.slots.len());
        for slot in self.slots.drain(..).rev() {
            let free = slot.range.free();
            if slot.range.used() == 0 && total_free - free >= needed_free {
                debug!(cidr = %slot.range.cidr(), "releasing CIDR");
                self.released.insert(slot.range.cidr());
                total_free -= free;
            } else {
                kept.push(slot);
            }
        }
        kept.reverse();
        self.slots = kept;
    }

    /// The CIDRs in allocation order, with their `removed` mark.
    #[cfg(test)]
    pub(super) fn cidrs_in_order(&self) -> Vec<(IpNet, bool)> {
        self.slots
            .iter()
            .map(|s| (s.range.cidr(), s.removed))
            .collect()
    }

    /// The released CIDRs (handed back, not yet gone from the spec).
    pub(super) fn released(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.released.iter().copied()
    }
}

//! [`Pool`]: one CiliumPodIPPool inside the allocator (Cilium `cidrPool` and `pool.go`): its
//! sets per family, mask sizes, first/last-IP flags, and the per-block address count
//! (`addrsInPrefix`). It also plans an upsert ([`Pool::plan`]) without touching the live
//! pool. It knows no nodes.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{MultiPoolError, PoolSpec};
use crate::{
    Family,
    cidrset::{BlockStats, CidrSet, ReservedRange, build_sets},
};

/// One pool's sets and settings.
#[derive(Clone, Debug)]
pub(super) struct Pool {
    v4: Vec<CidrSet>,
    v6: Vec<CidrSet>,
    /// Mask sizes; 0 for a family the spec does not have (as Cilium stores it).
    v4_mask: u8,
    v6_mask: u8,
    allow_first_ip: bool,
    allow_last_ip: bool,
    /// The spec's `reservedRanges`.
    reserved: Vec<ReservedRange>,
}

/// The outcome of [`Pool::plan`]: the pool to store and the sets it drops.
#[derive(Debug)]
pub(super) struct Plan {
    /// The new pool (kept sets keep their blocks).
    pub(super) pool: Pool,
    /// Sets whose cluster CIDR left the spec.
    pub(super) removed: Vec<CidrSet>,
}

/// The number of usable addresses of a block (Cilium `addrsInPrefix`): `2^hostBits`, less
/// the first and the last address unless allowed, when there are more than two.
pub(super) fn addrs_in_prefix(cidr: &IpNet, allow_first_ip: bool, allow_last_ip: bool) -> u128 {
    let host_bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
    let addrs = 1u128.checked_shl(host_bits).unwrap_or(u128::MAX);
    if addrs <= 2 {
        return addrs;
    }
    addrs - u128::from(!allow_first_ip) - u128::from(!allow_last_ip)
}

fn addr_max(a: IpAddr, b: IpAddr) -> IpAddr {
    if a >= b { a } else { b }
}

fn addr_min(a: IpAddr, b: IpAddr) -> IpAddr {
    if a <= b { a } else { b }
}

/// The spec's CIDRs (masked) and mask size for one family; an absent family has mask 0.
fn family_spec(spec: &PoolSpec, family: Family) -> (Vec<IpNet>, u8) {
    let family_spec = match family {
        Family::V4 => spec.ipv4.as_ref(),
        Family::V6 => spec.ipv6.as_ref(),
    };
    family_spec.map_or((Vec::new(), 0), |f| {
        (f.cidrs.iter().map(IpNet::trunc).collect(), f.mask_size)
    })
}

impl Pool {
    /// Plans the upsert of `spec` as pool `name` over `existing` (Cilium `UpsertPool` and
    /// `updateCIDRSets`): refuses changed masks or flags, keeps the sets of CIDRs still
    /// listed (cloned, with their blocks), builds sets for new CIDRs after them, and puts each
    /// reserved range on the set holding it. Nothing live is touched.
    pub(super) fn plan(
        name: &str,
        existing: Option<&Self>,
        spec: &PoolSpec,
    ) -> Result<Plan, MultiPoolError> {
        let (v4_cidrs, v4_mask) = family_spec(spec, Family::V4);
        let (v6_cidrs, v6_mask) = family_spec(spec, Family::V6);
        if let Some(old) = existing {
            for (family, was, now) in [
                (Family::V4, old.v4_mask, v4_mask),
                (Family::V6, old.v6_mask, v6_mask),
            ] {
                if was != now {
                    return Err(MultiPoolError::MaskSizeChanged {
                        pool: name.to_owned(),
                        family,
                    });
                }
            }
            if old.flags() != (spec.allow_first_ip, spec.allow_last_ip) {
                return Err(MultiPoolError::FirstLastIpChanged {
                    pool: name.to_owned(),
                });
            }
        }
        let mut removed = Vec::new();
        let mut pool = Self {
            v4: Vec::new(),
            v6: Vec::new(),
            v4_mask,
            v6_mask,
            allow_first_ip: spec.allow_first_ip,
            allow_last_ip: spec.allow_last_ip,
            reserved: spec.reserved.clone(),
        };
        for (family, cidrs, mask) in [
            (Family::V4, v4_cidrs, v4_mask),
            (Family::V6, v6_cidrs, v6_mask),
        ] {
            let old_sets = existing.map_or(&[][..], |old| old.sets(family));
            let (kept, gone): (Vec<CidrSet>, Vec<CidrSet>) = old_sets
                .iter()
                .cloned()
                .partition(|set| cidrs.iter().any(|cidr| set.is_cluster_cidr(cidr)));
            let new: Vec<IpNet> = cidrs
                .into_iter()
                .filter(|cidr| !kept.iter().any(|set| set.is_cluster_cidr(cidr)))
                .collect();
            let built =
                build_sets(&kept, family, &new, mask).map_err(|source| MultiPoolError::Cidrs {
                    pool: name.to_owned(),
                    source,
                })?;
            let sets = pool.sets_mut(family);
            sets.extend(kept);
            sets.extend(built);
            removed.extend(gone);
        }
        pool.reserve(name, &spec.reserved)?;
        Ok(Plan { pool, removed })
    }

    /// Reserves, besides the spec's ranges, the part of each of `pins` (blocks nodes hold
    /// outside every pool: unmigrated podCIDRs) inside each set, so no new block overlaps one.
    pub(super) fn set_pins(&mut self, name: &str, pins: &[IpNet]) -> Result<(), MultiPoolError> {
        let mut ranges = self.reserved.clone();
        for set in self.v4.iter().chain(&self.v6) {
            let cluster = set.cluster();
            for pin in pins.iter().filter(|p| set.in_range(p)) {
                let start = addr_max(pin.network(), cluster.network());
                let end = addr_min(pin.broadcast(), cluster.broadcast());
                ranges.push(ReservedRange { start, end });
            }
        }
        self.reserve(name, &ranges)
    }

    /// Puts every range on the set that holds it and clears the others.
    fn reserve(&mut self, name: &str, ranges: &[ReservedRange]) -> Result<(), MultiPoolError> {
        let mut per_set: Vec<Vec<ReservedRange>> = vec![Vec::new(); self.v4.len() + self.v6.len()];
        for range in ranges {
            let index = self
                .v4
                .iter()
                .chain(&self.v6)
                .position(|set| set.contains_range(range))
                .ok_or_else(|| MultiPoolError::ReservedRangeOutside {
                    pool: name.to_owned(),
                    range: *range,
                })?;
            per_set[index].push(*range);
        }
        for (set, ranges) in self.v4.iter_mut().chain(&mut self.v6).zip(&per_set) {
            set.set_reserved_ranges(ranges)
                .map_err(|source| MultiPoolError::Cidrs {
                    pool: name.to_owned(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The sets of `family`, in order.
    pub(super) fn sets(&self, family: Family) -> &[CidrSet] {
        match family {
            Family::V4 => &self.v4,
            Family::V6 => &self.v6,
        }
    }

    const fn sets_mut(&mut self, family: Family) -> &mut Vec<CidrSet> {
        match family {
            Family::V4 => &mut self.v4,
            Family::V6 => &mut self.v6,
        }
    }

    /// `(allowFirstIP, allowLastIP)`.
    pub(super) const fn flags(&self) -> (bool, bool) {
        (self.allow_first_ip, self.allow_last_ip)
    }

    /// Usable addresses of one of this pool's blocks.
    pub(super) fn addrs_in(&self, cidr: &IpNet) -> u128 {
        addrs_in_prefix(cidr, self.allow_first_ip, self.allow_last_ip)
    }

    /// Whether a set of the pool overlaps `cidr` (Cilium `containsCIDR`).
    pub(super) fn contains(&self, cidr: &IpNet) -> bool {
        self.sets(Family::of(cidr))
            .iter()
            .any(|set| set.in_range(cidr))
    }

    /// Occupies `cidr` in the first set overlapping it (Cilium `occupyCIDR`); refuses one
    /// that overlaps another holder's block.
    pub(super) fn occupy(&mut self, name: &str, cidr: &IpNet) -> Result<(), MultiPoolError> {
        let not_in_pool = || MultiPoolError::NotInPool {
            pool: name.to_owned(),
            cidr: *cidr,
        };
        let set = self
            .sets_mut(Family::of(cidr))
            .iter_mut()
            .find(|set| set.in_range(cidr))
            .ok_or_else(not_in_pool)?;
        if set.overlaps_allocated(cidr).map_err(|_| not_in_pool())? {
            return Err(MultiPoolError::AlreadyAllocated {
                pool: name.to_owned(),
                cidr: *cidr,
            });
        }
        set.occupy(cidr).map_err(|_| not_in_pool())
    }

    /// Hands `cidr` back to the first set overlapping it (Cilium `releaseCIDR`); a CIDR in no
    /// set is ignored.
    pub(super) fn release(&mut self, cidr: &IpNet) {
        let sets = self.sets_mut(Family::of(cidr));
        if let Some(set) = sets.iter_mut().find(|set| set.in_range(cidr)) {
            // In range, so it cannot fail.
            let _ = set.release(cidr);
        }
    }

    /// The next block of `family` from the first set that is not full
    /// (Cilium `allocFirstFreeCIDR`), `None` when all are ("pool empty").
    pub(super) fn allocate(&mut self, family: Family) -> Option<IpNet> {
        let set = self
            .sets_mut(family)
            .iter_mut()
            .find(|set| !set.is_full())?;
        set.allocate_next().ok()
    }

    /// Held, reserved and free blocks of `family`.
    pub(super) fn stats(&self, family: Family) -> BlockStats {
        let mut stats = BlockStats::default();
        for set in self.sets(family) {
            stats += set.stats();
        }
        stats
    }
}

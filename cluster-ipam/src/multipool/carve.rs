//! Node carving of [`PoolAllocator`] (Cilium `AllocateToNode`): occupy what the node lists,
//! release what it no longer lists, then carve blocks until each requested pool covers the
//! node's demand. It owns no state of its own.
//!
//! Where it departs from Cilium, on purpose: a listed prefix overlapping any block held
//! elsewhere is refused (Cilium only refuses one whose blocks are *all* held), a listed
//! CIDR already kept as this node's orphan of that pool stays an orphan without an error, and
//! the node's orphans of a pool count towards its demand on that pool.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;

use super::{AllocateFailure, Allocated, MultiPoolError, PoolAllocator, Requested, hold, unhold};
use crate::Family;

impl PoolAllocator {
    /// Reconciles one CiliumNode's `spec.ipam.pools`: every CIDR of `allocated` is occupied
    /// for the node (an unknown pool's becomes an orphan), held blocks no longer listed are
    /// released, then, once ready, each `requested` pool gets blocks until its usable
    /// addresses cover the demand of each enabled family.
    ///
    /// # Errors
    /// Only [`MultiPoolError::NotReady`] before [`PoolAllocator::restore_finished`];
    /// otherwise every problem met ([`MultiPoolError::InvalidAllocatedCidr`],
    /// [`MultiPoolError::OrphanUnknownPool`], [`MultiPoolError::AlreadyAllocated`],
    /// [`MultiPoolError::NotInPool`], [`MultiPoolError::UnknownPool`],
    /// [`MultiPoolError::PoolEmpty`]) while the rest was still done.
    pub fn allocate_to_node(
        &mut self,
        node: &str,
        requested: &[Requested],
        allocated: &[Allocated],
    ) -> Result<(), AllocateFailure> {
        let mut errors = Vec::new();
        let listed = self.occupy_listed(node, allocated, &mut errors);
        self.release_unlisted(node, &listed);
        if !self.ready {
            return Err(AllocateFailure {
                errors: vec![MultiPoolError::NotReady],
            });
        }
        for request in requested {
            for (family, enabled, needed) in [
                (Family::V4, self.ipv4_enabled, request.ipv4_addrs),
                (Family::V6, self.ipv6_enabled, request.ipv6_addrs),
            ] {
                if enabled && let Err(error) = self.carve(node, &request.pool, family, needed) {
                    errors.push(error);
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AllocateFailure { errors })
        }
    }

    /// Occupies every listed CIDR; returns them per pool (garbage left out).
    fn occupy_listed(
        &mut self,
        node: &str,
        allocated: &[Allocated],
        errors: &mut Vec<MultiPoolError>,
    ) -> BTreeMap<String, BTreeSet<IpNet>> {
        let mut listed: BTreeMap<String, BTreeSet<IpNet>> = BTreeMap::new();
        for entry in allocated {
            let name = entry.pool.as_str();
            for value in &entry.cidrs {
                let cidr = match value.parse::<IpNet>() {
                    Ok(cidr) => cidr.trunc(),
                    Err(source) => {
                        errors.push(MultiPoolError::InvalidAllocatedCidr {
                            pool: name.to_owned(),
                            value: value.clone(),
                            source,
                        });
                        continue;
                    }
                };
                listed.entry(name.to_owned()).or_default().insert(cidr);
                let held = |holdings: &super::Holdings| {
                    (holdings.get(node).and_then(|pools| pools.get(name)))
                        .is_some_and(|cidrs| cidrs.contains(&cidr))
                };
                if held(&self.nodes) || held(&self.orphans) {
                    continue;
                }
                let Some(pool) = self.pools.get_mut(name) else {
                    hold(&mut self.orphans, node, name, cidr);
                    errors.push(MultiPoolError::OrphanUnknownPool {
                        pool: name.to_owned(),
                        cidr,
                    });
                    continue;
                };
                match pool.occupy(name, &cidr) {
                    Ok(()) => hold(&mut self.nodes, node, name, cidr),
                    Err(error) => errors.push(error),
                }
            }
        }
        listed
    }

    /// Releases held blocks and drops orphans the node no longer lists.
    fn release_unlisted(&mut self, node: &str, listed: &BTreeMap<String, BTreeSet<IpNet>>) {
        let unlisted = |holdings: &super::Holdings| -> Vec<(String, IpNet)> {
            let Some(pools) = holdings.get(node) else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for (name, cidrs) in pools {
                for cidr in cidrs.iter() {
                    if !listed.get(name).is_some_and(|keep| keep.contains(cidr)) {
                        out.push((name.clone(), *cidr));
                    }
                }
            }
            out
        };
        for (name, cidr) in unlisted(&self.nodes) {
            if let Some(pool) = self.pools.get_mut(&name) {
                pool.release(&cidr);
            }
            unhold(&mut self.nodes, node, &name, &cidr);
        }
        for (name, cidr) in unlisted(&self.orphans) {
            unhold(&mut self.orphans, node, &name, &cidr);
        }
    }

    /// Carves blocks of `family` from pool `name` until the node's usable addresses there
    /// reach `needed` (Cilium `allocateCIDRs`); blocks carved before a failure stay.
    fn carve(
        &mut self,
        node: &str,
        name: &str,
        family: Family,
        needed: u64,
    ) -> Result<(), MultiPoolError> {
        let pool_name = name.to_owned();
        let Some(pool) = self.pools.get_mut(name) else {
            // A node holds no block of a pool that does not exist.
            if needed == 0 {
                return Ok(());
            }
            return Err(MultiPoolError::UnknownPool {
                node: node.to_owned(),
                pool: pool_name,
                family,
            });
        };
        // The node's blocks of this pool count, and so do its orphans of it (blocks of a CIDR
        // removed from the pool): the node still uses their addresses, and during a CIDR
        // migration a node with room in an old block must not drain the new CIDR.
        let have: u128 = [&self.nodes, &self.orphans]
            .into_iter()
            .filter_map(|holdings| holdings.get(node).and_then(|pools| pools.get(name)))
            .flat_map(|cidrs| cidrs.family(family).iter())
            .fold(0u128, |sum, cidr| sum.saturating_add(pool.addrs_in(cidr)));
        let mut to_allocate = u128::from(needed).saturating_sub(have);
        while to_allocate > 0 {
            let Some(cidr) = pool.allocate(family) else {
                return Err(MultiPoolError::PoolEmpty {
                    node: node.to_owned(),
                    pool: pool_name,
                    family,
                });
            };
            to_allocate = to_allocate.saturating_sub(pool.addrs_in(&cidr));
            hold(&mut self.nodes, node, name, cidr);
        }
        Ok(())
    }
}

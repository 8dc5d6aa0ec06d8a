//! Pool changes of [`PoolAllocator`]: upsert (Cilium `UpsertPool`, `updateCIDRSets`,
//! `reconcileOrphanCIDRs`) and delete (`DeletePool`). A refused upsert changes nothing; an
//! accepted one orphans the blocks of removed CIDRs and re-adopts orphans the pool covers
//! again.
//!
//! Where it departs from Cilium, on purpose: only the upserted pool's own blocks and orphans
//! are looked at (Cilium also walks other pools' and reports their orphans as errors), and a
//! failed re-adoption is a warning, since the pool is applied either way.

use super::{MultiPoolError, PoolAllocator, PoolSpec, Warning, hold, pool::Pool, unhold};
use crate::Family;

impl PoolAllocator {
    /// Creates or updates pool `name`. Mask sizes (an absent family counts as 0) and
    /// `allowFirstIP`/`allowLastIP` cannot change; CIDRs may be added and removed: a node's
    /// block inside a removed CIDR becomes an orphan ([`Warning::CidrStillInUse`]), an orphan
    /// of this pool inside a listed CIDR is allocated again ([`Warning::Readopted`]).
    ///
    /// # Errors
    /// [`MultiPoolError::MaskSizeChanged`], [`MultiPoolError::FirstLastIpChanged`],
    /// [`MultiPoolError::Cidrs`] or [`MultiPoolError::ReservedRangeOutside`]; the pool is
    /// unchanged then.
    pub fn upsert_pool(
        &mut self,
        name: &str,
        spec: &PoolSpec,
    ) -> Result<Vec<Warning>, MultiPoolError> {
        let plan = Pool::plan(name, self.pools.get(name), spec)?;
        let mut warnings = Vec::new();
        for removed in &plan.removed {
            let mut orphaned = Vec::new();
            for (node, pools) in &self.nodes {
                let Some(cidrs) = pools.get(name) else {
                    continue;
                };
                for cidr in cidrs.iter() {
                    if removed.in_range(cidr) && removed.is_allocated(cidr).unwrap_or(false) {
                        orphaned.push((node.clone(), *cidr));
                    }
                }
            }
            for (node, cidr) in orphaned {
                warnings.push(Warning::CidrStillInUse {
                    cidr,
                    pool: name.to_owned(),
                    node: node.clone(),
                });
                unhold(&mut self.nodes, &node, name, &cidr);
                hold(&mut self.orphans, &node, name, cidr);
            }
        }
        self.pools.insert(name.to_owned(), plan.pool);
        self.apply_pins(Some(name));
        self.readopt(name, &mut warnings);
        Ok(warnings)
    }

    /// Allocates again the orphans of pool `name` its CIDRs cover.
    fn readopt(&mut self, name: &str, warnings: &mut Vec<Warning>) {
        let Some(pool) = self.pools.get_mut(name) else {
            return;
        };
        let mut covered = Vec::new();
        for (node, pools) in &self.orphans {
            for cidr in pools
                .get(name)
                .into_iter()
                .flat_map(super::FamilyCidrs::iter)
            {
                if pool.contains(cidr) {
                    covered.push((node.clone(), *cidr));
                }
            }
        }
        for (node, cidr) in covered {
            warnings.push(Warning::Readopted {
                cidr,
                pool: name.to_owned(),
                node: node.clone(),
            });
            match pool.occupy(name, &cidr) {
                Ok(()) => {
                    unhold(&mut self.orphans, &node, name, &cidr);
                    hold(&mut self.nodes, &node, name, cidr);
                }
                Err(error) => warnings.push(Warning::ReadoptFailed {
                    cidr,
                    pool: name.to_owned(),
                    node,
                    error,
                }),
            }
        }
    }

    /// Deletes pool `name`: no new blocks from it; blocks nodes still hold become orphans
    /// ([`Warning::PoolStillInUse`]) until the nodes drop them.
    ///
    /// # Errors
    /// [`MultiPoolError::PoolNotFoundForDeletion`].
    pub fn delete_pool(&mut self, name: &str) -> Result<Vec<Warning>, MultiPoolError> {
        if self.pools.remove(name).is_none() {
            return Err(MultiPoolError::PoolNotFoundForDeletion {
                pool: name.to_owned(),
            });
        }
        let mut warnings = Vec::new();
        let users: Vec<String> = (self.nodes.iter())
            .filter(|(_, pools)| pools.contains_key(name))
            .map(|(node, _)| node.clone())
            .collect();
        for node in users {
            warnings.push(Warning::PoolStillInUse {
                pool: name.to_owned(),
                node: node.clone(),
            });
            let cidrs = self
                .nodes
                .get_mut(&node)
                .and_then(|pools| pools.remove(name))
                .unwrap_or_default();
            if self
                .nodes
                .get(&node)
                .is_some_and(std::collections::BTreeMap::is_empty)
            {
                self.nodes.remove(&node);
            }
            for cidr in cidrs.iter() {
                hold(&mut self.orphans, &node, name, *cidr);
            }
        }
        Ok(warnings)
    }

    /// Whether the stored pool `name` has exactly `cidr` as a cluster CIDR (tests, metrics).
    #[must_use]
    pub fn pool_has_cidr(&self, name: &str, cidr: &ipnet::IpNet) -> bool {
        self.pools.get(name).is_some_and(|pool| {
            pool.sets(Family::of(cidr))
                .iter()
                .any(|set| set.is_cluster_cidr(cidr))
        })
    }
}

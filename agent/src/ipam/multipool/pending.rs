//! Pending allocations (Cilium `pendingAllocationsPerPool`): an owner whose allocation failed
//! because its pool was missing or full is counted once per pool and family in the demand
//! until it succeeds or does not retry within [`PENDING_ALLOCATION_TTL`]. Time comes in as
//! `now`; nothing here reads a clock.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use crate::ipam::Family;

/// How long a pending allocation counts without a retry (`pendingAllocationTTL`).
pub const PENDING_ALLOCATION_TTL: Duration = Duration::from_mins(5);

/// pool → family → owner → expiry.
#[derive(Clone, Debug, Default)]
pub(super) struct Pending {
    pools: BTreeMap<String, BTreeMap<Family, BTreeMap<String, Instant>>>,
}

impl Pending {
    /// Records (or refreshes) `owner`'s pending allocation; a retry does not count twice.
    pub(super) fn upsert(&mut self, pool: &str, owner: &str, family: Family, now: Instant) {
        let expiry = now.checked_add(PENDING_ALLOCATION_TTL).unwrap_or(now);
        self.pools
            .entry(pool.to_owned())
            .or_default()
            .entry(family)
            .or_default()
            .insert(owner.to_owned(), expiry);
    }

    /// `owner` got its address: it no longer counts.
    pub(super) fn mark_allocated(&mut self, pool: &str, owner: &str, family: Family) {
        let Some(families) = self.pools.get_mut(pool) else {
            return;
        };
        if let Some(owners) = families.get_mut(&family) {
            owners.remove(owner);
            if owners.is_empty() {
                families.remove(&family);
            }
        }
        if families.is_empty() {
            self.pools.remove(pool);
        }
    }

    /// Drops the entries whose expiry is before `now`.
    pub(super) fn purge_expired(&mut self, now: Instant) {
        self.pools.retain(|_, families| {
            families.retain(|_, owners| {
                owners.retain(|_, expiry| now <= *expiry);
                !owners.is_empty()
            });
            !families.is_empty()
        });
    }

    /// Pending count of `pool` and `family`.
    pub(super) fn count(&self, pool: &str, family: Family) -> usize {
        self.pools
            .get(pool)
            .and_then(|f| f.get(&family))
            .map_or(0, BTreeMap::len)
    }

    /// The pools with pending entries.
    pub(super) fn pools(&self) -> impl Iterator<Item = &str> {
        self.pools.keys().map(String::as_str)
    }
}

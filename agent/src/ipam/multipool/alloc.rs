//! Allocation from the multi-pool manager (Cilium `allocateNext`, `allocateIP`, `releaseIP`):
//! picking the pool and family, the skip-masquerade lookup and the pending-allocation
//! bookkeeping around every attempt. The CIDR-level choice is [`super::cidr`]'s.

use std::{net::IpAddr, time::Instant};

use super::{MultiPoolAllocation, MultiPoolError, MultiPoolManager, PoolNotFound};
use crate::ipam::{Family, Random};

impl MultiPoolManager {
    /// Allocates a random free address of `family` from `pool` for `owner`. Failures record a
    /// pending allocation (refreshed on retry); success clears it. `skip_masquerade` is the
    /// caller's per-pool lookup (§8.1).
    ///
    /// # Errors
    /// [`MultiPoolError::PoolNotReady`], [`MultiPoolError::SkipMasquerade`],
    /// [`MultiPoolError::Exhausted`].
    pub fn allocate_next(
        &mut self,
        owner: &str,
        pool: &str,
        family: Family,
        skip_masquerade: &dyn Fn(&str) -> Result<bool, PoolNotFound>,
        rng: &mut (impl Random + ?Sized),
        now: Instant,
    ) -> Result<MultiPoolAllocation, MultiPoolError> {
        let result = self.try_allocate_next(pool, family, skip_masquerade, rng);
        self.settle_pending(&result, pool, owner, family, now);
        result
    }

    fn try_allocate_next(
        &mut self,
        pool: &str,
        family: Family,
        skip_masquerade: &dyn Fn(&str) -> Result<bool, PoolNotFound>,
        rng: &mut (impl Random + ?Sized),
    ) -> Result<MultiPoolAllocation, MultiPoolError> {
        let cidrs = self
            .pools
            .get_mut(pool)
            .and_then(|p| p.family_mut(family))
            .ok_or_else(|| MultiPoolError::PoolNotReady {
                pool: pool.to_owned(),
                family,
            })?;
        let skip = skip_masquerade(pool)?;
        let ip = cidrs.allocate_next(rng)?;
        Ok(MultiPoolAllocation {
            ip,
            pool: pool.to_owned(),
            skip_masquerade: skip,
        })
    }

    /// Reserves `ip` in `pool` for `owner` (restore, explicit request); same pending
    /// bookkeeping as [`Self::allocate_next`], never sets `skip_masquerade`.
    ///
    /// # Errors
    /// [`MultiPoolError::PoolNotReadyForIp`], [`MultiPoolError::NotInAnyCidr`],
    /// [`MultiPoolError::Range`].
    pub fn allocate_ip(
        &mut self,
        ip: IpAddr,
        owner: &str,
        pool: &str,
        now: Instant,
    ) -> Result<MultiPoolAllocation, MultiPoolError> {
        let family = Family::of(&ip);
        let result = self
            .pools
            .get_mut(pool)
            .and_then(|p| p.family_mut(family))
            .ok_or_else(|| MultiPoolError::PoolNotReadyForIp {
                ip,
                pool: pool.to_owned(),
                family,
            })
            .and_then(|cidrs| cidrs.allocate(ip))
            .map(|()| MultiPoolAllocation {
                ip,
                pool: pool.to_owned(),
                skip_masquerade: false,
            });
        self.settle_pending(&result, pool, owner, family, now);
        result
    }

    fn settle_pending<T>(
        &mut self,
        result: &Result<T, MultiPoolError>,
        pool: &str,
        owner: &str,
        family: Family,
        now: Instant,
    ) {
        match result {
            Ok(_) => self.pending.mark_allocated(pool, owner, family),
            Err(_) => self.pending.upsert(pool, owner, family, now),
        }
    }

    /// Frees `ip` in `pool`; an address the pool does not hold is a silent no-op.
    ///
    /// # Errors
    /// [`MultiPoolError::UnknownPool`].
    pub fn release_ip(&mut self, ip: IpAddr, pool: &str) -> Result<(), MultiPoolError> {
        let family = Family::of(&ip);
        let cidrs = self
            .pools
            .get_mut(pool)
            .and_then(|p| p.family_mut(family))
            .ok_or_else(|| MultiPoolError::UnknownPool {
                ip,
                pool: pool.to_owned(),
                family,
            })?;
        cidrs.release(ip);
        Ok(())
    }
}

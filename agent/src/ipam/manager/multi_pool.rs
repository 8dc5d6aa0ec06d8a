//! The multi-pool modes (`multi-pool`, and `eni` with linear demand): the operator assigns
//! CIDRs per pool in `spec.ipam.pools.allocated` (for eni, derived from the ENI spec and
//! status); the agent allocates from the pool selection chose and writes its demand back to
//! `spec.ipam.pools`.

use std::{collections::BTreeMap, net::IpAddr, time::Instant};

use super::{
    AllocatorError, Failure, IpamConfig, IpamError, IpamUsage, PoolStat, Waiting,
    backend::{Backend, Handed, Request},
};
use crate::{
    crd::ipam::NodeIpamWrite,
    ipam::{
        Family, Random,
        input::{NodeInput, NodeOutput},
        mode::IpamMode,
        multipool::{MultiPoolError, MultiPoolManager, PoolNotFound},
    },
};

/// The multi-pool manager.
#[derive(Debug)]
pub(super) struct MultiPool {
    pub(super) manager: MultiPoolManager,
}

impl Backend for MultiPool {
    fn observe_node(&mut self, node: &NodeInput, config: &IpamConfig) {
        let eni = (config.mode == IpamMode::Eni)
            .then_some(node.eni_allocated.as_ref())
            .flatten();
        match eni {
            Some(entry) => self
                .manager
                .upsert_node(std::slice::from_ref(entry), node.pre_allocate),
            None => self
                .manager
                .upsert_node(&node.pools_allocated, node.pre_allocate),
        }
        self.manager.mark_synced();
    }

    fn holds_for_static_ip(&self) -> bool {
        true
    }

    fn ready(&self, _config: &IpamConfig) -> Result<(), IpamError> {
        if self.manager.all_pools_ready() {
            Ok(())
        } else {
            Err(Waiting::Pools {
                waits: self.manager.pools_not_ready(),
            }
            .into())
        }
    }

    fn allocate(
        &mut self,
        request: &Request<'_>,
        rng: &mut dyn Random,
        now: Instant,
    ) -> Result<Handed, IpamError> {
        let Request {
            owner,
            family,
            pool: chosen,
            pools,
            config,
        } = *request;
        let skip = |pool: &str| -> Result<bool, PoolNotFound> {
            if config.mode == IpamMode::Eni {
                // Cilium's ENI mode: the one pool comes from the ENIs, no CiliumPodIPPool
                // backs it, and skip-masquerade is always false.
                return Ok(false);
            }
            if config.only_masquerade_default_pool && pool != config.default_pool {
                return Ok(true);
            }
            pools
                .iter()
                .find(|p| p.name == pool)
                .map(|p| p.skip_masquerade)
                .ok_or_else(|| PoolNotFound {
                    pool: pool.to_owned(),
                })
        };
        let pool_size = self
            .manager
            .usage(chosen, family)
            .map_or(0, |u| u.used + u.free);
        let a = self
            .manager
            .allocate_next(owner, chosen, family, &skip, rng, now)
            .map_err(|e| -> IpamError {
                match e {
                    MultiPoolError::PoolNotReady { .. } => {
                        Waiting::from(AllocatorError::from(e)).into()
                    }
                    MultiPoolError::Exhausted => Failure::Exhausted {
                        pool: chosen.to_owned(),
                        family,
                        size: u128::from(pool_size),
                        source: e.into(),
                    }
                    .into(),
                    other => Failure::Allocator(other.into()).into(),
                }
            })?;
        Ok(Handed {
            ip: a.ip,
            pool: a.pool,
            skip_masquerade: a.skip_masquerade,
        })
    }

    fn restore(
        &mut self,
        ip: IpAddr,
        owner: &str,
        pool: &str,
        now: Instant,
    ) -> Result<(), IpamError> {
        match self.manager.allocate_ip(ip, owner, pool, now) {
            Ok(_) => Ok(()),
            Err(e) if e.is_pool_not_ready() => Err(Waiting::from(AllocatorError::from(e)).into()),
            Err(e) => Err(IpamError::Unrestorable { source: e.into() }),
        }
    }

    fn release(&mut self, ip: IpAddr, pool: &str) {
        let _ = self.manager.release_ip(ip, pool);
    }

    fn restore_finished(&mut self) {
        self.manager.restore_finished(Family::V4);
        self.manager.restore_finished(Family::V6);
    }

    fn node_write(&mut self, node: &NodeOutput, now: Instant) -> NodeIpamWrite {
        let update = self.manager.pool_spec(&node.pools, now);
        NodeIpamWrite {
            used: node.has_used.then(BTreeMap::new),
            release_ips: None,
            pools: update.changed.then_some(update.spec),
            cilium_internal_ips: None,
        }
    }

    fn status(&self) -> String {
        self.manager.status()
    }

    fn usage(&mut self, families: &[Family], _default_pool: &str, now: Instant) -> IpamUsage {
        let mut usage = IpamUsage {
            status: self.manager.status(),
            ..IpamUsage::default()
        };
        let names: Vec<String> = self.manager.pool_names().map(str::to_owned).collect();
        for name in &names {
            for &family in families {
                let Some(u) = self.manager.usage(name, family) else {
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
        for (name, demand) in self.manager.demand(now) {
            for family in families {
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
        usage
    }
}

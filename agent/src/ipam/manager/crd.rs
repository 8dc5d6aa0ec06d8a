//! The CRD modes (`crd`, `azure`, `alibabacloud`): the operator fills `spec.ipam.pool`, the
//! agent allocates from it, answers the release handshake and writes `status.ipam.used` and
//! `status.ipam.release-ips` back.

use std::{net::IpAddr, time::Instant};

use super::{
    AllocatorError, Failure, IpamConfig, IpamError, IpamUsage, PoolStat, Waiting,
    backend::{Backend, Handed, Request},
    family_word,
    usage::to_u64,
};
use crate::{
    crd::ipam::NodeIpamWrite,
    ipam::{
        Family, Random,
        crdalloc::{CrdAllocator, CrdError, required_ips},
        input::{NodeInput, NodeOutput},
        mode::IpamMode,
    },
};

/// The CRD allocator and the minimum of addresses the node needs before it is ready.
#[derive(Debug)]
pub(super) struct Crd {
    alloc: CrdAllocator,
    min_required: usize,
}

impl Crd {
    pub(super) fn new(mode: IpamMode) -> Self {
        Self {
            alloc: CrdAllocator::new(mode),
            min_required: 1,
        }
    }
}

/// What a refusal of the CRD allocator means for a restore.
fn restore_error(e: CrdError) -> IpamError {
    match e {
        CrdError::NodeUnavailable | CrdError::NoPool => {
            Waiting::from(AllocatorError::from(e)).into()
        }
        e => IpamError::Unrestorable { source: e.into() },
    }
}

impl Backend for Crd {
    fn observe_node(&mut self, node: &NodeInput, config: &IpamConfig) {
        self.alloc
            .update_node(node.crd_pool.clone(), node.release_ips.clone());
        self.min_required =
            required_ips(node.min_allocate, node.pre_allocate, config.health_checking);
    }

    fn remove_node(&mut self) {
        self.alloc.remove_node();
    }

    fn holds_for_static_ip(&self) -> bool {
        true
    }

    fn ready(&self, _config: &IpamConfig) -> Result<(), IpamError> {
        if self.alloc.minimum_reached(self.min_required) {
            Ok(())
        } else {
            Err(Waiting::CrdMinimum.into())
        }
    }

    fn allocate(
        &mut self,
        request: &Request<'_>,
        rng: &mut dyn Random,
        _now: Instant,
    ) -> Result<Handed, IpamError> {
        let family = request.family;
        let size = self.alloc.capacity(family);
        let a = self
            .alloc
            .allocate_next(request.owner, family, rng)
            .map_err(|e| match e {
                CrdError::Exhausted { .. } | CrdError::ExhaustedCrd { .. } => Failure::Exhausted {
                    pool: "spec.ipam.pool".to_owned(),
                    family,
                    size: size as u128,
                    source: e.into(),
                },
                other => Failure::Allocator(other.into()),
            })?;
        Ok(Handed {
            ip: a.ip,
            pool: request.config.default_pool.clone(),
            skip_masquerade: false,
        })
    }

    fn restore(
        &mut self,
        ip: IpAddr,
        owner: &str,
        _pool: &str,
        _now: Instant,
    ) -> Result<(), IpamError> {
        self.alloc
            .allocate(ip, owner)
            .map(|_| ())
            .map_err(restore_error)
    }

    fn restore_endpoint(
        &mut self,
        ip: IpAddr,
        owner: &str,
        pool: &str,
        now: Instant,
        bypass: bool,
    ) -> Result<bool, IpamError> {
        if !bypass {
            return self.restore(ip, owner, pool, now).map(|()| false);
        }
        match self.alloc.allocate(ip, owner) {
            Err(e) if e.is_not_in_pool(ip) => {
                self.alloc.allocate_outside_pool(ip, owner);
                Ok(true)
            }
            Ok(_) => Ok(false),
            Err(_) => self.restore(ip, owner, pool, now).map(|()| false),
        }
    }

    fn release(&mut self, ip: IpAddr, _pool: &str) {
        let _ = self.alloc.release(ip);
    }

    fn node_write(&mut self, _node: &NodeOutput, _now: Instant) -> NodeIpamWrite {
        NodeIpamWrite {
            used: Some(self.alloc.used()),
            release_ips: Some(self.alloc.release_ips()),
            pools: None,
            cilium_internal_ips: None,
        }
    }

    fn status(&self) -> String {
        format!(
            "IPv4: {}, IPv6: {}",
            self.alloc.status(Family::V4),
            self.alloc.status(Family::V6)
        )
    }

    fn usage(&mut self, families: &[Family], default_pool: &str, _now: Instant) -> IpamUsage {
        let mut usage = IpamUsage::default();
        let mut parts = Vec::new();
        for &family in families {
            parts.push(format!(
                "{}: {}",
                family_word(family),
                self.alloc.status(family)
            ));
            usage.pools.push(PoolStat {
                pool: default_pool.to_owned(),
                family,
                capacity: to_u64(self.alloc.capacity(family)),
                used: to_u64(self.alloc.allocated_count(family)),
                cidr: None,
                cidrs: 0,
            });
        }
        usage.status = parts.join(", ");
        let capacity: usize = [Family::V4, Family::V6]
            .into_iter()
            .map(|f| self.alloc.capacity(f))
            .sum();
        usage.needed = to_u64(self.min_required.saturating_sub(capacity));
        usage
    }
}

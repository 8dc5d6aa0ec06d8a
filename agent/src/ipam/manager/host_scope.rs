//! The host-scope modes (`kubernetes`, `cluster-pool`): one range per family, the CiliumNode's
//! pod CIDR, fixed once seen (Cilium reads it at start-up). Nothing is written back.

use std::{net::IpAddr, time::Instant};

use ipnet::IpNet;

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
        hostscope::HostScopeAllocator,
        input::{NodeInput, NodeOutput},
    },
};

/// One host-scope allocator per family, once the family's pod CIDR is known.
#[derive(Debug, Default)]
pub(super) struct HostScope {
    v4: Option<HostScopeAllocator>,
    v6: Option<HostScopeAllocator>,
}

impl HostScope {
    fn slot(&self, family: Family) -> Option<&HostScopeAllocator> {
        match family {
            Family::V4 => self.v4.as_ref(),
            Family::V6 => self.v6.as_ref(),
        }
    }

    fn slot_mut(&mut self, family: Family) -> Option<&mut HostScopeAllocator> {
        match family {
            Family::V4 => self.v4.as_mut(),
            Family::V6 => self.v6.as_mut(),
        }
    }
}

impl Backend for HostScope {
    fn observe_node(&mut self, node: &NodeInput, config: &IpamConfig) {
        for cidr in &node.pod_cidrs {
            let slot = if matches!(cidr, IpNet::V4(_)) {
                &mut self.v4
            } else {
                &mut self.v6
            };
            if slot.is_none() {
                *slot = Some(HostScopeAllocator::new(
                    cidr.trunc(),
                    config.default_pool.clone(),
                ));
            }
        }
    }

    fn ready(&self, config: &IpamConfig) -> Result<(), IpamError> {
        for (enabled, family) in [(config.ipv4, Family::V4), (config.ipv6, Family::V6)] {
            if enabled && self.slot(family).is_none() {
                return Err(Waiting::NoRange { family }.into());
            }
        }
        Ok(())
    }

    fn allocate(
        &mut self,
        request: &Request<'_>,
        rng: &mut dyn Random,
        _now: Instant,
    ) -> Result<Handed, IpamError> {
        let family = request.family;
        let alloc = self
            .slot_mut(family)
            .ok_or(Failure::FamilyDisabled { family })?;
        let size = alloc.capacity();
        let a = alloc.allocate_next(rng).map_err(|e| Failure::Exhausted {
            pool: request.config.default_pool.clone(),
            family,
            size,
            source: e.into(),
        })?;
        Ok(Handed {
            ip: a.ip,
            pool: a.pool,
            skip_masquerade: false,
        })
    }

    fn restore(
        &mut self,
        ip: IpAddr,
        _owner: &str,
        _pool: &str,
        _now: Instant,
    ) -> Result<(), IpamError> {
        let family = Family::of(&ip);
        let Some(alloc) = self.slot_mut(family) else {
            return Err(Waiting::NoCidr { family }.into());
        };
        alloc
            .allocate(ip)
            .map(|_| ())
            .map_err(|e| IpamError::Unrestorable {
                source: AllocatorError::from(e),
            })
    }

    fn release(&mut self, ip: IpAddr, _pool: &str) {
        if let Some(a) = self.slot_mut(Family::of(&ip)) {
            a.release(ip);
        }
    }

    fn node_write(&mut self, _node: &NodeOutput, _now: Instant) -> NodeIpamWrite {
        NodeIpamWrite::default()
    }

    fn status(&self) -> String {
        let part = |a: Option<&HostScopeAllocator>| {
            a.map_or_else(|| "not configured".to_owned(), HostScopeAllocator::status)
        };
        format!(
            "IPv4: {}, IPv6: {}",
            part(self.slot(Family::V4)),
            part(self.slot(Family::V6))
        )
    }

    fn usage(&mut self, families: &[Family], default_pool: &str, _now: Instant) -> IpamUsage {
        let mut usage = IpamUsage::default();
        let mut parts = Vec::new();
        for &family in families {
            let Some(a) = self.slot(family) else {
                parts.push(format!("{}: not configured", family_word(family)));
                continue;
            };
            parts.push(format!("{}: {}", family_word(family), a.status()));
            usage.pools.push(PoolStat {
                pool: default_pool.to_owned(),
                family,
                capacity: to_u64(a.capacity()),
                used: a.used(),
                cidr: Some(a.cidr()),
                cidrs: 1,
            });
        }
        usage.status = parts.join(", ");
        usage
    }
}

//! One facade over the allocator the configured mode runs (Cilium's `ConfigureAllocator` and
//! `AllocateNext` family handling): fed the own CiliumNode, it answers allocations for pods
//! (IPv6 first, then IPv4, undoing the first if the second fails), restores known addresses,
//! releases, tells whether the node is ready, and says what to write back to the CiliumNode.
//! Each mode is one [`backend::Backend`] in its own file (`host_scope`, `crd`, `multi_pool`,
//! `delegated`); this file keeps what they share: the families, pool selection, the static IP
//! wait and readiness at start. The CiliumNode reaches the backends only as IPAM's own
//! [`NodeInput`] / [`NodeOutput`], the pools as [`PoolInput`] (`crate::ipam::input`, the one
//! adapter from the wire types).
//! Errors are typed (`error`): the allocator's own error stays the source. Pure like the rest
//! of `ipam`: objects, time and randomness come in as arguments.

use std::{net::IpAddr, time::Instant};

use self::{
    backend::{Backend, Request},
    crd::Crd,
    delegated::Delegated,
    host_scope::HostScope,
    multi_pool::MultiPool,
};
pub use self::{
    error::{AllocatorError, Failure, IpamError, Waiting},
    usage::{IpamUsage, PoolStat},
};
use super::{
    Family, Random,
    cloud::{CloudInput, PodRouting, RoutingError},
    input::{NodeInput, NodeOutput, PoolInput},
    mode::{AllocatorKind, IpamMode},
    multipool::{MultiPoolConfig, MultiPoolManager},
    prealloc::parse_pre_allocation,
    selection::{ObjectLookup, PoolChoice, Rule, SelectionContext, SelectionError, pool_for_pod},
    staticip::StaticIp,
};
use crate::crd::{ipam::NodeIpamWrite, node::CiliumNode};

mod backend;
mod crd;
mod delegated;
mod error;
mod host_scope;
mod multi_pool;
mod problems;
mod restore;
mod usage;

/// What the manager needs from the agent configuration.
#[expect(
    clippy::struct_excessive_bools,
    reason = "mirrors cilium-config's boolean keys"
)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpamConfig {
    /// `ipam`.
    pub mode: IpamMode,
    /// `ipam-default-ip-pool` (after any CiliumNodeConfig override).
    pub default_pool: String,
    /// `ipam-multi-pool-pre-allocation`, unparsed.
    pub pre_allocation: String,
    /// `enable-ipv4`.
    pub ipv4: bool,
    /// `enable-ipv6`.
    pub ipv6: bool,
    /// `enable-health-checking` (CRD minimum of 2).
    pub health_checking: bool,
    /// `only-masquerade-default-pool`.
    pub only_masquerade_default_pool: bool,
    /// `bypass-ip-availability-upon-restore`: a recorded IPv4 address that left
    /// `spec.ipam.pool` (CRD modes) is restored anyway.
    pub bypass_ip_availability_upon_restore: bool,
}

/// One address handed to a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocated {
    /// The address.
    pub ip: IpAddr,
    /// Its pool.
    pub pool: String,
    /// Traffic from it is not masqueraded (per-pool rule).
    pub skip_masquerade: bool,
    /// Why this pool (multi-pool selection), for `ipam explain`.
    pub rule: Rule,
}

/// The allocator of the configured mode.
#[derive(Debug)]
pub struct IpamManager {
    config: IpamConfig,
    backend: Box<dyn Backend>,
    node_seen: bool,
    /// The own CiliumNode's static IP request and answer (CRD and multi-pool backends).
    static_ip: StaticIp,
    /// Readiness was reached once: from then on shortages are allocation errors (and demand
    /// for the operator), not "not ready" (Cilium waits for pools only at start-up).
    started: bool,
    /// The own CiliumNode's cloud interfaces (eni, azure, alibabacloud routing).
    cloud: CloudInput,
}

impl IpamManager {
    /// A manager for `config`; no node seen yet.
    ///
    /// # Errors
    /// The pre-allocation flag does not parse (multi-pool).
    pub fn new(config: IpamConfig) -> Result<Self, IpamError> {
        let backend: Box<dyn Backend> = match config.mode.allocator() {
            AllocatorKind::HostScope => Box::new(HostScope::default()),
            AllocatorKind::Crd => Box::new(Crd::new(config.mode)),
            AllocatorKind::MultiPool => {
                let pre = parse_pre_allocation(&config.pre_allocation, &config.default_pool)?;
                Box::new(MultiPool {
                    manager: MultiPoolManager::new(MultiPoolConfig::multi_pool(
                        config.ipv4,
                        config.ipv6,
                        pre,
                    )),
                })
            }
            AllocatorKind::MultiPoolLinear => Box::new(MultiPool {
                manager: MultiPoolManager::new(MultiPoolConfig::eni(config.ipv4, config.ipv6)),
            }),
            AllocatorKind::None => Box::new(Delegated),
        };
        Ok(Self {
            config,
            backend,
            node_seen: false,
            static_ip: StaticIp::default(),
            started: false,
            cloud: CloudInput::default(),
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &IpamConfig {
        &self.config
    }

    /// The enabled families, in Cilium's allocation order (IPv6 first).
    #[must_use]
    pub fn families(&self) -> Vec<Family> {
        // Cilium allocates IPv6 first, then IPv4.
        let mut f = Vec::new();
        if self.config.ipv6 {
            f.push(Family::V6);
        }
        if self.config.ipv4 {
            f.push(Family::V4);
        }
        f
    }

    /// Feed the current own CiliumNode (`None`: it does not exist / was deleted).
    pub fn observe_node(&mut self, node: Option<&CiliumNode>) {
        let Some(node) = node else {
            self.backend.remove_node();
            self.cloud = CloudInput::default();
            return;
        };
        self.node_seen = true;
        self.cloud = CloudInput::from(node);
        let node = NodeInput::from(node);
        self.static_ip =
            StaticIp::new(node.static_ip_tags.clone(), node.assigned_static_ip.clone());
        self.backend.observe_node(&node, &self.config);
    }

    /// `Ok` when pods can get addresses; otherwise what the node waits for (Cilium's wording).
    ///
    /// # Errors
    /// The reason the node is not ready.
    pub fn ready(&self) -> Result<(), IpamError> {
        if !self.node_seen {
            return Err(Waiting::NoNode.into());
        }
        self.backend.ready(&self.config)?;
        match self.static_ip.pending_tags() {
            Some(tags) if self.backend.holds_for_static_ip() => {
                Err(Waiting::StaticIp { tags }.into())
            }
            _ => Ok(()),
        }
    }

    /// The pool each family of `owner` would use and why, or why none can be chosen.
    #[must_use]
    pub fn explain(
        &self,
        owner: &str,
        objects: &dyn ObjectLookup,
        pools: &[PoolInput],
    ) -> Vec<(Family, Result<PoolChoice, SelectionError>)> {
        let ctx = self.selection(objects, pools);
        self.families()
            .into_iter()
            .map(|f| (f, pool_for_pod(owner, f, &ctx)))
            .collect()
    }

    fn selection<'a>(
        &'a self,
        objects: &'a dyn ObjectLookup,
        pools: &'a [PoolInput],
    ) -> SelectionContext<'a> {
        SelectionContext {
            ipam_mode: self.config.mode.as_str(),
            pools_synced: self.node_seen,
            default_pool: &self.config.default_pool,
            objects,
            pools,
        }
    }

    /// Addresses for a pod (or `router`): every enabled family, IPv6 first. If a later family
    /// fails, the addresses already taken are released, so nothing is left behind.
    ///
    /// # Errors
    /// [`IpamError::NotReady`] (try again later) or [`IpamError::Failed`], worded as Cilium.
    pub fn allocate(
        &mut self,
        owner: &str,
        objects: &dyn ObjectLookup,
        pools: &[PoolInput],
        rng: &mut dyn Random,
        now: Instant,
    ) -> Result<Vec<Allocated>, IpamError> {
        let families = self.families();
        self.allocate_families(owner, &families, objects, pools, rng, now)
    }

    /// [`Self::allocate`] for the given families only (the router, when some families'
    /// addresses were restored).
    ///
    /// # Errors
    /// As [`Self::allocate`].
    pub fn allocate_families(
        &mut self,
        owner: &str,
        families: &[Family],
        objects: &dyn ObjectLookup,
        pools: &[PoolInput],
        rng: &mut dyn Random,
        now: Instant,
    ) -> Result<Vec<Allocated>, IpamError> {
        if !self.started {
            self.ready()?;
            self.started = true;
        }
        let mut done: Vec<Allocated> = Vec::new();
        for family in families.iter().copied() {
            match self.allocate_family(owner, family, objects, pools, rng, now) {
                Ok(a) => done.push(a),
                Err(e) => {
                    for a in &done {
                        self.release(a.ip, &a.pool);
                    }
                    return Err(e);
                }
            }
        }
        Ok(done)
    }

    fn allocate_family(
        &mut self,
        owner: &str,
        family: Family,
        objects: &dyn ObjectLookup,
        pools: &[PoolInput],
        rng: &mut dyn Random,
        now: Instant,
    ) -> Result<Allocated, IpamError> {
        let choice = pool_for_pod(owner, family, &self.selection(objects, pools)).map_err(|e| {
            Failure::Selection {
                owner: owner.to_owned(),
                source: e,
            }
        })?;
        let request = Request {
            owner,
            family,
            pool: &choice.pool,
            pools,
            config: &self.config,
        };
        let handed = self.backend.allocate(&request, rng, now)?;
        Ok(Allocated {
            ip: handed.ip,
            pool: handed.pool,
            skip_masquerade: handed.skip_masquerade,
            rule: choice.rule,
        })
    }

    /// The own CiliumNode's cloud interfaces as last observed.
    #[must_use]
    pub fn cloud(&self) -> &CloudInput {
        &self.cloud
    }

    /// Where the traffic of `ip` must leave the node (eni, azure, alibabacloud; `None` in the
    /// other modes); `extra` CIDRs are added to the interface's (the native-routing CIDR).
    ///
    /// # Errors
    /// No interface of the CiliumNode owns the address (Cilium's wording).
    pub fn pod_routing(
        &self,
        ip: IpAddr,
        extra: &[ipnet::IpNet],
    ) -> Result<Option<PodRouting>, RoutingError> {
        self.cloud.pod_routing(self.config.mode, ip, extra)
    }

    /// Release `ip` of `pool`. Unknown addresses are a no-op, as in Cilium's multi-pool.
    pub fn release(&mut self, ip: IpAddr, pool: &str) {
        self.backend.release(ip, pool);
    }

    /// Every address the agent restored is back: CIDRs may now be released (multi-pool).
    pub fn restore_finished(&mut self) {
        self.backend.restore_finished();
    }

    /// What the agent owns in its CiliumNode now: `status.ipam.used` and the handshake answers
    /// (CRD modes) or `spec.ipam.pools` (multi-pool, eni, plus clearing a stale `used`).
    #[must_use]
    pub fn node_write(&mut self, node: Option<&CiliumNode>, now: Instant) -> NodeIpamWrite {
        self.backend.node_write(&NodeOutput::from(node), now)
    }

    /// `"IPv4: …, IPv6: …"`-style status of the allocator.
    #[must_use]
    pub fn status(&self) -> String {
        self.backend.status()
    }
}

const fn family_word(family: Family) -> &'static str {
    match family {
        Family::V4 => "IPv4",
        Family::V6 => "IPv6",
    }
}

#[cfg(test)]
mod tests;

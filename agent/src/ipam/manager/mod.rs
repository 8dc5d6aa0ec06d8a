//! One facade over the allocator the configured mode runs (Cilium's `ConfigureAllocator` and
//! `AllocateNext` family handling): fed the own CiliumNode, it answers allocations for pods
//! (IPv6 first, then IPv4, undoing the first if the second fails), restores known addresses,
//! releases, tells whether the node is ready, and says what to write back to the CiliumNode.
//! Pure like the rest of `ipam`: objects, time and randomness come in as arguments.

use std::{collections::BTreeMap, net::IpAddr, time::Instant};

use ipnet::IpNet;

use super::{
    Family, Random,
    crdalloc::{CrdAllocator, CrdError, required_ips},
    hostscope::HostScopeAllocator,
    mode::{AllocatorKind, IpamMode},
    multipool::{MultiPoolConfig, MultiPoolError, MultiPoolManager, PoolNotFound},
    prealloc::{PreAllocError, parse_pre_allocation},
    selection::{ObjectLookup, PoolChoice, Rule, SelectionContext, pool_for_pod},
    staticip::StaticIp,
};
use crate::crd::{
    eni::eni_allocated, ipam::NodeIpamWrite, node::CiliumNode, pool::CiliumPodIPPool,
};

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

/// Why an IPAM call failed.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// The node has no usable addresses yet (CNI: try again later).
    #[error("{reason}")]
    NotReady {
        /// Cilium's wording.
        reason: String,
    },
    /// The allocation failed for good (exhausted, no matching pool, …).
    #[error("{reason}")]
    Failed {
        /// Cilium's wording.
        reason: String,
    },
    /// A recorded address cannot be taken again, and never will be under this configuration
    /// and CiliumNode (it left the pool or the pod CIDR, or is taken twice).
    #[error("{reason}")]
    Unrestorable {
        /// Cilium's wording.
        reason: String,
    },
    /// The configuration cannot work (bad pre-allocation flag).
    #[error(transparent)]
    Config(#[from] PreAllocError),
}

fn failed(e: impl std::fmt::Display) -> IpamError {
    IpamError::Failed {
        reason: e.to_string(),
    }
}

#[derive(Debug)]
enum Backend {
    HostScope {
        v4: Option<HostScopeAllocator>,
        v6: Option<HostScopeAllocator>,
    },
    Crd(CrdAllocator),
    Multi(MultiPoolManager),
    Delegated,
}

/// The allocator of the configured mode.
#[derive(Debug)]
pub struct IpamManager {
    config: IpamConfig,
    backend: Backend,
    node_seen: bool,
    min_required: usize,
    /// The own CiliumNode's static IP request and answer (CRD and multi-pool backends).
    static_ip: StaticIp,
    /// Readiness was reached once: from then on shortages are allocation errors (and demand
    /// for the operator), not "not ready" (Cilium waits for pools only at start-up).
    started: bool,
}

impl IpamManager {
    /// A manager for `config`; no node seen yet.
    ///
    /// # Errors
    /// The pre-allocation flag does not parse (multi-pool).
    pub fn new(config: IpamConfig) -> Result<Self, IpamError> {
        let backend = match config.mode.allocator() {
            AllocatorKind::HostScope => Backend::HostScope { v4: None, v6: None },
            AllocatorKind::Crd => Backend::Crd(CrdAllocator::new(config.mode)),
            AllocatorKind::MultiPool => {
                let pre = parse_pre_allocation(&config.pre_allocation, &config.default_pool)?;
                Backend::Multi(MultiPoolManager::new(MultiPoolConfig::multi_pool(
                    config.ipv4,
                    config.ipv6,
                    pre,
                )))
            }
            AllocatorKind::MultiPoolLinear => Backend::Multi(MultiPoolManager::new(
                MultiPoolConfig::eni(config.ipv4, config.ipv6),
            )),
            AllocatorKind::None => Backend::Delegated,
        };
        Ok(Self {
            config,
            backend,
            node_seen: false,
            min_required: 1,
            static_ip: StaticIp::default(),
            started: false,
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
            if let Backend::Crd(crd) = &mut self.backend {
                crd.remove_node();
            }
            return;
        };
        self.node_seen = true;
        let ipam = node.spec.ipam.clone().unwrap_or_default();
        let status = node.status.as_ref();
        self.static_ip = StaticIp::new(
            ipam.static_ip_tags.clone(),
            status
                .and_then(|s| s.ipam.as_ref())
                .map(|i| i.assigned_static_ip.clone())
                .unwrap_or_default(),
        );
        match &mut self.backend {
            Backend::HostScope { v4, v6 } => {
                // The primary CIDR per family is fixed once seen (Cilium reads it at startup).
                for cidr in &ipam.pod_cidrs {
                    let slot = if matches!(cidr, IpNet::V4(_)) {
                        &mut *v4
                    } else {
                        &mut *v6
                    };
                    if slot.is_none() {
                        *slot = Some(HostScopeAllocator::new(
                            cidr.trunc(),
                            self.config.default_pool.clone(),
                        ));
                    }
                }
            }
            Backend::Crd(crd) => {
                let release = status
                    .and_then(|s| s.ipam.as_ref())
                    .map(|i| i.release_ips.clone())
                    .unwrap_or_default();
                let pool = (!ipam.pool.is_empty()).then(|| ipam.pool.clone());
                crd.update_node(pool, release);
                self.min_required = required_ips(
                    ipam.min_allocate,
                    ipam.pre_allocate,
                    self.config.health_checking,
                );
            }
            Backend::Multi(multi) => {
                let mut allocated = ipam
                    .pools
                    .as_ref()
                    .map(|p| p.allocated.clone())
                    .unwrap_or_default();
                if self.config.mode == IpamMode::Eni
                    && let Some(entry) =
                        eni_allocated(node.spec.eni.as_ref(), status.and_then(|s| s.eni.as_ref()))
                {
                    allocated = vec![entry];
                }
                multi.upsert_node(&allocated, ipam.pre_allocate);
                multi.mark_synced();
            }
            Backend::Delegated => {}
        }
    }

    /// `Ok` when pods can get addresses; otherwise what the node waits for (Cilium's wording).
    ///
    /// # Errors
    /// The reason the node is not ready.
    pub fn ready(&self) -> Result<(), IpamError> {
        let not_ready = |reason: &str| {
            Err(IpamError::NotReady {
                reason: reason.to_owned(),
            })
        };
        if !self.node_seen {
            return not_ready("Waiting for CiliumNode custom resource to become available...");
        }
        match &self.backend {
            Backend::HostScope { v4, v6 } => {
                if self.config.ipv4 && v4.is_none() {
                    return not_ready(
                        "IPv4 allocation CIDR is not configured. Please specify --ipv4-range",
                    );
                }
                if self.config.ipv6 && v6.is_none() {
                    return not_ready(
                        "IPv6 allocation CIDR is not configured. Please specify --ipv6-range",
                    );
                }
                Ok(())
            }
            Backend::Crd(crd) if !crd.minimum_reached(self.min_required) => {
                not_ready("Waiting for IPs to become available in CRD-backed allocation pool")
            }
            Backend::Multi(multi) if !multi.all_pools_ready() => {
                not_ready(&problems::waiting_for_pools(multi))
            }
            Backend::Delegated => Err(failed("Operation not supported")),
            // Cilium holds the CRD and multi-pool allocators (not host-scope) until the
            // operator assigned a requested static IP.
            Backend::Crd(_) | Backend::Multi(_) => match self.static_ip.waiting() {
                Some(reason) => not_ready(&reason),
                None => Ok(()),
            },
        }
    }

    /// The pool each family of `owner` would use, and why.
    #[must_use]
    pub fn explain(
        &self,
        owner: &str,
        objects: &dyn ObjectLookup,
        pools: &[CiliumPodIPPool],
    ) -> Vec<(Family, Result<PoolChoice, String>)> {
        let ctx = self.selection(objects, pools);
        self.families()
            .into_iter()
            .map(|f| (f, pool_for_pod(owner, f, &ctx).map_err(|e| e.to_string())))
            .collect()
    }

    fn selection<'a>(
        &'a self,
        objects: &'a dyn ObjectLookup,
        pools: &'a [CiliumPodIPPool],
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
        pools: &[CiliumPodIPPool],
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
        pools: &[CiliumPodIPPool],
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
        pools: &[CiliumPodIPPool],
        rng: &mut dyn Random,
        now: Instant,
    ) -> Result<Allocated, IpamError> {
        let choice = pool_for_pod(owner, family, &self.selection(objects, pools)).map_err(|e| {
            failed(format!(
                "unable to determine IPAM pool for owner \"{owner}\": {e}"
            ))
        })?;
        let (default_pool, only_default) = (
            self.config.default_pool.clone(),
            self.config.only_masquerade_default_pool,
        );
        let done = |ip, pool: String, skip_masquerade| Allocated {
            ip,
            pool,
            skip_masquerade,
            rule: choice.rule.clone(),
        };
        match &mut self.backend {
            Backend::HostScope { v4, v6 } => {
                let slot = if family == Family::V4 { v4 } else { v6 };
                let alloc = slot.as_mut().ok_or_else(|| {
                    failed(format!("{} allocation disabled", family_word(family)))
                })?;
                let size = alloc.capacity();
                let a = alloc
                    .allocate_next(rng)
                    .map_err(|e| exhausted(&default_pool, family, size, &e))?;
                Ok(done(a.ip, a.pool, false))
            }
            Backend::Crd(crd) => {
                let size = crd.capacity(family);
                let a = crd.allocate_next(owner, family, rng).map_err(|e| match e {
                    CrdError::Exhausted { .. } | CrdError::ExhaustedCrd { .. } => {
                        exhausted("spec.ipam.pool", family, size as u128, &e)
                    }
                    other => failed(other),
                })?;
                Ok(done(a.ip, default_pool, false))
            }
            Backend::Multi(multi) => {
                let skip = |pool: &str| -> Result<bool, PoolNotFound> {
                    if only_default && pool != default_pool {
                        return Ok(true);
                    }
                    pools
                        .iter()
                        .find(|p| p.name() == pool)
                        .map(CiliumPodIPPool::skip_masquerade)
                        .ok_or_else(|| PoolNotFound {
                            pool: pool.to_owned(),
                        })
                };
                let pool_size = multi
                    .usage(&choice.pool, family)
                    .map_or(0, |u| u.used + u.free);
                let a = multi
                    .allocate_next(owner, &choice.pool, family, &skip, rng, now)
                    .map_err(|e| match e {
                        MultiPoolError::PoolNotReady { .. } => IpamError::NotReady {
                            reason: e.to_string(),
                        },
                        MultiPoolError::Exhausted => {
                            exhausted(&choice.pool, family, u128::from(pool_size), &e)
                        }
                        other => failed(other),
                    })?;
                Ok(done(a.ip, a.pool, a.skip_masquerade))
            }
            Backend::Delegated => Err(failed("Operation not supported")),
        }
    }

    /// Release `ip` of `pool`. Unknown addresses are a no-op, as in Cilium's multi-pool.
    pub fn release(&mut self, ip: IpAddr, pool: &str) {
        match &mut self.backend {
            Backend::HostScope { v4, v6 } => {
                if let Some(a) = if ip.is_ipv4() { v4 } else { v6 } {
                    a.release(ip);
                }
            }
            Backend::Crd(crd) => {
                let _ = crd.release(ip);
            }
            Backend::Multi(multi) => {
                let _ = multi.release_ip(ip, pool);
            }
            Backend::Delegated => {}
        }
    }

    /// Every address the agent restored is back: CIDRs may now be released (multi-pool).
    pub fn restore_finished(&mut self) {
        if let Backend::Multi(multi) = &mut self.backend {
            multi.restore_finished(Family::V4);
            multi.restore_finished(Family::V6);
        }
    }

    /// What the agent owns in its CiliumNode now: `status.ipam.used` and the handshake answers
    /// (CRD modes) or `spec.ipam.pools` (multi-pool, eni, plus clearing a stale `used`).
    #[must_use]
    pub fn node_write(&mut self, node: Option<&CiliumNode>, now: Instant) -> NodeIpamWrite {
        let current_pools = node
            .and_then(|n| n.spec.ipam.as_ref())
            .and_then(|i| i.pools.clone())
            .unwrap_or_default();
        let stale_used = node
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.ipam.as_ref())
            .is_some_and(|i| !i.used.is_empty());
        match &mut self.backend {
            Backend::Crd(crd) => NodeIpamWrite {
                used: Some(crd.used()),
                release_ips: Some(crd.release_ips()),
                pools: None,
                cilium_internal_ips: None,
            },
            Backend::Multi(multi) => {
                let update = multi.pool_spec(&current_pools, now);
                NodeIpamWrite {
                    used: stale_used.then(BTreeMap::new),
                    release_ips: None,
                    pools: update.changed.then_some(update.spec),
                    cilium_internal_ips: None,
                }
            }
            Backend::HostScope { .. } | Backend::Delegated => NodeIpamWrite::default(),
        }
    }

    /// `"IPv4: …, IPv6: …"`-style status of the allocator.
    #[must_use]
    pub fn status(&self) -> String {
        match &self.backend {
            Backend::HostScope { v4, v6 } => {
                let part = |a: &Option<HostScopeAllocator>| {
                    a.as_ref()
                        .map_or_else(|| "not configured".to_owned(), HostScopeAllocator::status)
                };
                format!("IPv4: {}, IPv6: {}", part(v4), part(v6))
            }
            Backend::Crd(crd) => format!(
                "IPv4: {}, IPv6: {}",
                crd.status(Family::V4),
                crd.status(Family::V6)
            ),
            Backend::Multi(multi) => multi.status(),
            Backend::Delegated => "delegated to plugin".to_owned(),
        }
    }
}

/// An exhaustion error naming the pool, the family and how many addresses it holds.
fn exhausted(pool: &str, family: Family, size: u128, error: &dyn std::fmt::Display) -> IpamError {
    IpamError::Failed {
        reason: format!("pool {pool:?} ({family}, {size} addresses) is exhausted: {error}"),
    }
}

const fn family_word(family: Family) -> &'static str {
    match family {
        Family::V4 => "IPv4",
        Family::V6 => "IPv6",
    }
}

mod problems;
mod restore;
mod usage;

pub use self::usage::{IpamUsage, PoolStat};

#[cfg(test)]
mod tests;

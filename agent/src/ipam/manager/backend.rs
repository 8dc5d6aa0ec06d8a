//! What one IPAM mode does behind [`super::IpamManager`]: the trait each mode's allocator
//! implements (`host_scope`, `crd`, `multi_pool`, `delegated`, one file each). The manager
//! keeps what every mode shares (families and their order, pool selection, the static IP
//! wait, readiness at start); a backend only answers for its own allocator, and reads the
//! CiliumNode only as IPAM's own [`NodeInput`] / [`NodeOutput`]. Pure.

use std::{net::IpAddr, time::Instant};

use super::{IpamConfig, IpamError, IpamUsage};
use crate::{
    crd::ipam::NodeIpamWrite,
    ipam::{
        Family, Random,
        input::{NodeInput, NodeOutput, PoolInput},
    },
};

/// One allocation a backend is asked for: the pool selection already chose `pool`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Request<'a> {
    /// The IPAM owner (`namespace/pod`, `router`).
    pub owner: &'a str,
    /// The family.
    pub family: Family,
    /// The chosen pool (multi-pool; the others use their only pool).
    pub pool: &'a str,
    /// Every CiliumPodIPPool (per-pool masquerade).
    pub pools: &'a [PoolInput],
    /// The manager's configuration.
    pub config: &'a IpamConfig,
}

/// An address a backend handed out; the manager adds why the pool was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Handed {
    /// The address.
    pub ip: IpAddr,
    /// Its pool.
    pub pool: String,
    /// Traffic from it is not masqueraded.
    pub skip_masquerade: bool,
}

/// The allocator of one IPAM mode.
pub(super) trait Backend: std::fmt::Debug + Send + Sync {
    /// Feed the own CiliumNode (as IPAM reads it).
    fn observe_node(&mut self, node: &NodeInput, config: &IpamConfig);

    /// The own CiliumNode is gone.
    fn remove_node(&mut self) {}

    /// Whether the mode waits for a requested static IP before it is ready (Cilium holds the
    /// CRD and multi-pool allocators, not host-scope, until the operator assigned it).
    fn holds_for_static_ip(&self) -> bool {
        false
    }

    /// `Ok` when this allocator can hand out addresses (the CiliumNode was seen).
    ///
    /// # Errors
    /// What the node waits for, or [`super::Failure::NotSupported`].
    fn ready(&self, config: &IpamConfig) -> Result<(), IpamError>;

    /// One address of `request.family` for `request.owner`.
    ///
    /// # Errors
    /// Not ready (try again later) or failed, worded as Cilium.
    fn allocate(
        &mut self,
        request: &Request<'_>,
        rng: &mut dyn Random,
        now: Instant,
    ) -> Result<Handed, IpamError>;

    /// Take `ip` for `owner` again, in `pool`.
    ///
    /// # Errors
    /// Not ready (what it needs has not arrived), or unrestorable.
    fn restore(
        &mut self,
        ip: IpAddr,
        owner: &str,
        pool: &str,
        now: Instant,
    ) -> Result<(), IpamError>;

    /// [`Self::restore`] of an endpoint's address; `bypass`: hold an address that left the
    /// pool anyway (`bypass-ip-availability-upon-restore`, CRD modes). Returns whether the
    /// bypass was used.
    ///
    /// # Errors
    /// As [`Self::restore`].
    fn restore_endpoint(
        &mut self,
        ip: IpAddr,
        owner: &str,
        pool: &str,
        now: Instant,
        bypass: bool,
    ) -> Result<bool, IpamError> {
        let _ = bypass;
        self.restore(ip, owner, pool, now).map(|()| false)
    }

    /// Release `ip` of `pool`; unknown addresses are a no-op.
    fn release(&mut self, ip: IpAddr, pool: &str);

    /// Every restored address is back (multi-pool may now release CIDRs).
    fn restore_finished(&mut self) {}

    /// What the agent owns in its CiliumNode now, against the node's current parts.
    fn node_write(&mut self, node: &NodeOutput, now: Instant) -> NodeIpamWrite;

    /// `"IPv4: …, IPv6: …"`-style status.
    fn status(&self) -> String;

    /// Usage of every pool of `families` (sorted); `now` ages pending allocations.
    fn usage(&mut self, families: &[Family], default_pool: &str, now: Instant) -> IpamUsage;
}

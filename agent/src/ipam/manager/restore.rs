//! Taking recorded addresses again after a restart (the endpoints' and the router's), and
//! telling an address whose pool or CIDR has not arrived yet from one that can never come
//! back. The mode's backend decides; pure, like the rest of the manager.

use std::{net::IpAddr, time::Instant};

use super::{IpamError, IpamManager};

impl IpamManager {
    /// Take `ip` for `owner` again (agent restart, `[restored]` owners; the router), in
    /// `pool`.
    ///
    /// # Errors
    /// [`IpamError::NotReady`]: what the address needs has not arrived yet (the pod CIDR, the
    /// CiliumNode or its pool, a multi-pool pool's CIDRs of the family): try again later.
    /// [`IpamError::Unrestorable`]: the address is out of range, taken or in the release
    /// handshake (Cilium's wording) — final once [`Self::ready`] is `Ok`.
    pub fn restore(
        &mut self,
        ip: IpAddr,
        owner: &str,
        pool: &str,
        now: Instant,
    ) -> Result<(), IpamError> {
        self.backend.restore(ip, owner, pool, now)
    }

    /// [`Self::restore`] for an endpoint's recorded address, with
    /// `bypass-ip-availability-upon-restore`: in the CRD modes an IPv4 address that is no
    /// longer in `spec.ipam.pool` is held anyway (Cilium ignores `ErrIPNotAvailableInPool`
    /// then). Returns whether the bypass was used.
    ///
    /// # Errors
    /// As [`Self::restore`].
    pub fn restore_endpoint(
        &mut self,
        ip: IpAddr,
        owner: &str,
        pool: &str,
        now: Instant,
    ) -> Result<bool, IpamError> {
        let bypass = self.config.bypass_ip_availability_upon_restore && ip.is_ipv4();
        self.backend.restore_endpoint(ip, owner, pool, now, bypass)
    }
}

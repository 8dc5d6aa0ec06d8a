//! Taking recorded addresses again after a restart (the endpoints' and the router's), and
//! telling an address whose pool or CIDR has not arrived yet from one that can never come
//! back. Pure, like the rest of the manager.

use std::{net::IpAddr, time::Instant};

use super::{Backend, CrdError, Family, IpamError, IpamManager, failed, family_word};

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
        let not_ready = |e: &dyn std::fmt::Display| IpamError::NotReady {
            reason: e.to_string(),
        };
        let unrestorable = |e: &dyn std::fmt::Display| IpamError::Unrestorable {
            reason: e.to_string(),
        };
        match &mut self.backend {
            Backend::HostScope { v4, v6 } => {
                let family = Family::of(&ip);
                let slot = if ip.is_ipv4() { v4 } else { v6 };
                let Some(alloc) = slot.as_mut() else {
                    return Err(not_ready(&format!(
                        "{} allocation CIDR is not configured",
                        family_word(family)
                    )));
                };
                alloc.allocate(ip).map(|_| ()).map_err(|e| unrestorable(&e))
            }
            Backend::Crd(crd) => match crd.allocate(ip, owner) {
                Ok(_) => Ok(()),
                Err(e @ (CrdError::NodeUnavailable | CrdError::NoPool)) => Err(not_ready(&e)),
                Err(e) => Err(unrestorable(&e)),
            },
            Backend::Multi(multi) => match multi.allocate_ip(ip, owner, pool, now) {
                Ok(_) => Ok(()),
                Err(e) if e.is_pool_not_ready() => Err(not_ready(&e)),
                Err(e) => Err(unrestorable(&e)),
            },
            Backend::Delegated => Err(failed("Operation not supported")),
        }
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
        match &mut self.backend {
            Backend::Crd(crd) if bypass => match crd.allocate(ip, owner) {
                Err(e) if e.is_not_in_pool(ip) => {
                    crd.allocate_outside_pool(ip, owner);
                    Ok(true)
                }
                Ok(_) => Ok(false),
                Err(_) => self.restore(ip, owner, pool, now).map(|()| false),
            },
            _ => self.restore(ip, owner, pool, now).map(|()| false),
        }
    }
}

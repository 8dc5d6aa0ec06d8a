//! The host-scope allocator of the `kubernetes` and `cluster-pool` modes (Cilium
//! `pkg/ipam/hostscope.go`): one [`CidrRange`] over the node's primary allocation CIDR, fixed
//! at startup; secondary CIDRs are ignored. It also owns [`CidrRange`] itself, which the
//! multi-pool CIDRs reuse. It never looks at pools: every result reports the default pool.
//! Where the CIDR comes from (v1.Node, `CiliumNode`) is not its business.

mod bitmap;
mod range;

use std::net::IpAddr;

use ipnet::IpNet;
pub use range::CidrRange;
use thiserror::Error;

use super::Random;

/// Errors of the host-scope allocator and of [`CidrRange`] (Cilium's `ipallocator` texts).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HostScopeError {
    /// The address is outside the allocatable window of the range.
    #[error("provided IP is not in the valid range. The range of valid IPs is {cidr}")]
    NotInRange {
        /// The address asked for.
        ip: IpAddr,
        /// The range's CIDR.
        cidr: IpNet,
    },
    /// The address is already allocated.
    #[error("provided IP is already allocated")]
    AlreadyAllocated {
        /// The address asked for.
        ip: IpAddr,
    },
    /// No free address is left.
    #[error("range is full")]
    Full {
        /// The range's CIDR.
        cidr: IpNet,
    },
}

/// A successful host-scope allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostScopeAllocation {
    /// The address.
    pub ip: IpAddr,
    /// Always the default pool (`PoolDefault()`), whatever pool was asked for.
    pub pool: String,
}

/// The allocator over one family's allocation CIDR.
#[derive(Clone, Debug)]
pub struct HostScopeAllocator {
    range: CidrRange,
    default_pool: String,
}

impl HostScopeAllocator {
    /// An allocator over `cidr` (masked; network and broadcast reserved as in
    /// [`CidrRange::new`]) whose results name `default_pool`.
    #[must_use]
    pub fn new(cidr: IpNet, default_pool: impl Into<String>) -> Self {
        Self {
            range: CidrRange::new(cidr, false, false),
            default_pool: default_pool.into(),
        }
    }

    /// The masked allocation CIDR.
    #[must_use]
    pub const fn cidr(&self) -> IpNet {
        self.range.cidr()
    }

    /// Reserves `ip` (restore, router IP).
    ///
    /// # Errors
    /// [`HostScopeError::NotInRange`] or [`HostScopeError::AlreadyAllocated`].
    pub fn allocate(&mut self, ip: IpAddr) -> Result<HostScopeAllocation, HostScopeError> {
        self.range.allocate(ip)?;
        Ok(self.result(ip))
    }

    /// Reserves a random free address.
    ///
    /// # Errors
    /// [`HostScopeError::Full`].
    pub fn allocate_next(
        &mut self,
        rng: &mut (impl Random + ?Sized),
    ) -> Result<HostScopeAllocation, HostScopeError> {
        let ip = self.range.allocate_next(rng)?;
        Ok(self.result(ip))
    }

    /// Frees `ip`. Always succeeds, also for addresses never allocated or out of range.
    pub fn release(&mut self, ip: IpAddr) {
        self.range.release(ip);
    }

    /// Number of allocated addresses.
    #[must_use]
    pub const fn used(&self) -> u64 {
        self.range.used()
    }

    /// Whether `ip` is allocated.
    #[must_use]
    pub fn is_allocated(&self, ip: IpAddr) -> bool {
        self.range.is_allocated(ip)
    }

    /// The allocated addresses, ascending.
    pub fn allocated(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.range.allocated()
    }

    /// Cilium's `Capacity()`: `ip.CountIPsInCIDR`, 2^hostbits − 2 (0 for /31, /32, /127,
    /// /128). Not capped for IPv6, so it can differ from the allocatable count.
    #[must_use]
    pub fn capacity(&self) -> u128 {
        let cidr = self.range.cidr();
        let host_bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
        match host_bits {
            0 => 0,
            128 => u128::MAX - 1,
            bits => (1u128 << bits) - 2,
        }
    }

    /// The `Dump` status: `"<n>/<capacity> allocated from <cidr>"`.
    #[must_use]
    pub fn status(&self) -> String {
        format!(
            "{}/{} allocated from {}",
            self.used(),
            self.capacity(),
            self.cidr()
        )
    }

    fn result(&self, ip: IpAddr) -> HostScopeAllocation {
        HostScopeAllocation {
            ip,
            pool: self.default_pool.clone(),
        }
    }
}

#[cfg(test)]
mod tests;

//! [`CidrRange`]: the allocatable window of one CIDR (Cilium `ipallocator.Range` from
//! `NewCIDRRange`): which addresses are reserved, the IPv6 window cap, and the random-scan
//! choice of a free address. Shared by the host-scope allocator and each CIDR of a multi-pool;
//! it holds no owners and no pool names.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::{HostScopeError, bitmap::Bitmap};
use crate::ipam::Random;

/// The IPv6 window cap: a range never spans more than this many addresses.
const IPV6_WINDOW: u64 = 1 << 16;

/// The addresses of one CIDR that can be handed out, and which of them are.
#[derive(Clone, Debug)]
pub struct CidrRange {
    /// The CIDR, masked.
    cidr: IpNet,
    /// The first allocatable address, as an integer.
    base: u128,
    /// Number of allocatable addresses from `base`.
    size: u64,
    /// Allocated offsets from `base`.
    bits: Bitmap,
}

/// Cilium's `RangeSize`: 2^hostbits, 0 for a prefix of length ≤ 1, IPv6 capped at 65536.
fn window_size(cidr: &IpNet) -> u64 {
    let host_bits = cidr.max_prefix_len() - cidr.prefix_len();
    match cidr {
        IpNet::V4(_) if host_bits >= 31 => 0,
        IpNet::V6(_) if host_bits >= 127 => 0,
        IpNet::V6(_) if host_bits >= 16 => IPV6_WINDOW,
        _ => 1 << host_bits,
    }
}

/// `ip` as an integer.
fn to_int(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl CidrRange {
    /// The range of `cidr` (masked first). Unless allowed, the first (network) and last
    /// (broadcast, or the last of the IPv6 window) addresses are reserved, but only when the
    /// window holds more than 2 addresses: /31 and /127 give 2, /32 and /128 give 1.
    #[must_use]
    pub fn new(cidr: IpNet, allow_first_ip: bool, allow_last_ip: bool) -> Self {
        let cidr = cidr.trunc();
        let mut base = to_int(cidr.network());
        let mut size = window_size(&cidr);
        if size > 2 {
            if !allow_first_ip {
                base += 1;
                size -= 1;
            }
            if !allow_last_ip {
                size -= 1;
            }
        }
        Self {
            cidr,
            base,
            size,
            bits: Bitmap::default(),
        }
    }

    /// The masked CIDR.
    #[must_use]
    pub const fn cidr(&self) -> IpNet {
        self.cidr
    }

    /// Number of allocatable addresses (allocated or not).
    #[must_use]
    pub const fn size(&self) -> u64 {
        self.size
    }

    /// Number of allocated addresses.
    #[must_use]
    pub const fn used(&self) -> u64 {
        self.bits.count()
    }

    /// Number of addresses still free.
    #[must_use]
    pub const fn free(&self) -> u64 {
        self.size - self.bits.count()
    }

    /// Whether `ip` is allocated here.
    #[must_use]
    pub fn is_allocated(&self, ip: IpAddr) -> bool {
        self.offset(ip).is_some_and(|off| self.bits.get(off))
    }

    /// Reserves `ip`.
    ///
    /// # Errors
    /// [`HostScopeError::NotInRange`] outside the allocatable window,
    /// [`HostScopeError::AlreadyAllocated`] if taken.
    pub fn allocate(&mut self, ip: IpAddr) -> Result<(), HostScopeError> {
        let off = self.offset(ip).ok_or(HostScopeError::NotInRange {
            ip,
            cidr: self.cidr,
        })?;
        if self.bits.set(off) {
            Ok(())
        } else {
            Err(HostScopeError::AlreadyAllocated { ip })
        }
    }

    /// Reserves a free address: a random offset, then the first free one scanning forward
    /// with wrap-around.
    ///
    /// # Errors
    /// [`HostScopeError::Full`] when nothing is free.
    pub fn allocate_next(
        &mut self,
        rng: &mut (impl Random + ?Sized),
    ) -> Result<IpAddr, HostScopeError> {
        if self.free() == 0 {
            return Err(HostScopeError::Full { cidr: self.cidr });
        }
        let start = rng.below(self.size);
        let off = self
            .bits
            .first_clear(start, self.size)
            .or_else(|| self.bits.first_clear(0, start))
            .ok_or(HostScopeError::Full { cidr: self.cidr })?;
        self.bits.set(off);
        Ok(self.ip_at(off))
    }

    /// Frees `ip`; a no-op when it is outside the range or not allocated.
    pub fn release(&mut self, ip: IpAddr) {
        if let Some(off) = self.offset(ip) {
            self.bits.clear(off);
        }
    }

    /// The allocated addresses, ascending.
    pub fn allocated(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.bits.iter().map(|off| self.ip_at(off))
    }

    /// The offset of `ip` from `base`, if `ip` is in the CIDR and inside the window.
    fn offset(&self, ip: IpAddr) -> Option<u64> {
        if !self.cidr.contains(&ip) {
            return None;
        }
        let off = u64::try_from(to_int(ip).checked_sub(self.base)?).ok()?;
        (off < self.size).then_some(off)
    }

    /// The address at `off` from `base` (`off < size`, so it stays inside the CIDR).
    fn ip_at(&self, off: u64) -> IpAddr {
        let value = self.base + u128::from(off);
        match self.cidr {
            IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::try_from(value).unwrap_or(u32::MAX))),
            IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(value)),
        }
    }
}

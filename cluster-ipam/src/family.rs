//! [`Family`]: IPv4 or IPv6, and the small address helpers every core shares (a prefix's
//! family, its address as a number). It owns no allocation state.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use ipnet::IpNet;

/// An address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `net`.
    #[must_use]
    pub const fn of(net: &IpNet) -> Self {
        match net {
            IpNet::V4(_) => Self::V4,
            IpNet::V6(_) => Self::V6,
        }
    }

    /// The family of `addr`.
    #[must_use]
    pub const fn of_addr(addr: &IpAddr) -> Self {
        match addr {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// Address width in bits: 32 or 128.
    #[must_use]
    pub const fn bits(self) -> u8 {
        match self {
            Self::V4 => 32,
            Self::V6 => 128,
        }
    }

    /// The short name used in Cilium's flag names: `ipv4` or `ipv6`.
    #[must_use]
    pub const fn flag_name(self) -> &'static str {
        match self {
            Self::V4 => "ipv4",
            Self::V6 => "ipv6",
        }
    }

    /// The name used in Cilium's messages ("Duplicate v4 CIDR"): `v4` or `v6`.
    #[must_use]
    pub const fn short_name(self) -> &'static str {
        match self {
            Self::V4 => "v4",
            Self::V6 => "v6",
        }
    }
}

impl fmt::Display for Family {
    /// `IPv4` or `IPv6`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        })
    }
}

/// `addr` as a number (IPv4 in the low 32 bits).
pub(crate) fn addr_to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The address `value` of `family` (IPv4 takes the low 32 bits).
pub(crate) fn u128_to_addr(family: Family, value: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from(
            u32::try_from(value & u128::from(u32::MAX)).unwrap_or(u32::MAX),
        )),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(value)),
    }
}

/// Formats prefixes the way Go prints a `[]netip.Prefix` with `%s`: `[a b c]`.
pub(crate) fn go_list(nets: &[IpNet]) -> String {
    let items: Vec<String> = nets.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(" "))
}

/// Orders prefixes like Go's `netip.Prefix.Compare`: family, then prefix length, then address.
pub(crate) fn prefix_cmp(a: &IpNet, b: &IpNet) -> std::cmp::Ordering {
    Family::of(a)
        .cmp(&Family::of(b))
        .then(a.prefix_len().cmp(&b.prefix_len()))
        .then(a.addr().cmp(&b.addr()))
}

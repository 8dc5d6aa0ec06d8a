//! The masquerade-exclusion map: (pool, destination prefix) → why traffic from that pool to
//! that prefix keeps its pod source address. Cilium keeps one global `cilium_ipmasq_v4` trie;
//! weft puts the pool id in the static part of the key so each pool can have its own
//! exclusions, and stores exclusions for every pool under [`POOL_ANY`] (the datapath looks up
//! the pod's pool first, then [`POOL_ANY`]).

use crate::endpoint::{FAMILY_IPV4, FAMILY_IPV6};

/// Bits of [`MasqKey`] in front of the address (pool id, family, pad): an LPM prefix length is
/// this plus the destination prefix length.
pub const MASQ_STATIC_PREFIX: u32 = 64;

/// Pool id of exclusions that apply to every pool (never a real pool's id).
pub const POOL_ANY: u32 = u32::MAX;

/// Key data of the exclusion trie; the kernel key is `{prefix_len: u32, data: MasqKey}`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MasqKey {
    /// Pool id as in `EndpointInfo::pool_id` (0 = default pool), or [`POOL_ANY`].
    pub pool_id: u32,
    /// `FAMILY_IPV4` or `FAMILY_IPV6`.
    pub family: u8,
    /// Always 0.
    pub pad: [u8; 3],
    /// Destination in network byte order; IPv4 fills the first 4 bytes, the rest is 0.
    pub ip: [u8; 16],
}

impl MasqKey {
    /// Key data for an IPv4 destination of pool `pool_id`.
    #[must_use]
    pub const fn v4(pool_id: u32, octets: [u8; 4]) -> Self {
        let mut ip = [0u8; 16];
        ip[0] = octets[0];
        ip[1] = octets[1];
        ip[2] = octets[2];
        ip[3] = octets[3];
        Self {
            pool_id,
            family: FAMILY_IPV4,
            pad: [0; 3],
            ip,
        }
    }

    /// Key data for an IPv6 destination of pool `pool_id`.
    #[must_use]
    pub const fn v6(pool_id: u32, octets: [u8; 16]) -> Self {
        Self {
            pool_id,
            family: FAMILY_IPV6,
            pad: [0; 3],
            ip: octets,
        }
    }
}

/// Value of the exclusion trie: where the exclusion came from.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MasqInfo {
    /// `MASQ_F_*` bits (origin of the entry; any entry excludes).
    pub flags: u32,
}

/// From the ip-masq-agent configuration (`nonMasqueradeCIDRs`, link-local defaults).
pub const MASQ_F_IP_MASQ_AGENT: u32 = 1;
/// From `ipv4-native-routing-cidr` / `ipv6-native-routing-cidr`.
pub const MASQ_F_NATIVE_ROUTING: u32 = 2;
/// Configured for this pool only.
pub const MASQ_F_POOL: u32 = 4;

abi_layout!(MasqKey, 24 { pool_id: 0, family: 4, pad: 5, ip: 8 });
abi_layout!(MasqInfo, 4 { flags: 0 });

#[cfg(feature = "user")]
// SAFETY: repr(C), integers and byte arrays only, explicit padding.
unsafe impl aya::Pod for MasqKey {}
#[cfg(feature = "user")]
// SAFETY: a single u32.
unsafe impl aya::Pod for MasqInfo {}

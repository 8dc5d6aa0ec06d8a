//! The IPCache map: IP prefix → security identity (and tunnel endpoint), as Cilium's
//! `cilium_ipcache_v2` (`bpf/lib/eps.h`). An `LPM_TRIE` whose key data starts with static
//! fields (cluster id, family) that every lookup matches exactly, followed by the address, so
//! one map serves IPv4 and IPv6 and a `/0` entry per family stands for "the world".

use crate::endpoint::{FAMILY_IPV4, FAMILY_IPV6};

/// Bits of [`IpcacheKey`] in front of the address (cluster id, pad, family): an LPM prefix
/// length is this plus the address prefix length (`10.0.0.0/24` → 56, IPv4 `/0` → 32).
pub const IPCACHE_STATIC_PREFIX: u32 = 32;

/// Key data of the IPCache trie. The full kernel key is `{prefix_len: u32, data: IpcacheKey}`
/// (24 bytes, Cilium's `struct ipcache_key`); aya's `lpm_trie::Key` supplies the prefix length.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpcacheKey {
    /// Cluster id (cluster mesh); 0 for this cluster.
    pub cluster_id: u16,
    /// Always 0.
    pub pad: u8,
    /// [`FAMILY_IPV4`] or [`FAMILY_IPV6`].
    pub family: u8,
    /// Address in network byte order; IPv4 fills the first 4 bytes, the rest is 0.
    pub ip: [u8; 16],
}

impl IpcacheKey {
    /// Key data for an IPv4 address (or network) given as four octets.
    #[must_use]
    pub const fn v4(octets: [u8; 4]) -> Self {
        let mut ip = [0u8; 16];
        ip[0] = octets[0];
        ip[1] = octets[1];
        ip[2] = octets[2];
        ip[3] = octets[3];
        Self {
            cluster_id: 0,
            pad: 0,
            family: FAMILY_IPV4,
            ip,
        }
    }

    /// Key data for an IPv6 address (or network) given as sixteen octets.
    #[must_use]
    pub const fn v6(octets: [u8; 16]) -> Self {
        Self {
            cluster_id: 0,
            pad: 0,
            family: FAMILY_IPV6,
            ip: octets,
        }
    }
}

/// Value of the IPCache trie (24 bytes, Cilium's `struct remote_endpoint_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcacheInfo {
    /// Security identity of the prefix (host byte order; see `crate::identity`).
    pub sec_identity: u32,
    /// Node to tunnel to for this prefix (IPv4 in the first 4 bytes); zero when none.
    pub tunnel_endpoint: [u8; 16],
    /// Always 0.
    pub pad: u16,
    /// IPsec key index; 0 (unused by weft).
    pub key: u8,
    /// `IPCACHE_F_*` bits.
    pub flags: u8,
}

/// Do not tunnel to this prefix even in tunnel mode (Cilium's `flag_skip_tunnel`).
pub const IPCACHE_F_SKIP_TUNNEL: u8 = 1;
/// `tunnel_endpoint` is set (Cilium's `flag_has_tunnel_ep`).
pub const IPCACHE_F_HAS_TUNNEL_EP: u8 = 2;
/// `tunnel_endpoint` is an IPv6 address (Cilium's `flag_ipv6_tunnel_ep`).
pub const IPCACHE_F_IPV6_TUNNEL_EP: u8 = 4;
/// The prefix belongs to another cluster (Cilium's `flag_remote_cluster`).
pub const IPCACHE_F_REMOTE_CLUSTER: u8 = 8;

abi_layout!(IpcacheKey, 20 { cluster_id: 0, pad: 2, family: 3, ip: 4 });
abi_layout!(IpcacheInfo, 24 { sec_identity: 0, tunnel_endpoint: 4, pad: 20, key: 22, flags: 23 });

#[cfg(feature = "user")]
// SAFETY: repr(C), integers and byte arrays only, no implicit padding.
unsafe impl aya::Pod for IpcacheKey {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for IpcacheInfo {}

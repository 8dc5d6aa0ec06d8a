//! The endpoints map: pod IP → where the pod lives on this node.
//!
//! Layout follows Cilium's `cilium_lxc` key (20 bytes, family-tagged) so one key type serves
//! IPv4 and IPv6; the value is weft's own, laid out so stock bpftool prints readable fields.

use crate::MacAddr;

/// `EndpointKey::family` for an IPv4 key (same value as Cilium's `ENDPOINT_KEY_IPV4`).
pub const FAMILY_IPV4: u8 = 1;
/// `EndpointKey::family` for an IPv6 key (same value as Cilium's `ENDPOINT_KEY_IPV6`).
pub const FAMILY_IPV6: u8 = 2;

/// Key of the endpoints map: one entry per pod IP.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointKey {
    /// Address in network byte order; an IPv4 address fills the first 4 bytes, the rest is 0.
    pub ip: [u8; 16],
    /// [`FAMILY_IPV4`] or [`FAMILY_IPV6`].
    pub family: u8,
    /// Always 0.
    pub pad: u8,
    /// Cluster id (cluster mesh); 0 for local endpoints.
    pub cluster_id: u16,
}

impl EndpointKey {
    /// Key for an IPv4 address given as its four octets.
    #[must_use]
    pub const fn v4(octets: [u8; 4]) -> Self {
        let mut ip = [0u8; 16];
        ip[0] = octets[0];
        ip[1] = octets[1];
        ip[2] = octets[2];
        ip[3] = octets[3];
        Self {
            ip,
            family: FAMILY_IPV4,
            pad: 0,
            cluster_id: 0,
        }
    }

    /// Key for an IPv6 address given as its sixteen octets.
    #[must_use]
    pub const fn v6(octets: [u8; 16]) -> Self {
        Self {
            ip: octets,
            family: FAMILY_IPV6,
            pad: 0,
            cluster_id: 0,
        }
    }
}

/// Value of the endpoints map.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// Host-side veth ifindex: target of `bpf_redirect_peer` and where ARP/ND replies go.
    pub ifindex: u32,
    /// `ENDPOINT_F_*` bits.
    pub flags: u32,
    /// MAC of the pod's interface (destination MAC on delivery).
    pub pod_mac: MacAddr,
    /// Always 0.
    pub pad0: [u8; 2],
    /// MAC of the host-side veth: the gateway MAC the pod sees.
    pub node_mac: MacAddr,
    /// Always 0.
    pub pad1: [u8; 2],
    /// Security identity of the pod (host byte order).
    pub sec_identity: u32,
    /// Id of the IP pool the address came from (0 = default pool).
    pub pool_id: u32,
}

/// The endpoint is the host itself (Cilium's `ENDPOINT_F_HOST`): never redirected to.
pub const ENDPOINT_F_HOST: u32 = 1;
/// Do not masquerade IPv4 traffic from this endpoint (Cilium's `ENDPOINT_F_NO_SNAT_V4`).
pub const ENDPOINT_F_NO_SNAT_V4: u32 = 4;
/// Do not masquerade IPv6 traffic from this endpoint (Cilium's `ENDPOINT_F_NO_SNAT_V6`).
pub const ENDPOINT_F_NO_SNAT_V6: u32 = 8;

abi_layout!(EndpointKey, 20 { ip: 0, family: 16, pad: 17, cluster_id: 18 });
abi_layout!(EndpointInfo, 32 { ifindex: 0, flags: 4, pod_mac: 8, pad0: 14, node_mac: 16, pad1: 22, sec_identity: 24, pool_id: 28 });

#[cfg(feature = "user")]
// SAFETY: both types are repr(C), made only of integers and byte arrays, with no implicit padding.
unsafe impl aya::Pod for EndpointKey {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for EndpointInfo {}

/// Value of the interfaces map, keyed by host-side veth ifindex (`u32`): per-interface facts
/// the programs need before they know which endpoint is talking (Cilium compiles these into
/// each endpoint's program as `THIS_INTERFACE_MAC`; weft shares one program and looks them up).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfaceInfo {
    /// MAC of the host-side veth: source of ARP and neighbour-advertisement replies.
    pub mac: MacAddr,
    /// Always 0.
    pub pad: [u8; 2],
    /// Reserved for per-interface flags; 0 today.
    pub flags: u32,
}

abi_layout!(IfaceInfo, 12 { mac: 0, pad: 6, flags: 8 });

#[cfg(feature = "user")]
// SAFETY: repr(C), byte arrays and a u32, explicit padding.
unsafe impl aya::Pod for IfaceInfo {}

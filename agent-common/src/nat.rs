//! Source NAT of pod traffic to the node IP (BPF masquerade), laid out as Cilium's
//! `cilium_snat_v4_external` / `cilium_snat_v6_external` (`bpf/lib/nat.h`): per family an
//! `LRU_HASH` of packet-order tuples with two entries per flow — the egress tuple (pod → peer) gives the address and port to write into
//! the source, the ingress tuple of the reply (peer → node IP) gives the pod address and port
//! to write back into the destination. Ports are stored in host byte order so bpftool prints
//! them as numbers (Cilium keeps them big-endian; the layout is otherwise the same).

/// Lowest port handed out by masquerading (Cilium's `NODEPORT_PORT_MIN_NAT`).
pub const NAT_PORT_MIN: u16 = 32768;
/// Highest port handed out by masquerading (Cilium's `NODEPORT_PORT_MAX_NAT`).
pub const NAT_PORT_MAX: u16 = 65535;
/// Ports tried for a new mapping before the packet is dropped (Cilium's
/// `SNAT_COLLISION_RETRIES`): the original port, then a random one, then upwards by one.
pub const NAT_COLLISION_RETRIES: u32 = 32;

/// `NatTuple4::flags` of a tuple seen leaving the node (Cilium's `NAT_DIR_EGRESS`).
pub const NAT_DIR_EGRESS: u8 = 0;
/// `NatTuple4::flags` of a tuple seen entering the node (Cilium's `NAT_DIR_INGRESS`).
pub const NAT_DIR_INGRESS: u8 = 1;

/// IP protocol number of ICMP (the echo identifier plays the source port).
pub const IPPROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IPv6 next-header number of ICMPv6 (the echo identifier plays the source port).
pub const IPPROTO_ICMPV6: u8 = 58;

/// Key of the IPv4 NAT map: a flow in packet order (14 bytes, Cilium's `ipv4_ct_tuple`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatTuple4 {
    /// Destination address (network order).
    pub daddr: [u8; 4],
    /// Source address (network order).
    pub saddr: [u8; 4],
    /// Destination port (host order); 0 for an ICMP echo request.
    pub dport: u16,
    /// Source port (host order); the echo identifier for an ICMP echo request.
    pub sport: u16,
    /// IP protocol ([`IPPROTO_TCP`], [`IPPROTO_UDP`], [`IPPROTO_ICMP`]).
    pub nexthdr: u8,
    /// [`NAT_DIR_EGRESS`] or [`NAT_DIR_INGRESS`].
    pub flags: u8,
}

/// Value of the IPv4 NAT map: what to write into the packet.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatEntry4 {
    /// `bpf_ktime_get_ns()` when the mapping was made (`CLOCK_MONOTONIC`).
    pub created: u64,
    /// New source (egress entry) or destination (ingress entry) address, network order.
    pub to_addr: [u8; 4],
    /// New source or destination port (host order); the echo identifier for ICMP.
    pub to_port: u16,
    /// `NAT_F_*` bits.
    pub flags: u16,
}

/// The entry reserves a port of the node's own sockets: nothing is rewritten, and pods never
/// get that (peer, port) pair.
pub const NAT_F_HOST: u16 = 1;
/// The entry records a flow the outside opened to a pod directly: its replies keep the pod
/// address (an identity mapping, Cilium's "reply" conntrack state).
pub const NAT_F_INBOUND: u16 = 2;

/// Key of the IPv6 NAT map: a flow in packet order (38 bytes; Cilium's packed
/// `ipv6_ct_tuple` is 37, weft keeps the 2-byte alignment of the ports).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NatTuple6 {
    /// Destination address (network order).
    pub daddr: [u8; 16],
    /// Source address (network order).
    pub saddr: [u8; 16],
    /// Destination port (host order); 0 for an ICMPv6 echo request.
    pub dport: u16,
    /// Source port (host order); the echo identifier for an ICMPv6 echo request.
    pub sport: u16,
    /// Next header ([`IPPROTO_TCP`], [`IPPROTO_UDP`], [`IPPROTO_ICMPV6`]).
    pub nexthdr: u8,
    /// [`NAT_DIR_EGRESS`] or [`NAT_DIR_INGRESS`].
    pub flags: u8,
}

/// Value of the IPv6 NAT map: what to write into the packet.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatEntry6 {
    /// `bpf_ktime_get_ns()` when the mapping was made (`CLOCK_MONOTONIC`).
    pub created: u64,
    /// New source (egress entry) or destination (ingress entry) address, network order.
    pub to_addr: [u8; 16],
    /// New source or destination port (host order); the echo identifier for ICMPv6.
    pub to_port: u16,
    /// `NAT_F_*` bits.
    pub flags: u16,
    /// Always 0.
    pub pad: [u8; 4],
}

abi_layout!(NatTuple4, 14 { daddr: 0, saddr: 4, dport: 8, sport: 10, nexthdr: 12, flags: 13 });
abi_layout!(NatEntry4, 16 { created: 0, to_addr: 8, to_port: 12, flags: 14 });
abi_layout!(NatTuple6, 38 { daddr: 0, saddr: 16, dport: 32, sport: 34, nexthdr: 36, flags: 37 });
abi_layout!(NatEntry6, 32 { created: 0, to_addr: 8, to_port: 24, flags: 26, pad: 28 });

#[cfg(feature = "user")]
// SAFETY: repr(C), byte arrays and integers, no implicit padding (14 bytes, align 2).
unsafe impl aya::Pod for NatTuple4 {}
#[cfg(feature = "user")]
// SAFETY: repr(C), u64 then 8 bytes of arrays and integers, no implicit padding.
unsafe impl aya::Pod for NatEntry4 {}
#[cfg(feature = "user")]
// SAFETY: repr(C), byte arrays and integers, no implicit padding (38 bytes, align 2).
unsafe impl aya::Pod for NatTuple6 {}
#[cfg(feature = "user")]
// SAFETY: repr(C), u64 then 24 bytes of arrays and integers with explicit padding.
unsafe impl aya::Pod for NatEntry6 {}

/// Value of the native-devices map, keyed by ifindex (`u32`): devices where `to_netdev` and
/// `from_netdev` run, and the node addresses pod traffic is masqueraded to there.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetdevInfo {
    /// IPv4 masquerade address (network order); valid with [`NETDEV_F_MASQ_V4`].
    pub masq_v4: [u8; 4],
    /// IPv6 masquerade address (network order); valid with [`NETDEV_F_MASQ_V6`].
    pub masq_v6: [u8; 16],
    /// `NETDEV_F_*` bits.
    pub flags: u32,
}

/// Masquerade IPv4 pod traffic leaving through this device to `masq_v4`.
pub const NETDEV_F_MASQ_V4: u32 = 1;
/// Masquerade IPv6 pod traffic leaving through this device to `masq_v6`.
pub const NETDEV_F_MASQ_V6: u32 = 2;

abi_layout!(NetdevInfo, 24 { masq_v4: 0, masq_v6: 4, flags: 20 });

#[cfg(feature = "user")]
// SAFETY: repr(C), byte arrays and a u32, no implicit padding.
unsafe impl aya::Pod for NetdevInfo {}

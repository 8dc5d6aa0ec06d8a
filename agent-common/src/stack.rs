//! The stack-flows map: pod sockets that have a flow through the host stack.
//!
//! kube-proxy translates Services in netfilter, and conntrack undoes its translation only on a
//! reply that passes the same conntrack. `from_container` hands every packet for something
//! other than a local pod to the host stack, and records the pod's side of the flow here: its
//! address, its port and the protocol. A packet between two local pods normally skips the
//! stack (`bpf_redirect_peer`); it takes the stack instead when either end's socket is in this
//! map, so every flow either passes the stack in both directions on this node or in neither,
//! and conntrack never sees a reply without its request (kube-proxy drops `INVALID` packets).
//! A socket stays until the LRU evicts it; a later flow of the same socket merely loses the
//! fast path.

/// `StackKey::family` for IPv4 (as `endpoint::FAMILY_IPV4`).
pub const STACK_FAMILY_IPV4: u8 = 1;
/// `StackKey::family` for IPv6 (as `endpoint::FAMILY_IPV6`).
pub const STACK_FAMILY_IPV6: u8 = 2;

/// Key of the stack-flows map: one pod socket.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackKey {
    /// Pod address in network order; an IPv4 address fills the first 4 bytes, the rest is 0.
    pub addr: [u8; 16],
    /// The pod's port (host order).
    pub port: u16,
    /// IP protocol (TCP, UDP or SCTP).
    pub proto: u8,
    /// [`STACK_FAMILY_IPV4`] or [`STACK_FAMILY_IPV6`].
    pub family: u8,
}

impl StackKey {
    /// Key of an IPv4 socket.
    #[must_use]
    pub const fn v4(octets: [u8; 4], port: u16, proto: u8) -> Self {
        let mut addr = [0u8; 16];
        addr[0] = octets[0];
        addr[1] = octets[1];
        addr[2] = octets[2];
        addr[3] = octets[3];
        Self {
            addr,
            port,
            proto,
            family: STACK_FAMILY_IPV4,
        }
    }

    /// Key of an IPv6 socket.
    #[must_use]
    pub const fn v6(addr: [u8; 16], port: u16, proto: u8) -> Self {
        Self {
            addr,
            port,
            proto,
            family: STACK_FAMILY_IPV6,
        }
    }
}

/// Value of the stack-flows map: where the first recorded flow of the socket went (for
/// `bpftool map dump`; the datapath only asks whether the key exists).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackInfo {
    /// Destination address of that flow as the pod sent it (a Service address, say).
    pub peer: [u8; 16],
    /// Its destination port (host order).
    pub peer_port: u16,
    /// Always 0.
    pub pad: [u8; 2],
}

abi_layout!(StackKey, 20 { addr: 0, port: 16, proto: 18, family: 19 });
abi_layout!(StackInfo, 20 { peer: 0, peer_port: 16, pad: 18 });

#[cfg(feature = "user")]
// SAFETY: repr(C), a byte array and integers, no implicit padding (20 bytes, align 2).
unsafe impl aya::Pod for StackKey {}
#[cfg(feature = "user")]
// SAFETY: repr(C), a byte array and integers with explicit padding (20 bytes, align 2).
unsafe impl aya::Pod for StackInfo {}

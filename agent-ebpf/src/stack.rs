//! Which flows between local pods must take the host stack (see `agent_common::stack`).
//!
//! `from_container` records here the socket of every TCP, UDP or SCTP packet it hands to the
//! stack (the destination is not a local pod: a Service, the node, another node). A packet
//! between two local pods is redirected past the stack unless either end's socket is recorded
//! (then both are, see `between_pods`), or its ports cannot be read (a fragment, an IPv6
//! extension header first: the stack reassembles and parses), or it is an ICMP error (its quote
//! may need conntrack's reverse NAT). Both directions of a flow ask the same two sockets, so a
//! flow takes the stack both ways or not
//! at all. The stack-flow map adds 65 536 preallocated entries (7 MiB of kernel memory).

use agent_common::{
    StackInfo, StackKey,
    nat::{IPPROTO_TCP, IPPROTO_UDP},
};
use aya_ebpf::{bindings::BPF_NOEXIST, programs::TcContext};

use crate::maps::STACK_FLOWS;

/// IP protocol number of SCTP (kube-proxy translates it like TCP and UDP).
const IPPROTO_SCTP: u8 = 132;
/// ICMP echo reply and request: the only ICMP types that never carry a quoted packet.
const ICMP_ECHO_REPLY: u8 = 0;
const ICMP_ECHO_REQUEST: u8 = 8;
/// ICMPv6 echo request and reply.
const ICMP6_ECHO_REQUEST: u8 = 128;
const ICMP6_ECHO_REPLY: u8 = 129;
/// IP protocol numbers of ICMP and ICMPv6.
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_ICMPV6: u8 = 58;

/// The L4 facts of a packet that decide its path.
#[derive(Clone, Copy)]
pub enum Flow {
    /// TCP, UDP or SCTP with its (source, destination) ports in host order.
    Ports(u16, u16),
    /// ICMP or ICMPv6 that quotes another packet (an error), a fragment, or ports hidden behind
    /// an IPv6 extension header.
    NeedsStack,
    /// Anything else (ICMP echo, other protocols): no socket to look up.
    Other,
}

/// Read the L4 facts of an IP packet whose L4 header is at `off` (`hidden`: its ports cannot be
/// read there: a fragment, or an IPv6 extension header comes first).
#[inline(always)]
pub fn flow(ctx: &TcContext, off: usize, proto: u8, hidden: bool) -> Flow {
    if hidden {
        return Flow::NeedsStack;
    }
    match proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => match ctx.load::<[u8; 4]>(off) {
            Ok(p) => Flow::Ports(
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            ),
            // Truncated: nothing to look up; the stack decides.
            Err(_) => Flow::NeedsStack,
        },
        IPPROTO_ICMP => match ctx.load::<u8>(off) {
            Ok(ICMP_ECHO_REQUEST | ICMP_ECHO_REPLY) => Flow::Other,
            _ => Flow::NeedsStack,
        },
        IPPROTO_ICMPV6 => match ctx.load::<u8>(off) {
            Ok(ICMP6_ECHO_REQUEST | ICMP6_ECHO_REPLY) => Flow::Other,
            _ => Flow::NeedsStack,
        },
        _ => Flow::Other,
    }
}

/// Record that `src` sent a flow through the stack to `peer` (no-op if already recorded; the
/// lookup refreshes the entry's place in the LRU).
#[inline(always)]
pub fn remember(src: &StackKey, peer: [u8; 16], peer_port: u16) {
    if STACK_FLOWS.get_ptr(src).is_some() {
        return;
    }
    let info = StackInfo {
        peer,
        peer_port,
        pad: [0; 2],
    };
    // A full map evicts its least recently used socket; a racing insert of the same socket
    // (BPF_NOEXIST) already recorded it. Either way there is nothing to do on failure.
    let _ = STACK_FLOWS.insert(src, &info, u64::from(BPF_NOEXIST));
}

/// Has socket `key` a flow through the stack?
#[inline(always)]
pub fn recorded(key: &StackKey) -> bool {
    STACK_FLOWS.get_ptr(key).is_some()
}

/// Must a packet between two local pods take the stack? `key(source, port)` makes the key of
/// the packet's source end (`true`) or destination end (`false`) with that port.
#[inline(always)]
pub fn between_local_pods(flow: Flow, key: impl Fn(bool, u16) -> StackKey) -> bool {
    match flow {
        Flow::NeedsStack => true,
        Flow::Ports(sport, dport) => between_pods(&key(true, sport), &key(false, dport)),
        Flow::Other => false,
    }
}

/// Must a packet from socket `src` to socket `dst`, both local pods, take the stack? It must
/// when either socket is recorded, and then both are: conntrack may give a later flow of the
/// pair another source port than the pod chose (its reply tuple clashes with this flow's, which
/// conntrack keeps for minutes after it ends), and that flow's reply, sent to a port nobody
/// recorded, must still meet conntrack because it comes from a recorded socket.
#[inline(always)]
fn between_pods(src: &StackKey, dst: &StackKey) -> bool {
    let from = STACK_FLOWS.get_ptr(src).is_some();
    let to = STACK_FLOWS.get_ptr(dst).is_some();
    if !from && !to {
        return false;
    }
    if !from {
        remember(src, dst.addr, dst.port);
    }
    if !to {
        remember(dst, src.addr, src.port);
    }
    true
}

/// An IPv4 address in the 16 bytes of `StackInfo::peer`.
#[inline(always)]
pub fn v4_in_16(octets: [u8; 4]) -> [u8; 16] {
    let mut addr = [0u8; 16];
    addr[..4].copy_from_slice(&octets);
    addr
}

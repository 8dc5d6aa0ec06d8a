//! IPv6 masquerade mappings and header rewrites (Cilium's `bpf/lib/nat.h`, IPv6 slice).
//!
//! The mapping rules are those of `nat` (two entries per flow in `NAT6`, reverse tuple claimed
//! first with `BPF_NOEXIST`, the pod's port kept when it is in range and free, then one random
//! port, then upwards). What differs is the header: IPv6 has no header checksum, the 16-byte
//! addresses enter every L4 checksum through the pseudo-header — ICMPv6's too, unlike ICMP —
//! and the L4 header may sit behind extension headers (`netdev6` finds it; everything here
//! takes its offset).

use agent_common::{
    NatEntry6, NatTuple6,
    nat::{
        IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, NAT_COLLISION_RETRIES, NAT_DIR_EGRESS,
        NAT_DIR_INGRESS, NAT_F_HOST, NAT_F_INBOUND, NAT_PORT_MIN,
    },
};
use aya_ebpf::{
    bindings::{BPF_F_MARK_MANGLED_0, BPF_F_PSEUDO_HDR, BPF_NOEXIST},
    programs::TcContext,
};

use crate::{
    maps::NAT6,
    nat::{self, End, L4, RewriteFailed},
    packet::ETH_LEN,
};

/// ICMPv6 echo request type.
pub const ICMP6_ECHO_REQUEST: u8 = 128;
/// ICMPv6 echo reply type.
pub const ICMP6_ECHO_REPLY: u8 = 129;

/// Length of the fixed IPv6 header.
pub const IPV6_HDR_LEN: usize = 40;
/// Offset of the IPv6 source address in the frame.
const IPV6_SADDR_OFF: usize = ETH_LEN + 8;
/// Offset of the IPv6 destination address in the frame.
const IPV6_DADDR_OFF: usize = ETH_LEN + 24;

/// Read the L4 header at `off` for next header `proto`. `None`: not TCP, UDP or ICMPv6 (an
/// extension header, another protocol), or truncated.
#[inline(always)]
pub fn parse_l4(ctx: &TcContext, off: usize, proto: u8) -> Option<L4> {
    match proto {
        IPPROTO_TCP | IPPROTO_UDP => nat::parse_l4(ctx, off, proto),
        IPPROTO_ICMPV6 => {
            let head: [u8; 6] = ctx.load(off).ok()?;
            let id = u16::from_be_bytes([head[4], head[5]]);
            Some(L4 {
                off,
                proto,
                sport: id,
                dport: id,
                icmp_type: head[0],
            })
        }
        _ => None,
    }
}

/// Is this an ICMPv6 echo request or reply (the only ICMPv6 that is masqueraded)?
#[inline(always)]
pub fn is_echo(l4: &L4) -> bool {
    l4.proto == IPPROTO_ICMPV6
        && (l4.icmp_type == ICMP6_ECHO_REQUEST || l4.icmp_type == ICMP6_ECHO_REPLY)
}

/// Egress tuple of this packet in packet order (ICMPv6: identifier as source port).
#[inline(always)]
pub fn egress_tuple(l4: &L4, saddr: [u8; 16], daddr: [u8; 16]) -> NatTuple6 {
    NatTuple6 {
        daddr,
        saddr,
        dport: if l4.proto == IPPROTO_ICMPV6 {
            0
        } else {
            l4.dport
        },
        sport: l4.sport,
        nexthdr: l4.proto,
        flags: NAT_DIR_EGRESS,
    }
}

/// Ingress tuple of this packet in packet order (ICMPv6: identifier as destination port).
#[inline(always)]
pub fn ingress_tuple(l4: &L4, saddr: [u8; 16], daddr: [u8; 16]) -> NatTuple6 {
    NatTuple6 {
        daddr,
        saddr,
        dport: l4.dport,
        sport: if l4.proto == IPPROTO_ICMPV6 {
            0
        } else {
            l4.sport
        },
        nexthdr: l4.proto,
        flags: NAT_DIR_INGRESS,
    }
}

/// The reply-direction tuple of egress tuple `tuple` once its source is (`masq`, `port`).
#[inline(always)]
fn reverse_of(tuple: &NatTuple6, masq: [u8; 16], port: u16) -> NatTuple6 {
    NatTuple6 {
        daddr: masq,
        saddr: tuple.daddr,
        dport: port,
        sport: tuple.dport,
        nexthdr: tuple.nexthdr,
        flags: NAT_DIR_INGRESS,
    }
}

#[inline(always)]
const fn entry(created: u64, to_addr: [u8; 16], to_port: u16, flags: u16) -> NatEntry6 {
    NatEntry6 {
        created,
        to_addr,
        to_port,
        flags,
        pad: [0; 4],
    }
}

/// The mapping of `tuple`, if the flow has one.
#[inline(always)]
pub fn lookup(tuple: &NatTuple6) -> Option<NatEntry6> {
    // SAFETY: copied out before any other operation on the map.
    unsafe { NAT6.get(tuple).copied() }
}

/// Claim a node port for the new flow `tuple` (egress, pod → peer) masqueraded to `masq`.
/// `None`: every port tried is taken.
#[inline(always)]
pub fn new_mapping(tuple: &NatTuple6, masq: [u8; 16]) -> Option<NatEntry6> {
    let created = nat::now();
    let original = tuple.sport;
    let mut port = if tuple.nexthdr == IPPROTO_ICMPV6 || original >= NAT_PORT_MIN {
        original
    } else {
        nat::random_port()
    };
    let back = entry(created, tuple.saddr, original, 0);
    let mut i = 0;
    while i < NAT_COLLISION_RETRIES {
        let reverse = reverse_of(tuple, masq, port);
        if NAT6.insert(&reverse, &back, u64::from(BPF_NOEXIST)).is_ok() {
            let forward = entry(created, masq, port, 0);
            if NAT6.insert(tuple, &forward, u64::from(BPF_NOEXIST)).is_ok() {
                return Some(forward);
            }
            // Another CPU mapped this flow meanwhile: give our port back and use its mapping.
            let _ = NAT6.remove(&reverse);
            return lookup(tuple);
        }
        port = if i == 0 {
            nat::random_port()
        } else {
            nat::next_port(port)
        };
        i += 1;
    }
    None
}

/// Reserve the (peer, port) pair of a node socket's flow `tuple` (egress, node IP → peer).
#[inline(always)]
pub fn reserve_host(tuple: &NatTuple6) {
    let reverse = reverse_of(tuple, tuple.saddr, tuple.sport);
    if lookup(&reverse).is_none() {
        let host = entry(nat::now(), tuple.saddr, tuple.sport, NAT_F_HOST);
        let _ = NAT6.insert(&reverse, &host, u64::from(BPF_NOEXIST));
    }
}

/// Record that the outside opened flow `tuple` (egress direction, pod → peer) to the pod
/// directly, so its replies leave with the pod address.
#[inline(always)]
pub fn record_inbound(tuple: &NatTuple6) {
    if lookup(tuple).is_none() {
        let inbound = entry(nat::now(), tuple.saddr, tuple.sport, NAT_F_INBOUND);
        let _ = NAT6.insert(tuple, &inbound, u64::from(BPF_NOEXIST));
    }
}

/// Bytes `at..at + 4` of `addr` as the 32-bit word the checksum helpers take.
#[inline(always)]
fn word(addr: &[u8; 16], at: usize) -> u64 {
    u64::from(u32::from_ne_bytes([
        addr[at],
        addr[at + 1],
        addr[at + 2],
        addr[at + 3],
    ]))
}

/// Patch the checksum at `csum_off` for a 16-byte address that changes from `from` to `to`,
/// one 32-bit word at a time (`flags`: `BPF_F_PSEUDO_HDR` when the address is in the
/// pseudo-header, `BPF_F_MARK_MANGLED_0` for UDP).
#[inline(always)]
pub fn csum_replace_addr(
    ctx: &TcContext,
    csum_off: usize,
    from: &[u8; 16],
    to: &[u8; 16],
    flags: u64,
) -> Result<(), RewriteFailed> {
    // Written out so every index is a constant the verifier (and the bounds check) sees.
    replace_word(ctx, csum_off, word(from, 0), word(to, 0), flags)?;
    replace_word(ctx, csum_off, word(from, 4), word(to, 4), flags)?;
    replace_word(ctx, csum_off, word(from, 8), word(to, 8), flags)?;
    replace_word(ctx, csum_off, word(from, 12), word(to, 12), flags)
}

#[inline(always)]
fn replace_word(
    ctx: &TcContext,
    csum_off: usize,
    old: u64,
    new: u64,
    flags: u64,
) -> Result<(), RewriteFailed> {
    if old == new {
        return Ok(());
    }
    ctx.l4_csum_replace(csum_off, old, new, flags | 4)
        .map_err(|_| RewriteFailed)
}

/// Rewrite one end of the packet from (`from_addr`, its port) to (`to.to_addr`, `to.to_port`),
/// patching the L4 checksum (pseudo-header included, for ICMPv6 too).
#[inline(always)]
pub fn rewrite(
    ctx: &TcContext,
    l4: &L4,
    end: End,
    from_addr: [u8; 16],
    to: &NatEntry6,
) -> Result<(), RewriteFailed> {
    let addr_off = if end == End::Source {
        IPV6_SADDR_OFF
    } else {
        IPV6_DADDR_OFF
    };
    let (port_off, from_port) = match (end, l4.proto) {
        (_, IPPROTO_ICMPV6) => (l4.off + 4, l4.sport),
        (End::Source, _) => (l4.off, l4.sport),
        (End::Destination, _) => (l4.off + 2, l4.dport),
    };
    let (csum_off, mangled) = match l4.proto {
        IPPROTO_TCP => (l4.off + 16, 0),
        IPPROTO_UDP => (l4.off + 6, u64::from(BPF_F_MARK_MANGLED_0)),
        _ => (l4.off + 2, 0),
    };
    if from_port != to.to_port {
        let old = u64::from(u16::from_ne_bytes(from_port.to_be_bytes()));
        let new = u64::from(u16::from_ne_bytes(to.to_port.to_be_bytes()));
        ctx.l4_csum_replace(csum_off, old, new, mangled | 2)
            .map_err(|_| RewriteFailed)?;
        ctx.store(port_off, &to.to_port.to_be_bytes(), 0)
            .map_err(|_| RewriteFailed)?;
    }
    if from_addr != to.to_addr {
        csum_replace_addr(
            ctx,
            csum_off,
            &from_addr,
            &to.to_addr,
            u64::from(BPF_F_PSEUDO_HDR) | mangled,
        )?;
        ctx.store(addr_off, &to.to_addr, 0)
            .map_err(|_| RewriteFailed)?;
    }
    Ok(())
}

//! Masquerade mappings and header rewrites (Cilium's `bpf/lib/nat.h`, IPv4 slice).
//!
//! A new flow gets two entries in `NAT4`: the reverse (reply) tuple is inserted first with
//! `BPF_NOEXIST` — that insert is what claims a (peer, node port) pair — then the forward tuple.
//! Ports are tried in Cilium's order: the pod's own source port if it is in the masquerade
//! range, then one random port, then upwards by one, at most `NAT_COLLISION_RETRIES` times.
//! Rewrites patch the IPv4 header checksum and the L4 checksum incrementally with the kernel's
//! `l3_csum_replace` / `l4_csum_replace` helpers (pseudo-header flag for addresses, none for
//! ICMP), so offloaded (`CHECKSUM_PARTIAL`) packets stay right too.

use agent_common::{
    NatEntry4, NatTuple4,
    nat::{
        IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP, NAT_COLLISION_RETRIES, NAT_DIR_EGRESS,
        NAT_DIR_INGRESS, NAT_F_HOST, NAT_F_INBOUND, NAT_PORT_MAX, NAT_PORT_MIN,
    },
};
use aya_ebpf::{
    bindings::{BPF_F_MARK_MANGLED_0, BPF_F_PSEUDO_HDR, BPF_NOEXIST},
    helpers::{bpf_get_prandom_u32, bpf_ktime_get_ns},
    programs::TcContext,
};

use crate::{maps::NAT4, packet::ETH_LEN};

/// ICMP echo request type.
pub const ICMP_ECHO_REQUEST: u8 = 8;
/// ICMP echo reply type.
pub const ICMP_ECHO_REPLY: u8 = 0;

/// Offset of the IPv4 header checksum in the frame.
const IPV4_CSUM_OFF: usize = ETH_LEN + 10;
/// Offset of the IPv4 source address in the frame.
const IPV4_SADDR_OFF: usize = ETH_LEN + 12;
/// Offset of the IPv4 destination address in the frame.
const IPV4_DADDR_OFF: usize = ETH_LEN + 16;

/// The L4 part of a packet, as NAT sees it.
#[derive(Clone, Copy)]
pub struct L4 {
    /// Frame offset of the L4 header.
    pub off: usize,
    /// IP protocol.
    pub proto: u8,
    /// Source port (host order); ICMP: the echo identifier.
    pub sport: u16,
    /// Destination port (host order); ICMP: the echo identifier.
    pub dport: u16,
    /// ICMP type (0 for TCP and UDP).
    pub icmp_type: u8,
}

impl L4 {
    /// Is this an ICMP echo request or reply (the only ICMP that is masqueraded)?
    #[inline(always)]
    pub fn is_echo(&self) -> bool {
        self.proto == IPPROTO_ICMP
            && (self.icmp_type == ICMP_ECHO_REQUEST || self.icmp_type == ICMP_ECHO_REPLY)
    }

    /// Can NAT handle it: TCP, UDP, or an ICMP echo request or reply?
    #[inline(always)]
    pub fn is_echo_or_port(&self) -> bool {
        self.proto != IPPROTO_ICMP || self.is_echo()
    }

    /// The same L4 with source and destination ports swapped (the reply's view).
    #[inline(always)]
    pub fn swapped(&self) -> Self {
        Self {
            sport: self.dport,
            dport: self.sport,
            ..*self
        }
    }

    /// Egress tuple of this packet in packet order (ICMP: identifier as source port).
    #[inline(always)]
    pub fn egress_tuple(&self, saddr: [u8; 4], daddr: [u8; 4]) -> NatTuple4 {
        let (sport, dport) = if self.proto == IPPROTO_ICMP {
            (self.sport, 0)
        } else {
            (self.sport, self.dport)
        };
        NatTuple4 {
            daddr,
            saddr,
            dport,
            sport,
            nexthdr: self.proto,
            flags: NAT_DIR_EGRESS,
        }
    }

    /// Ingress tuple of this packet in packet order (ICMP: identifier as destination port).
    #[inline(always)]
    pub fn ingress_tuple(&self, saddr: [u8; 4], daddr: [u8; 4]) -> NatTuple4 {
        let (sport, dport) = if self.proto == IPPROTO_ICMP {
            (0, self.dport)
        } else {
            (self.sport, self.dport)
        };
        NatTuple4 {
            daddr,
            saddr,
            dport,
            sport,
            nexthdr: self.proto,
            flags: NAT_DIR_INGRESS,
        }
    }
}

/// Read the L4 header at `off` for protocol `proto`. `None`: not TCP, UDP or ICMP, or
/// truncated.
#[inline(always)]
pub fn parse_l4(ctx: &TcContext, off: usize, proto: u8) -> Option<L4> {
    match proto {
        IPPROTO_TCP | IPPROTO_UDP => {
            let ports: [u8; 4] = ctx.load(off).ok()?;
            Some(L4 {
                off,
                proto,
                sport: u16::from_be_bytes([ports[0], ports[1]]),
                dport: u16::from_be_bytes([ports[2], ports[3]]),
                icmp_type: 0,
            })
        }
        IPPROTO_ICMP => {
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

/// A uniformly random port of the masquerade range.
#[inline(always)]
pub fn random_port() -> u16 {
    // SAFETY: plain helper call.
    let r = unsafe { bpf_get_prandom_u32() };
    let span = u32::from(NAT_PORT_MAX - NAT_PORT_MIN) + 1;
    // `r % span` < span <= 32768, so the sum stays within u16.
    NAT_PORT_MIN + (r % span) as u16
}

/// The port after `port` in the masquerade range, wrapping to its start.
#[inline(always)]
pub fn next_port(port: u16) -> u16 {
    if port >= NAT_PORT_MAX || port < NAT_PORT_MIN {
        NAT_PORT_MIN
    } else {
        port + 1
    }
}

#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: plain helper call.
    unsafe { bpf_ktime_get_ns() }
}

/// The mapping of an egress tuple, if the flow has one.
#[inline(always)]
pub fn lookup(tuple: &NatTuple4) -> Option<NatEntry4> {
    // SAFETY: copied out before any other operation on the map.
    unsafe { NAT4.get(tuple).copied() }
}

/// Claim a node port for the new flow `tuple` (egress, pod → peer) masqueraded to `masq`.
/// `None`: every port tried is taken (port space exhausted for this peer).
#[inline(always)]
pub fn new_mapping(tuple: &NatTuple4, masq: [u8; 4]) -> Option<NatEntry4> {
    let created = now();
    let original = tuple.sport;
    let mut port = if tuple.nexthdr == IPPROTO_ICMP || original >= NAT_PORT_MIN {
        original
    } else {
        random_port()
    };
    let back = NatEntry4 {
        created,
        to_addr: tuple.saddr,
        to_port: original,
        flags: 0,
    };
    let mut i = 0;
    while i < NAT_COLLISION_RETRIES {
        let reverse = NatTuple4 {
            daddr: masq,
            saddr: tuple.daddr,
            dport: port,
            sport: tuple.dport,
            nexthdr: tuple.nexthdr,
            flags: NAT_DIR_INGRESS,
        };
        if NAT4.insert(&reverse, &back, u64::from(BPF_NOEXIST)).is_ok() {
            let forward = NatEntry4 {
                created,
                to_addr: masq,
                to_port: port,
                flags: 0,
            };
            if NAT4.insert(tuple, &forward, u64::from(BPF_NOEXIST)).is_ok() {
                return Some(forward);
            }
            // Another CPU mapped this flow meanwhile: give our port back and use its mapping.
            let _ = NAT4.remove(&reverse);
            return lookup(tuple);
        }
        port = if i == 0 {
            random_port()
        } else {
            next_port(port)
        };
        i += 1;
    }
    None
}

/// Reserve the (peer, port) pair of a node socket's flow `tuple` (egress, node IP → peer) so
/// no pod mapping takes it and its replies reach the node untouched.
#[inline(always)]
pub fn reserve_host(tuple: &NatTuple4) {
    let reverse = NatTuple4 {
        daddr: tuple.saddr,
        saddr: tuple.daddr,
        dport: tuple.sport,
        sport: tuple.dport,
        nexthdr: tuple.nexthdr,
        flags: NAT_DIR_INGRESS,
    };
    if lookup(&reverse).is_none() {
        let entry = NatEntry4 {
            created: now(),
            to_addr: tuple.saddr,
            to_port: tuple.sport,
            flags: NAT_F_HOST,
        };
        let _ = NAT4.insert(&reverse, &entry, u64::from(BPF_NOEXIST));
    }
}

/// Record that the outside opened flow `tuple` (egress direction, pod → peer) to the pod
/// directly, so its replies leave with the pod address.
#[inline(always)]
pub fn record_inbound(tuple: &NatTuple4) {
    if lookup(tuple).is_none() {
        let entry = NatEntry4 {
            created: now(),
            to_addr: tuple.saddr,
            to_port: tuple.sport,
            flags: NAT_F_INBOUND,
        };
        let _ = NAT4.insert(tuple, &entry, u64::from(BPF_NOEXIST));
    }
}

/// Which end of the packet a rewrite changes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Source address and port (egress masquerade).
    Source,
    /// Destination address and port (reverse NAT of a reply).
    Destination,
}

/// A rewrite helper failed (the packet may be half-rewritten: drop it).
pub struct RewriteFailed;

/// Rewrite one end of the packet from (`from_addr`, `from_port`) to (`to_addr`, `to_port`),
/// patching both checksums.
#[inline(always)]
pub fn rewrite(
    ctx: &TcContext,
    l4: &L4,
    end: End,
    from_addr: [u8; 4],
    to: &NatEntry4,
) -> Result<(), RewriteFailed> {
    let (addr_off, port_off, from_port) = match (end, l4.proto) {
        (_, IPPROTO_ICMP) => (
            if end == End::Source {
                IPV4_SADDR_OFF
            } else {
                IPV4_DADDR_OFF
            },
            l4.off + 4,
            l4.sport,
        ),
        (End::Source, _) => (IPV4_SADDR_OFF, l4.off, l4.sport),
        (End::Destination, _) => (IPV4_DADDR_OFF, l4.off + 2, l4.dport),
    };
    let (csum_off, mangled) = match l4.proto {
        IPPROTO_TCP => (l4.off + 16, 0),
        IPPROTO_UDP => (l4.off + 6, u64::from(BPF_F_MARK_MANGLED_0)),
        _ => (l4.off + 2, 0),
    };
    let old_addr = u64::from(u32::from_ne_bytes(from_addr));
    let new_addr = u64::from(u32::from_ne_bytes(to.to_addr));
    let old_port = u64::from(u16::from_ne_bytes(from_port.to_be_bytes()));
    let new_port = u64::from(u16::from_ne_bytes(to.to_port.to_be_bytes()));
    if l4.proto != IPPROTO_ICMP && old_addr != new_addr {
        ctx.l4_csum_replace(
            csum_off,
            old_addr,
            new_addr,
            u64::from(BPF_F_PSEUDO_HDR) | mangled | 4,
        )
        .map_err(|_| RewriteFailed)?;
    }
    if old_port != new_port {
        ctx.l4_csum_replace(csum_off, old_port, new_port, mangled | 2)
            .map_err(|_| RewriteFailed)?;
        ctx.store(port_off, &to.to_port.to_be_bytes(), 0)
            .map_err(|_| RewriteFailed)?;
    }
    if old_addr != new_addr {
        ctx.l3_csum_replace(IPV4_CSUM_OFF, old_addr, new_addr, 4)
            .map_err(|_| RewriteFailed)?;
        ctx.store(addr_off, &to.to_addr, 0)
            .map_err(|_| RewriteFailed)?;
    }
    Ok(())
}

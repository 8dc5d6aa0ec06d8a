//! Reverse NAT of ICMPv6 errors about masqueraded flows (Cilium's
//! `__snat_v6_rev_nat_icmp_error`). "Packet too big" (what IPv6 path-MTU discovery lives on —
//! routers never fragment IPv6), "destination unreachable", "time exceeded" and "parameter
//! problem" reach the node's masquerade address quoting the packet as it left the node. The
//! quoted source address and port go back to the pod's, the outer destination to the pod, and
//! the ICMPv6 checksum is patched for all three: the quote is ICMPv6 payload, the outer
//! destination is in its pseudo-header. There is no IPv6 header checksum to fix; the quoted L4
//! checksum is left alone (as for IPv4: no stack verifies a quote's).

use agent_common::{
    NatEntry6, NatTuple6,
    nat::{IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, NAT_DIR_INGRESS, NAT_F_HOST},
};
use aya_ebpf::{bindings::BPF_F_PSEUDO_HDR, programs::TcContext};

use crate::{
    nat::RewriteFailed,
    nat6::{self, ICMP6_ECHO_REQUEST, IPV6_HDR_LEN},
    packet::ETH_LEN,
};

/// ICMPv6 destination unreachable.
const ICMP6_DEST_UNREACH: u8 = 1;
/// ICMPv6 parameter problem (the highest error type).
const ICMP6_PARAM_PROB: u8 = 4;

/// Is ICMPv6 type `icmp_type` an error that quotes the offending packet (types 1–4:
/// destination unreachable, packet too big, time exceeded, parameter problem)?
#[inline(always)]
pub fn is_error(icmp_type: u8) -> bool {
    (ICMP6_DEST_UNREACH..=ICMP6_PARAM_PROB).contains(&icmp_type)
}

/// The quoted flow of an ICMPv6 error: its reply-direction tuple towards the masquerade
/// address, and where its parts sit in the frame.
struct Quote {
    reverse: NatTuple6,
    /// Frame offset of the quoted IPv6 header.
    ip_off: usize,
    /// Frame offset of the quoted source port (ICMPv6: identifier).
    port_off: usize,
    /// Quoted source port as it is now (the node port).
    port: u16,
}

#[inline(always)]
fn quote(ctx: &TcContext, icmp_off: usize, masq: [u8; 16]) -> Option<Quote> {
    let ip_off = icmp_off + 8;
    let head: [u8; 8] = ctx.load(ip_off).ok()?;
    let src: [u8; 16] = ctx.load(ip_off + 8).ok()?;
    let dst: [u8; 16] = ctx.load(ip_off + 24).ok()?;
    if head[0] >> 4 != 6 || src != masq {
        return None;
    }
    let proto = head[6];
    let l4_off = ip_off + IPV6_HDR_LEN;
    let l4: [u8; 6] = ctx.load(l4_off).ok()?;
    let (port_off, sport, dport) = match proto {
        IPPROTO_TCP | IPPROTO_UDP => (
            l4_off,
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        ),
        IPPROTO_ICMPV6 if l4[0] == ICMP6_ECHO_REQUEST => {
            (l4_off + 4, u16::from_be_bytes([l4[4], l4[5]]), 0)
        }
        _ => return None,
    };
    Some(Quote {
        reverse: NatTuple6 {
            daddr: masq,
            saddr: dst,
            dport: sport,
            sport: dport,
            nexthdr: proto,
            flags: NAT_DIR_INGRESS,
        },
        ip_off,
        port_off,
        port: sport,
    })
}

/// Rewrite an ICMPv6 error to `masq` whose ICMPv6 header starts at `icmp_off` if it quotes a
/// masqueraded flow. `Ok(Some(mapping))`: rewritten, deliver to `mapping.to_addr`;
/// `Ok(None)`: not about a pod's flow, leave it to the host.
#[inline(always)]
pub fn rev_nat_error(
    ctx: &TcContext,
    icmp_off: usize,
    masq: [u8; 16],
) -> Result<Option<NatEntry6>, RewriteFailed> {
    let Some(q) = quote(ctx, icmp_off, masq) else {
        return Ok(None);
    };
    let Some(mapping) = nat6::lookup(&q.reverse) else {
        return Ok(None);
    };
    if mapping.flags & NAT_F_HOST != 0 {
        return Ok(None);
    }
    let csum_off = icmp_off + 2;
    if q.port != mapping.to_port {
        let word = |v: u16| u64::from(u16::from_ne_bytes(v.to_be_bytes()));
        ctx.l4_csum_replace(csum_off, word(q.port), word(mapping.to_port), 2)
            .map_err(|_| RewriteFailed)?;
        ctx.store(q.port_off, &mapping.to_port.to_be_bytes(), 0)
            .map_err(|_| RewriteFailed)?;
    }
    // The quoted source is ICMPv6 payload: no pseudo-header flag.
    nat6::csum_replace_addr(ctx, csum_off, &masq, &mapping.to_addr, 0)?;
    ctx.store(q.ip_off + 8, &mapping.to_addr, 0)
        .map_err(|_| RewriteFailed)?;
    // The outer destination is in the ICMPv6 pseudo-header.
    nat6::csum_replace_addr(
        ctx,
        csum_off,
        &masq,
        &mapping.to_addr,
        u64::from(BPF_F_PSEUDO_HDR),
    )?;
    ctx.store(ETH_LEN + 24, &mapping.to_addr, 0)
        .map_err(|_| RewriteFailed)?;
    Ok(Some(mapping))
}

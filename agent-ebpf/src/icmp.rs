//! Reverse NAT of ICMP errors about masqueraded flows (Cilium's
//! `__snat_v4_rev_nat_icmp_error`). A router on the path that answers a pod's masqueraded
//! packet with "destination unreachable" (for example "fragmentation needed", which TCP path-MTU
//! discovery depends on) or "time exceeded" sends it to the node IP and quotes the packet as it
//! left the node: node IP and node port as source. The quoted source is put back to the pod's
//! address and port, the outer destination to the pod, and the quoted IPv4 header checksum,
//! the ICMP checksum and the outer header checksum are patched so the pod's stack matches the
//! error to its socket. The quoted L4 checksum is left as it is (the quote is truncated; no
//! stack verifies it).

use agent_common::{
    NatEntry4, NatTuple4,
    nat::{IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP, NAT_DIR_INGRESS, NAT_F_HOST},
};
use aya_ebpf::programs::TcContext;

use crate::{
    nat::{self, ICMP_ECHO_REQUEST, RewriteFailed},
    packet::ETH_LEN,
};

/// ICMP destination unreachable (includes "fragmentation needed").
pub const ICMP_DEST_UNREACH: u8 = 3;
/// ICMP time exceeded.
pub const ICMP_TIME_EXCEEDED: u8 = 11;

/// Is ICMP type `icmp_type` an error that quotes the offending packet?
#[inline(always)]
pub fn is_error(icmp_type: u8) -> bool {
    icmp_type == ICMP_DEST_UNREACH || icmp_type == ICMP_TIME_EXCEEDED
}

/// The quoted flow of an ICMP error whose ICMP header starts at `icmp_off`: its reverse
/// (reply-direction) tuple towards `masq`, and where its parts sit in the frame.
struct Quote {
    reverse: NatTuple4,
    /// Frame offset of the quoted IPv4 header.
    ip_off: usize,
    /// Frame offset of the quoted source port (ICMP: identifier).
    port_off: usize,
    /// Quoted source port as it is now (the node port).
    port: u16,
}

#[inline(always)]
fn quote(ctx: &TcContext, icmp_off: usize, masq: [u8; 4]) -> Option<Quote> {
    let ip_off = icmp_off + 8;
    let ip: [u8; 20] = ctx.load(ip_off).ok()?;
    if ip[0] >> 4 != 4 || ip[0] & 0x0f < 5 || ip[12..16] != masq {
        return None;
    }
    let proto = ip[9];
    let l4_off = ip_off + usize::from(ip[0] & 0x0f) * 4;
    let head: [u8; 6] = ctx.load(l4_off).ok()?;
    let (port_off, sport, dport) = match proto {
        IPPROTO_TCP | IPPROTO_UDP => (
            l4_off,
            u16::from_be_bytes([head[0], head[1]]),
            u16::from_be_bytes([head[2], head[3]]),
        ),
        IPPROTO_ICMP if head[0] == ICMP_ECHO_REQUEST => {
            (l4_off + 4, u16::from_be_bytes([head[4], head[5]]), 0)
        }
        _ => return None,
    };
    Some(Quote {
        reverse: NatTuple4 {
            daddr: masq,
            saddr: [ip[16], ip[17], ip[18], ip[19]],
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

/// Rewrite an ICMP error to `masq` whose ICMP header starts at `icmp_off` if it quotes a
/// masqueraded flow. `Ok(Some(mapping))`: rewritten, deliver to `mapping.to_addr`;
/// `Ok(None)`: not about a pod's flow, leave it to the host.
#[inline(always)]
pub fn rev_nat_error(
    ctx: &TcContext,
    icmp_off: usize,
    masq: [u8; 4],
) -> Result<Option<NatEntry4>, RewriteFailed> {
    let Some(q) = quote(ctx, icmp_off, masq) else {
        return Ok(None);
    };
    let Some(mapping) = nat::lookup(&q.reverse) else {
        return Ok(None);
    };
    if mapping.flags & NAT_F_HOST != 0 {
        return Ok(None);
    }
    let icmp_csum = icmp_off + 2;
    let word = |v: u16| u64::from(u16::from_ne_bytes(v.to_be_bytes()));
    let addr = |a: [u8; 4]| u64::from(u32::from_ne_bytes(a));
    if q.port != mapping.to_port {
        ctx.l4_csum_replace(icmp_csum, word(q.port), word(mapping.to_port), 2)
            .map_err(|_| RewriteFailed)?;
        ctx.store(q.port_off, &mapping.to_port.to_be_bytes(), 0)
            .map_err(|_| RewriteFailed)?;
    }
    // Quoted source address: its header checksum first, then both changes in the ICMP sum.
    let quoted_csum_off = q.ip_off + 10;
    let before: [u8; 2] = ctx.load(quoted_csum_off).map_err(|_| RewriteFailed)?;
    ctx.l3_csum_replace(quoted_csum_off, addr(masq), addr(mapping.to_addr), 4)
        .map_err(|_| RewriteFailed)?;
    let after: [u8; 2] = ctx.load(quoted_csum_off).map_err(|_| RewriteFailed)?;
    ctx.l4_csum_replace(
        icmp_csum,
        word(u16::from_be_bytes(before)),
        word(u16::from_be_bytes(after)),
        2,
    )
    .map_err(|_| RewriteFailed)?;
    ctx.l4_csum_replace(icmp_csum, addr(masq), addr(mapping.to_addr), 4)
        .map_err(|_| RewriteFailed)?;
    ctx.store(q.ip_off + 12, &mapping.to_addr, 0)
        .map_err(|_| RewriteFailed)?;
    // Outer destination.
    ctx.l3_csum_replace(ETH_LEN + 10, addr(masq), addr(mapping.to_addr), 4)
        .map_err(|_| RewriteFailed)?;
    ctx.store(ETH_LEN + 16, &mapping.to_addr, 0)
        .map_err(|_| RewriteFailed)?;
    Ok(Some(mapping))
}

//! The IPv6 half of `to_netdev` and `from_netdev` (`netdev` dispatches by ethertype).
//!
//! Egress, with `NETDEV_F_MASQ_V6` set on the device: the node's own traffic (source = the
//! device's `masq_v6`) reserves its (peer, port) pair and passes; a packet whose source is not
//! a local endpoint passes untouched. Pod TCP, UDP and ICMPv6 echo reuse their flow's mapping
//! or go through the masquerade decision (`masq::skip_reason_v6`) and get a new one (`nat6`).
//! Other ICMPv6 (neighbour discovery, errors, MLD) always passes untouched. Up to four
//! hop-by-hop, routing and destination-options headers are stepped over to reach the L4
//! header (as Cilium's `ipv6_hdrlen`); fragments and anything else NAT cannot match on the way
//! back leave only when they keep the pod address, else they are dropped and counted.
//!
//! Ingress: a packet to `masq_v6` whose tuple has a reverse mapping gets its destination
//! restored to the pod (ICMPv6 errors quoting a masqueraded packet too, `icmp6`). Every
//! packet then goes on to the host stack, a local pod's included (why: `netdev`).

use agent_common::{
    EndpointInfo, EndpointKey, NatEntry6, NetdevInfo,
    endpoint::ENDPOINT_F_HOST,
    nat::{IPPROTO_ICMPV6, NAT_F_HOST, NAT_F_INBOUND, NAT_PORT_MIN, NETDEV_F_MASQ_V6},
    reason,
};
use aya_ebpf::programs::TcContext;

use crate::{
    from_container::Outcome,
    icmp6,
    maps::endpoint,
    masq::{masqueraded_v6, skip_reason_v6},
    nat::{End, L4, RewriteFailed},
    nat6::{self, ICMP6_ECHO_REPLY, ICMP6_ECHO_REQUEST, IPV6_HDR_LEN},
    netdev::{drop, local_endpoint, pass},
    packet::{ETH_LEN, Ipv6Hdr, ptr_at},
};

/// The IPv6 header fields NAT needs.
struct V6 {
    saddr: [u8; 16],
    daddr: [u8; 16],
    /// Next header after the extension headers stepped over (still an extension header when
    /// the walk gave up: NAT then treats the packet as one it cannot follow).
    nexthdr: u8,
    /// Frame offset of the header `nexthdr` names.
    l4_off: usize,
}

/// Frame offset of the header after the fixed IPv6 header.
const L4_OFF: usize = ETH_LEN + IPV6_HDR_LEN;
/// Extension headers stepped over at most (Cilium's `IPV6_MAX_HEADERS`).
const MAX_EXT_HEADERS: u32 = 4;
/// Hop-by-hop options header.
const NEXTHDR_HOP: u8 = 0;
/// Routing header.
const NEXTHDR_ROUTING: u8 = 43;
/// Destination options header.
const NEXTHDR_DEST: u8 = 60;

/// Step over hop-by-hop, routing and destination-options headers (each `(len + 1) * 8`
/// bytes) from next header `next`; returns the first other next header and its offset.
#[inline(always)]
fn skip_ext_headers(ctx: &TcContext, mut next: u8) -> (u8, usize) {
    let mut off = L4_OFF;
    let mut i = 0;
    while i < MAX_EXT_HEADERS && matches!(next, NEXTHDR_HOP | NEXTHDR_ROUTING | NEXTHDR_DEST) {
        let Ok(head) = ctx.load::<[u8; 2]>(off) else {
            break;
        };
        next = head[0];
        off += (usize::from(head[1]) + 1) * 8;
        i += 1;
    }
    (next, off)
}

/// The IPv6 header of the frame, if it is one; pulled into the linear part first if needed.
#[inline(always)]
fn ipv6(ctx: &TcContext) -> Option<V6> {
    let ip = match ptr_at::<Ipv6Hdr>(ctx, ETH_LEN) {
        Ok(ip) => ip,
        Err(_) => {
            ctx.pull_data(L4_OFF as u32).ok()?;
            ptr_at::<Ipv6Hdr>(ctx, ETH_LEN).ok()?
        }
    };
    // SAFETY: bounds checked by `ptr_at`.
    let (ver, nexthdr, saddr, daddr) = unsafe {
        (
            (*ip).ver_tc_flow[0] >> 4,
            (*ip).next_hdr,
            (*ip).src,
            (*ip).dst,
        )
    };
    if ver != 6 {
        return None;
    }
    let (nexthdr, l4_off) = skip_ext_headers(ctx, nexthdr);
    Some(V6 {
        saddr,
        daddr,
        nexthdr,
        l4_off,
    })
}

/// `to_netdev` for an IPv6 frame on native device `dev`.
#[inline(always)]
pub fn egress(ctx: &TcContext, dev: &NetdevInfo) -> Result<Outcome, Outcome> {
    if dev.flags & NETDEV_F_MASQ_V6 == 0 {
        return Ok(pass(reason::NETDEV_PASS));
    }
    let Some(ip) = ipv6(ctx) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if ip.saddr == dev.masq_v6 {
        host_egress(ctx, &ip);
        return Ok(pass(reason::NETDEV_PASS));
    }
    let Some(ep) = endpoint(&EndpointKey::v6(ip.saddr)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if ep.flags & ENDPOINT_F_HOST != 0 {
        return Ok(pass(reason::NETDEV_PASS));
    }
    pod_egress(ctx, dev, &ep, &ip)
}

/// A node socket's packet: reserve its (peer, port) pair against pod mappings.
#[inline(always)]
fn host_egress(ctx: &TcContext, ip: &V6) {
    let Some(l4) = nat6::parse_l4(ctx, ip.l4_off, ip.nexthdr) else {
        return;
    };
    let ours = if l4.proto == IPPROTO_ICMPV6 {
        l4.icmp_type == ICMP6_ECHO_REQUEST
    } else {
        l4.sport >= NAT_PORT_MIN
    };
    if ours {
        nat6::reserve_host(&nat6::egress_tuple(&l4, ip.saddr, ip.daddr));
    }
}

#[inline(always)]
fn pod_egress(
    ctx: &TcContext,
    dev: &NetdevInfo,
    ep: &EndpointInfo,
    ip: &V6,
) -> Result<Outcome, Outcome> {
    if let Some(l4) = nat6::parse_l4(ctx, ip.l4_off, ip.nexthdr) {
        if l4.proto == IPPROTO_ICMPV6 && !nat6::is_echo(&l4) {
            // Neighbour discovery, errors, MLD: never masqueraded.
            return Ok(pass(reason::NETDEV_PASS));
        }
        return pod_egress_l4(ctx, dev, ep, ip, &l4);
    }
    match skip_reason_v6(ep, ip.daddr) {
        Some(why) => Ok(pass(why)),
        None => Err(drop(reason::DROP_NAT_UNSUPPORTED)),
    }
}

#[inline(always)]
fn pod_egress_l4(
    ctx: &TcContext,
    dev: &NetdevInfo,
    ep: &EndpointInfo,
    ip: &V6,
    l4: &L4,
) -> Result<Outcome, Outcome> {
    if l4.proto == IPPROTO_ICMPV6 && l4.icmp_type == ICMP6_ECHO_REPLY {
        return Ok(pass(reason::SNAT_SKIP_REPLY));
    }
    let tuple = nat6::egress_tuple(l4, ip.saddr, ip.daddr);
    if let Some(mapping) = nat6::lookup(&tuple) {
        if mapping.flags & NAT_F_INBOUND != 0 {
            return Ok(pass(reason::SNAT_SKIP_REPLY));
        }
        return apply(ctx, l4, End::Source, ip.saddr, &mapping, reason::SNAT);
    }
    if let Some(why) = skip_reason_v6(ep, ip.daddr) {
        return Ok(pass(why));
    }
    let Some(mapping) = nat6::new_mapping(&tuple, dev.masq_v6) else {
        return Err(drop(reason::DROP_NAT_NO_PORT));
    };
    apply(ctx, l4, End::Source, ip.saddr, &mapping, reason::SNAT)
}

/// Rewrite with `mapping` and pass the packet on, counted as `why`.
#[inline(always)]
fn apply(
    ctx: &TcContext,
    l4: &L4,
    end: End,
    from_addr: [u8; 16],
    mapping: &NatEntry6,
    why: u32,
) -> Result<Outcome, Outcome> {
    nat6::rewrite(ctx, l4, end, from_addr, mapping)
        .map_err(|RewriteFailed| Outcome::REDIRECT_FAILED)?;
    Ok(pass(why))
}

/// `from_netdev` for an IPv6 frame on native device `dev`.
#[inline(always)]
pub fn ingress(ctx: &TcContext, dev: &NetdevInfo) -> Result<Outcome, Outcome> {
    let Some(ip) = ipv6(ctx) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    let masq = dev.flags & NETDEV_F_MASQ_V6 != 0;
    if masq && ip.daddr == dev.masq_v6 {
        return reverse_nat(ctx, &ip);
    }
    let Some(ep) = local_endpoint(&EndpointKey::v6(ip.daddr)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if masq && masqueraded_v6(&ep, ip.saddr) {
        if let Some(l4) = nat6::parse_l4(ctx, ip.l4_off, ip.nexthdr) {
            if l4.proto != IPPROTO_ICMPV6 {
                // The outside opened this flow to the pod: its replies keep the pod address.
                nat6::record_inbound(&nat6::egress_tuple(&l4.swapped(), ip.daddr, ip.saddr));
            }
        }
    }
    Ok(pass(reason::NETDEV_TO_POD))
}

/// A packet to the masquerade address: restore the pod destination if it is a reply.
#[inline(always)]
fn reverse_nat(ctx: &TcContext, ip: &V6) -> Result<Outcome, Outcome> {
    let Some(l4) = nat6::parse_l4(ctx, ip.l4_off, ip.nexthdr) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if l4.proto == IPPROTO_ICMPV6 && icmp6::is_error(l4.icmp_type) {
        return match icmp6::rev_nat_error(ctx, ip.l4_off, ip.daddr) {
            Ok(Some(_)) => Ok(pass(reason::REV_SNAT)),
            Ok(None) => Ok(pass(reason::NETDEV_PASS)),
            Err(RewriteFailed) => Err(Outcome::REDIRECT_FAILED),
        };
    }
    let candidate = if l4.proto == IPPROTO_ICMPV6 {
        l4.icmp_type == ICMP6_ECHO_REPLY
    } else {
        l4.dport >= NAT_PORT_MIN
    };
    if !candidate {
        return Ok(pass(reason::NETDEV_PASS));
    }
    let Some(mapping) = nat6::lookup(&nat6::ingress_tuple(&l4, ip.saddr, ip.daddr)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if mapping.flags & NAT_F_HOST != 0 {
        return Ok(pass(reason::NETDEV_PASS));
    }
    nat6::rewrite(ctx, &l4, End::Destination, ip.daddr, &mapping)
        .map_err(|RewriteFailed| Outcome::REDIRECT_FAILED)?;
    Ok(pass(reason::REV_SNAT))
}

//! `to_netdev` and `from_netdev`: tc egress and ingress of a native device (one listed in the
//! native-devices map; any other device passes everything untouched).
//!
//! This file holds the entry points and the IPv4 half; `netdev6` holds the IPv6 half.
//!
//! `to_netdev`, per IPv4 packet: the node's own traffic (source = the device's masquerade
//! address) reserves its (peer, port) pair and passes; a packet whose source is not a local
//! endpoint passes untouched (forwarded traffic, ARP, anything else). Pod traffic reuses its
//! flow's mapping if it has one; otherwise the masquerade decision (`masq`) either keeps the
//! pod address or a new mapping is made (`nat`) and the source rewritten.
//!
//! `from_netdev`: a packet to the masquerade address whose tuple has a reverse mapping gets its
//! destination restored to the pod (an ICMP error quoting a masqueraded packet gets the quote
//! restored too, `icmp`). Every packet then goes on to the host stack, a local pod's included:
//! the pod's replies leave through the stack (`from_container` hands it everything not for a
//! local pod), so the stack must see this direction too. Otherwise conntrack sees half a flow
//! (a TCP reply without its request is `INVALID`, which kube-proxy's `KUBE-FORWARD` drops),
//! and a reply of a flow kube-proxy translated on this node would skip the reverse NAT.

use agent_common::{
    EndpointInfo, EndpointKey, NetdevInfo,
    endpoint::ENDPOINT_F_HOST,
    nat::{IPPROTO_ICMP, NAT_F_HOST, NAT_F_INBOUND, NAT_PORT_MIN, NETDEV_F_MASQ_V4},
    reason,
};
use aya_ebpf::{
    bindings::{TC_ACT_OK, TC_ACT_SHOT},
    programs::TcContext,
};

use crate::{
    from_container::{Outcome, ingress_ifindex},
    icmp,
    maps::{count, endpoint, netdev},
    masq::{masqueraded_v4, skip_reason_v4},
    nat::{self, End, ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST, L4},
    netdev6,
    packet::{ETH_LEN, ETH_P_IP, ETH_P_IPV6, EthHdr, Ipv4Hdr, ptr_at},
};

/// Hand the packet on (`TC_ACT_OK`), counted as `why`.
pub const fn pass(why: u32) -> Outcome {
    Outcome {
        why,
        verdict: TC_ACT_OK,
    }
}

/// Drop the packet, counted as `why`.
pub const fn drop(why: u32) -> Outcome {
    Outcome {
        why,
        verdict: TC_ACT_SHOT,
    }
}

/// Body of `to_netdev`: classify, count, return the verdict.
#[inline(always)]
pub fn run_egress(ctx: &TcContext) -> i32 {
    let out = match egress(ctx) {
        Ok(out) | Err(out) => out,
    };
    count(ctx, out.why, out.verdict)
}

/// Body of `from_netdev`: classify, count, return the verdict.
#[inline(always)]
pub fn run_ingress(ctx: &TcContext) -> i32 {
    let out = match ingress(ctx) {
        Ok(out) | Err(out) => out,
    };
    count(ctx, out.why, out.verdict)
}

/// The IPv4 header fields NAT needs.
struct V4 {
    saddr: [u8; 4],
    daddr: [u8; 4],
    proto: u8,
    /// Frame offset of the L4 header.
    l4_off: usize,
    /// A fragment (more-fragments set or non-zero offset): no L4 header to trust.
    fragment: bool,
}

/// Ethertype of the frame, or `None` if it is shorter than an Ethernet header.
#[inline(always)]
fn ethertype(ctx: &TcContext) -> Option<u16> {
    let eth = ptr_at::<EthHdr>(ctx, 0).ok()?;
    // SAFETY: bounds checked by `ptr_at`.
    Some(u16::from_be_bytes(unsafe { (*eth).proto }))
}

/// The IPv4 header of the frame, if it is a well-formed one. A header outside the linear
/// part of the skb (possible on a native device's ingress) is pulled in first.
#[inline(always)]
fn ipv4(ctx: &TcContext) -> Option<V4> {
    let ip = match ptr_at::<Ipv4Hdr>(ctx, ETH_LEN) {
        Ok(ip) => ip,
        Err(_) => {
            ctx.pull_data((ETH_LEN + size_of::<Ipv4Hdr>()) as u32)
                .ok()?;
            ptr_at::<Ipv4Hdr>(ctx, ETH_LEN).ok()?
        }
    };
    // SAFETY: bounds checked by `ptr_at`.
    let (ver_ihl, frag, proto, saddr, daddr) =
        unsafe { ((*ip).ver_ihl, (*ip).frag, (*ip).proto, (*ip).src, (*ip).dst) };
    if ver_ihl >> 4 != 4 || ver_ihl & 0x0f < 5 {
        return None;
    }
    Some(V4 {
        saddr,
        daddr,
        proto,
        l4_off: ETH_LEN + usize::from(ver_ihl & 0x0f) * 4,
        fragment: u16::from_be_bytes(frag) & 0x3fff != 0,
    })
}

#[inline(always)]
fn egress(ctx: &TcContext) -> Result<Outcome, Outcome> {
    let Some(dev) = netdev(ingress_ifindex(ctx)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    match ethertype(ctx) {
        Some(ETH_P_IP) if dev.flags & NETDEV_F_MASQ_V4 != 0 => egress_v4(ctx, &dev),
        Some(ETH_P_IPV6) => netdev6::egress(ctx, &dev),
        _ => Ok(pass(reason::NETDEV_PASS)),
    }
}

#[inline(always)]
fn egress_v4(ctx: &TcContext, dev: &NetdevInfo) -> Result<Outcome, Outcome> {
    let Some(ip) = ipv4(ctx) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if ip.saddr == dev.masq_v4 {
        host_egress(ctx, &ip);
        return Ok(pass(reason::NETDEV_PASS));
    }
    let Some(ep) = endpoint(&EndpointKey::v4(ip.saddr)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if ep.flags & ENDPOINT_F_HOST != 0 {
        return Ok(pass(reason::NETDEV_PASS));
    }
    pod_egress(ctx, dev, &ep, &ip)
}

/// A node socket's packet: reserve its (peer, port) pair against pod mappings.
#[inline(always)]
fn host_egress(ctx: &TcContext, ip: &V4) {
    if ip.fragment {
        return;
    }
    let Some(l4) = nat::parse_l4(ctx, ip.l4_off, ip.proto) else {
        return;
    };
    let ours = if l4.proto == IPPROTO_ICMP {
        l4.icmp_type == ICMP_ECHO_REQUEST
    } else {
        l4.sport >= NAT_PORT_MIN
    };
    if ours {
        nat::reserve_host(&l4.egress_tuple(ip.saddr, ip.daddr));
    }
}

#[inline(always)]
fn pod_egress(
    ctx: &TcContext,
    dev: &NetdevInfo,
    ep: &EndpointInfo,
    ip: &V4,
) -> Result<Outcome, Outcome> {
    if !ip.fragment {
        if let Some(l4) = nat::parse_l4(ctx, ip.l4_off, ip.proto) {
            if l4.is_echo_or_port() {
                return pod_egress_l4(ctx, dev, ep, ip, &l4);
            }
        }
    }
    // Fragments and protocols without ports cannot be told apart on the way back: they leave
    // only if they keep the pod address.
    match skip_reason_v4(ep, ip.daddr) {
        Some(why) => Ok(pass(why)),
        None => Err(drop(reason::DROP_NAT_UNSUPPORTED)),
    }
}

#[inline(always)]
fn pod_egress_l4(
    ctx: &TcContext,
    dev: &NetdevInfo,
    ep: &EndpointInfo,
    ip: &V4,
    l4: &L4,
) -> Result<Outcome, Outcome> {
    if l4.proto == IPPROTO_ICMP && l4.icmp_type == ICMP_ECHO_REPLY {
        return Ok(pass(reason::SNAT_SKIP_REPLY));
    }
    let tuple = l4.egress_tuple(ip.saddr, ip.daddr);
    if let Some(mapping) = nat::lookup(&tuple) {
        if mapping.flags & NAT_F_INBOUND != 0 {
            return Ok(pass(reason::SNAT_SKIP_REPLY));
        }
        return apply(ctx, l4, End::Source, ip.saddr, &mapping, reason::SNAT);
    }
    if let Some(why) = skip_reason_v4(ep, ip.daddr) {
        return Ok(pass(why));
    }
    let Some(mapping) = nat::new_mapping(&tuple, dev.masq_v4) else {
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
    from_addr: [u8; 4],
    mapping: &agent_common::NatEntry4,
    why: u32,
) -> Result<Outcome, Outcome> {
    nat::rewrite(ctx, l4, end, from_addr, mapping)
        .map_err(|nat::RewriteFailed| Outcome::REDIRECT_FAILED)?;
    Ok(pass(why))
}

#[inline(always)]
fn ingress(ctx: &TcContext) -> Result<Outcome, Outcome> {
    let Some(dev) = netdev(ingress_ifindex(ctx)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    match ethertype(ctx) {
        Some(ETH_P_IP) => ingress_v4(ctx, &dev),
        Some(ETH_P_IPV6) => netdev6::ingress(ctx, &dev),
        _ => Ok(pass(reason::NETDEV_PASS)),
    }
}

#[inline(always)]
fn ingress_v4(ctx: &TcContext, dev: &NetdevInfo) -> Result<Outcome, Outcome> {
    let Some(ip) = ipv4(ctx) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if dev.flags & NETDEV_F_MASQ_V4 != 0 && ip.daddr == dev.masq_v4 {
        return reverse_nat(ctx, &ip);
    }
    let Some(ep) = local_endpoint(&EndpointKey::v4(ip.daddr)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if !ip.fragment && masqueraded_v4(&ep, ip.saddr) {
        if let Some(l4) = nat::parse_l4(ctx, ip.l4_off, ip.proto) {
            if l4.proto != IPPROTO_ICMP {
                // The outside opened this flow to the pod: its replies must keep the pod
                // address instead of being masqueraded.
                nat::record_inbound(&l4.swapped().egress_tuple(ip.daddr, ip.saddr));
            }
        }
    }
    Ok(pass(reason::NETDEV_TO_POD))
}

/// A packet to the masquerade address: restore the pod destination if it is a reply.
#[inline(always)]
fn reverse_nat(ctx: &TcContext, ip: &V4) -> Result<Outcome, Outcome> {
    if ip.fragment {
        return Ok(pass(reason::NETDEV_PASS));
    }
    let Some(l4) = nat::parse_l4(ctx, ip.l4_off, ip.proto) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if l4.proto == IPPROTO_ICMP && icmp::is_error(l4.icmp_type) {
        return match icmp::rev_nat_error(ctx, ip.l4_off, ip.daddr) {
            Ok(Some(_)) => Ok(pass(reason::REV_SNAT)),
            Ok(None) => Ok(pass(reason::NETDEV_PASS)),
            Err(nat::RewriteFailed) => Err(Outcome::REDIRECT_FAILED),
        };
    }
    let candidate = if l4.proto == IPPROTO_ICMP {
        l4.icmp_type == ICMP_ECHO_REPLY
    } else {
        l4.dport >= NAT_PORT_MIN
    };
    if !candidate {
        return Ok(pass(reason::NETDEV_PASS));
    }
    let Some(mapping) = nat::lookup(&l4.ingress_tuple(ip.saddr, ip.daddr)) else {
        return Ok(pass(reason::NETDEV_PASS));
    };
    if mapping.flags & NAT_F_HOST != 0 {
        return Ok(pass(reason::NETDEV_PASS));
    }
    nat::rewrite(ctx, &l4, End::Destination, ip.daddr, &mapping)
        .map_err(|nat::RewriteFailed| Outcome::REDIRECT_FAILED)?;
    Ok(pass(reason::REV_SNAT))
}

/// The endpoint `key` if it is a pod on this node (not a host entry).
#[inline(always)]
pub fn local_endpoint(key: &EndpointKey) -> Option<EndpointInfo> {
    endpoint(key).filter(|ep| ep.flags & ENDPOINT_F_HOST == 0 && ep.ifindex != 0)
}

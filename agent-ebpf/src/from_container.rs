//! `from_container`: tc ingress of a host-side veth, i.e. every packet a pod sends.
//!
//! Decision order: ARP requests and IPv6 neighbour solicitations for the gateway are answered
//! here (`neigh`); an IP packet whose source is not an endpoint behind this interface is
//! dropped; an IP packet to a local endpoint gets its TTL decremented and its L2 addresses
//! rewritten as a router would, then goes straight into the destination pod with
//! `bpf_redirect_peer`, unless its flow must be seen by conntrack (`stack`: either socket has
//! a flow through the stack, such as a Service flow kube-proxy translated, whose replies need
//! the reverse NAT); in tunnel routing, one to a pod of another node is encapsulated
//! (`tunnel`); everything else goes to the host stack, its socket recorded in `stack`.

use agent_common::{
    EndpointInfo, EndpointKey, IpcacheKey, StackKey, endpoint::ENDPOINT_F_HOST, reason,
};
use aya_ebpf::{
    bindings::{TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT},
    helpers::bpf_redirect_peer,
    programs::TcContext,
};

use crate::{
    maps::{count, endpoint},
    neigh,
    packet::{
        ETH_LEN, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6, EthHdr, IPPROTO_ICMPV6, Ipv4Hdr, Ipv6Hdr,
        Truncated, ipv4_decrement_ttl, ptr_at,
    },
    stack::{self, Flow},
    tunnel,
};

/// What happened to a packet: the counter reason and the tc verdict.
pub struct Outcome {
    pub why: u32,
    pub verdict: i32,
}

impl Outcome {
    pub const PASS: Self = Self {
        why: reason::PASS_STACK,
        verdict: TC_ACT_OK,
    };
    pub const MALFORMED: Self = Self {
        why: reason::DROP_MALFORMED,
        verdict: TC_ACT_SHOT,
    };
    pub const INVALID_SOURCE: Self = Self {
        why: reason::DROP_INVALID_SOURCE,
        verdict: TC_ACT_SHOT,
    };
    pub const REDIRECT_FAILED: Self = Self {
        why: reason::DROP_REDIRECT_FAILED,
        verdict: TC_ACT_SHOT,
    };
    pub const STACK_FLOW: Self = Self {
        why: reason::PASS_STACK_FLOW,
        verdict: TC_ACT_OK,
    };
}

impl From<Truncated> for Outcome {
    fn from(_: Truncated) -> Self {
        Self::MALFORMED
    }
}

/// Entry point body: classify, count, return the verdict.
#[inline(always)]
pub fn run(ctx: &TcContext) -> i32 {
    let out = match classify(ctx) {
        Ok(out) | Err(out) => out,
    };
    count(ctx, out.why, out.verdict)
}

#[inline(always)]
fn classify(ctx: &TcContext) -> Result<Outcome, Outcome> {
    let eth = ptr_at::<EthHdr>(ctx, 0)?;
    // SAFETY: `ptr_at` checked that the header lies inside the packet.
    let proto = u16::from_be_bytes(unsafe { (*eth).proto });
    match proto {
        ETH_P_IP => ipv4(ctx),
        ETH_P_IPV6 => ipv6(ctx),
        ETH_P_ARP => neigh::arp(ctx),
        _ => Ok(Outcome::PASS),
    }
}

/// ifindex of the interface the packet arrived on (the host-side veth).
#[inline(always)]
pub fn ingress_ifindex(ctx: &TcContext) -> u32 {
    // SAFETY: `skb` points at the program's `__sk_buff` for its whole run.
    unsafe { (*ctx.skb.skb).ifindex }
}

/// The endpoint `key` if it is reached through `ifindex` (anti-spoofing check on the source).
#[inline(always)]
fn source(key: &EndpointKey, ifindex: u32) -> Option<EndpointInfo> {
    endpoint(key).filter(|ep| ep.ifindex == ifindex)
}

#[inline(always)]
fn ipv4(ctx: &TcContext) -> Result<Outcome, Outcome> {
    let ip = ptr_at::<Ipv4Hdr>(ctx, ETH_LEN)?;
    // SAFETY: bounds checked by `ptr_at`; the pointer stays valid until a helper changes the skb.
    let (ver_ihl, frag, proto, src, dst) =
        unsafe { ((*ip).ver_ihl, (*ip).frag, (*ip).proto, (*ip).src, (*ip).dst) };
    if ver_ihl >> 4 != 4 || ver_ihl & 0x0f < 5 {
        return Err(Outcome::MALFORMED);
    }
    if src == [0; 4] {
        // DHCP and friends: the host decides.
        return Ok(Outcome::PASS);
    }
    let Some(source) = source(&EndpointKey::v4(src), ingress_ifindex(ctx)) else {
        return Err(Outcome::INVALID_SOURCE);
    };
    let l4_off = ETH_LEN + usize::from(ver_ihl & 0x0f) * 4;
    let fragment = u16::from_be_bytes(frag) & 0x3fff != 0;
    let flow = stack::flow(ctx, l4_off, proto, fragment);
    let Some(ep) = local_destination(&EndpointKey::v4(dst)) else {
        if let Some(out) = tunnel::to_remote(ctx, IpcacheKey::v4(dst), 32, source.sec_identity) {
            return Ok(out);
        }
        if let Flow::Ports(sport, dport) = flow {
            stack::remember(
                &StackKey::v4(src, sport, proto),
                stack::v4_in_16(dst),
                dport,
            );
        }
        return Ok(Outcome::PASS);
    };
    if stack::between_local_pods(flow, |source, port| {
        StackKey::v4(if source { src } else { dst }, port, proto)
    }) {
        return Ok(Outcome::STACK_FLOW);
    }
    // Helpers ran since the header was read: check its bounds again.
    let ip = ptr_at::<Ipv4Hdr>(ctx, ETH_LEN)?;
    // SAFETY: bounds checked by `ptr_at` just now.
    if unsafe { (*ip).ttl } <= 1 {
        // The host stack sends the ICMP time-exceeded.
        return Ok(Outcome::PASS);
    }
    // SAFETY: same bounds-checked header; no helper ran in between.
    unsafe { ipv4_decrement_ttl(&mut *ip) };
    deliver(ctx, &ep)
}

#[inline(always)]
fn ipv6(ctx: &TcContext) -> Result<Outcome, Outcome> {
    let ip = ptr_at::<Ipv6Hdr>(ctx, ETH_LEN)?;
    // SAFETY: bounds checked by `ptr_at`.
    let (ver, next, hop, src, dst) = unsafe {
        (
            (*ip).ver_tc_flow[0] >> 4,
            (*ip).next_hdr,
            (*ip).hop_limit,
            (*ip).src,
            (*ip).dst,
        )
    };
    if ver != 6 {
        return Err(Outcome::MALFORMED);
    }
    if next == IPPROTO_ICMPV6 {
        if let Some(out) = neigh::ndp(ctx)? {
            return Ok(out);
        }
    }
    // Unspecified (::) and link-local (fe80::/10) sources never leave the link: host decides.
    if src == [0; 16] || (src[0] == 0xfe && src[1] & 0xc0 == 0x80) {
        return Ok(Outcome::PASS);
    }
    let Some(source) = source(&EndpointKey::v6(src), ingress_ifindex(ctx)) else {
        return Err(Outcome::INVALID_SOURCE);
    };
    // Extension headers are not stepped over: a packet with one (rare between pods) hides its
    // ports, so it takes the stack like a fragment.
    let flow = stack::flow(
        ctx,
        ETH_LEN + IPV6_LEN,
        next,
        IPV6_EXT_HEADERS.contains(&next),
    );
    let Some(ep) = local_destination(&EndpointKey::v6(dst)) else {
        if let Some(out) = tunnel::to_remote(ctx, IpcacheKey::v6(dst), 128, source.sec_identity) {
            return Ok(out);
        }
        if let Flow::Ports(sport, dport) = flow {
            stack::remember(&StackKey::v6(src, sport, next), dst, dport);
        }
        return Ok(Outcome::PASS);
    };
    if stack::between_local_pods(flow, |source, port| {
        StackKey::v6(if source { src } else { dst }, port, next)
    }) {
        return Ok(Outcome::STACK_FLOW);
    }
    if hop <= 1 {
        return Ok(Outcome::PASS);
    }
    // Helpers ran since the header was read: check its bounds again.
    let ip = ptr_at::<Ipv6Hdr>(ctx, ETH_LEN)?;
    // SAFETY: bounds checked by `ptr_at` just now.
    unsafe { (*ip).hop_limit = hop - 1 };
    deliver(ctx, &ep)
}

/// Length of the IPv6 fixed header.
const IPV6_LEN: usize = 40;
/// IPv6 next-header values of the extension headers before an upper-layer header: hop-by-hop
/// options, routing, fragment, destination options.
const IPV6_EXT_HEADERS: [u8; 4] = [0, 43, 44, 60];

/// The endpoint `key` if it is a pod on this node (not a host entry).
#[inline(always)]
pub fn local_destination(key: &EndpointKey) -> Option<EndpointInfo> {
    endpoint(key).filter(|ep| ep.flags & ENDPOINT_F_HOST == 0 && ep.ifindex != 0)
}

/// Rewrite L2 as the router facing `ep` would send it, then switch into the pod's netns.
#[inline(always)]
pub fn deliver(ctx: &TcContext, ep: &EndpointInfo) -> Result<Outcome, Outcome> {
    let eth = ptr_at::<EthHdr>(ctx, 0)?;
    // SAFETY: bounds checked by `ptr_at`.
    unsafe {
        (*eth).dst = ep.pod_mac;
        (*eth).src = ep.node_mac;
    }
    // SAFETY: plain helper call; the kernel validates the ifindex when the redirect happens.
    let ret = unsafe { bpf_redirect_peer(ep.ifindex, 0) };
    if ret == i64::from(TC_ACT_REDIRECT) {
        Ok(Outcome {
            why: reason::REDIRECT_LOCAL,
            verdict: TC_ACT_REDIRECT,
        })
    } else {
        Err(Outcome::REDIRECT_FAILED)
    }
}

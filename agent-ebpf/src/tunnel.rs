//! Tunnel routing: encapsulation towards another node (called by `from_container`) and
//! `from_overlay`, the tc ingress of the tunnel device, which delivers what other nodes
//! encapsulated to this node.
//!
//! Encapsulation: a destination whose IPCache entry has a tunnel endpoint (and no skip-tunnel
//! flag) gets a tunnel key (remote = the endpoint, VNI = the source's security identity, TTL
//! 64, no source address: the kernel picks it by route) and is redirected to the tunnel device
//! of the tunnel map; the device's driver adds the outer headers. Nothing is encapsulated
//! while the tunnel map names no device (native routing).
//!
//! Delivery: a decapsulated packet without a tunnel key, or carrying the host identity, is
//! dropped. One to a local pod goes straight into the pod (`bpf_redirect_peer`, as
//! `from_container` delivers), unless the pod's socket has a flow through the host stack (a
//! Service kube-proxy translated: the reply must meet conntrack for its reverse NAT) or its
//! ports cannot be read; those, and every other packet, go to the host stack. The driver marks
//! the frames it decapsulates as for another host (their MAC is the sender's idea), so the
//! packet type is set to `PACKET_HOST` first, or the IP layer would drop them.

use agent_common::{
    EndpointKey, IpcacheInfo, IpcacheKey, StackKey, identity,
    ipcache::{
        IPCACHE_F_HAS_TUNNEL_EP, IPCACHE_F_IPV6_TUNNEL_EP, IPCACHE_F_SKIP_TUNNEL,
        IPCACHE_STATIC_PREFIX,
    },
    reason,
};
use aya_ebpf::{
    bindings::{
        BPF_F_TUNINFO_IPV6, BPF_F_ZERO_CSUM_TX, TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT,
        bpf_tunnel_key,
    },
    btf_maps::lpm_trie::Key,
    helpers::{bpf_redirect, bpf_skb_change_type, bpf_skb_get_tunnel_key, bpf_skb_set_tunnel_key},
    programs::TcContext,
};

use crate::{
    from_container::{Outcome, deliver, local_destination},
    maps::{IPCACHE, TUNNEL, count},
    packet::{ETH_LEN, ETH_P_IP, ETH_P_IPV6, EthHdr, Ipv4Hdr, Ipv6Hdr, ptr_at},
    stack::{self, Flow},
};

/// Bytes of `struct bpf_tunnel_key` up to `local_ipv4`: the source address is left to the
/// kernel (Cilium's `TUNNEL_KEY_WITHOUT_SRC_IP`).
const KEY_WITHOUT_SRC_IP: u32 = 28;
/// TTL of the outer header (`IPDEFTTL`).
const OUTER_TTL: u8 = 64;
/// `PACKET_HOST` (`linux/if_packet.h`).
const PACKET_HOST: u32 = 0;
/// Length of the IPv6 fixed header.
const IPV6_LEN: usize = 40;
/// IPv6 extension headers that hide the ports (as in `from_container`).
const IPV6_EXT_HEADERS: [u8; 4] = [0, 43, 44, 60];

/// The IPCache entry of a host address (the longest prefix that holds it).
#[inline(always)]
fn lookup(key: IpcacheKey, bits: u32) -> Option<IpcacheInfo> {
    let key = Key::new(IPCACHE_STATIC_PREFIX + bits, key);
    IPCACHE.get(&key).copied()
}

/// If tunnel routing is on and `dst` lives behind another node, encapsulate towards it with
/// `src_identity` as VNI and redirect to the tunnel device; `None` otherwise.
#[inline(always)]
pub fn to_remote(
    ctx: &TcContext,
    dst: IpcacheKey,
    bits: u32,
    src_identity: u32,
) -> Option<Outcome> {
    let tunnel = TUNNEL.get(0)?;
    if tunnel.ifindex == 0 {
        return None;
    }
    let ifindex = tunnel.ifindex;
    let info = lookup(dst, bits)?;
    if info.flags & IPCACHE_F_HAS_TUNNEL_EP == 0 || info.flags & IPCACHE_F_SKIP_TUNNEL != 0 {
        return None;
    }
    // SAFETY: an all-zero `bpf_tunnel_key` is valid (integers and unions of integers).
    let mut key: bpf_tunnel_key = unsafe { core::mem::zeroed() };
    key.tunnel_id = src_identity;
    key.tunnel_ttl = OUTER_TTL;
    let ep = info.tunnel_endpoint;
    let flags = if info.flags & IPCACHE_F_IPV6_TUNNEL_EP == 0 {
        key.__bindgen_anon_1.remote_ipv4 = u32::from_be_bytes([ep[0], ep[1], ep[2], ep[3]]);
        u64::from(BPF_F_ZERO_CSUM_TX)
    } else {
        let word = |i: usize| u32::from_ne_bytes([ep[i], ep[i + 1], ep[i + 2], ep[i + 3]]);
        key.__bindgen_anon_1.remote_ipv6 = [word(0), word(4), word(8), word(12)];
        u64::from(BPF_F_TUNINFO_IPV6)
    };
    // SAFETY: `key` lives on this stack frame for the call; the size is one the kernel accepts.
    let set =
        unsafe { bpf_skb_set_tunnel_key(ctx.skb.skb, &raw mut key, KEY_WITHOUT_SRC_IP, flags) };
    if set != 0 {
        return Some(Outcome::REDIRECT_FAILED);
    }
    // SAFETY: plain helper call; the kernel checks the ifindex when it redirects.
    let ret = unsafe { bpf_redirect(ifindex, 0) };
    Some(if ret == i64::from(TC_ACT_REDIRECT) {
        Outcome {
            why: reason::ENCAP,
            verdict: TC_ACT_REDIRECT,
        }
    } else {
        Outcome::REDIRECT_FAILED
    })
}

/// Entry point body of `from_overlay`: classify, count, return the verdict.
#[inline(always)]
pub fn run_from_overlay(ctx: &TcContext) -> i32 {
    let out = match from_overlay(ctx) {
        Ok(out) | Err(out) => out,
    };
    count(ctx, out.why, out.verdict)
}

const PASS: Outcome = Outcome {
    why: reason::OVERLAY_PASS,
    verdict: TC_ACT_OK,
};
const NO_KEY: Outcome = Outcome {
    why: reason::DROP_NO_TUNNEL_KEY,
    verdict: TC_ACT_SHOT,
};

/// The source identity the sender put in the VNI, if the packet carries a tunnel key.
#[inline(always)]
fn source_identity(ctx: &TcContext) -> Option<u32> {
    // SAFETY: as in `to_remote`.
    let mut key: bpf_tunnel_key = unsafe { core::mem::zeroed() };
    // SAFETY: `key` outlives the calls; the size is one the kernel accepts.
    let got = unsafe { bpf_skb_get_tunnel_key(ctx.skb.skb, &raw mut key, KEY_WITHOUT_SRC_IP, 0) };
    if got == 0 {
        return Some(key.tunnel_id);
    }
    // SAFETY: as above.
    let got = unsafe {
        bpf_skb_get_tunnel_key(
            ctx.skb.skb,
            &raw mut key,
            KEY_WITHOUT_SRC_IP,
            u64::from(BPF_F_TUNINFO_IPV6),
        )
    };
    (got == 0).then_some(key.tunnel_id)
}

#[inline(always)]
fn from_overlay(ctx: &TcContext) -> Result<Outcome, Outcome> {
    match source_identity(ctx) {
        Some(identity::HOST) | None => return Err(NO_KEY),
        Some(_) => {}
    }
    // SAFETY: plain helper call on this program's skb.
    if unsafe { bpf_skb_change_type(ctx.skb.skb, PACKET_HOST) } != 0 {
        return Err(Outcome::REDIRECT_FAILED);
    }
    let eth = ptr_at::<EthHdr>(ctx, 0)?;
    // SAFETY: bounds checked by `ptr_at`.
    let proto = u16::from_be_bytes(unsafe { (*eth).proto });
    let (dst, flow) = match proto {
        ETH_P_IP => {
            let ip = ptr_at::<Ipv4Hdr>(ctx, ETH_LEN)?;
            // SAFETY: bounds checked by `ptr_at`.
            let (ver_ihl, frag, proto, dst) =
                unsafe { ((*ip).ver_ihl, (*ip).frag, (*ip).proto, (*ip).dst) };
            if ver_ihl >> 4 != 4 || ver_ihl & 0x0f < 5 {
                return Err(Outcome::MALFORMED);
            }
            let l4_off = ETH_LEN + usize::from(ver_ihl & 0x0f) * 4;
            let fragment = u16::from_be_bytes(frag) & 0x3fff != 0;
            let flow = stack::flow(ctx, l4_off, proto, fragment);
            let key = EndpointKey::v4(dst);
            (key, socket(flow, |port| StackKey::v4(dst, port, proto)))
        }
        ETH_P_IPV6 => {
            let ip = ptr_at::<Ipv6Hdr>(ctx, ETH_LEN)?;
            // SAFETY: bounds checked by `ptr_at`.
            let (next, dst) = unsafe { ((*ip).next_hdr, (*ip).dst) };
            let hidden = IPV6_EXT_HEADERS.contains(&next);
            let flow = stack::flow(ctx, ETH_LEN + IPV6_LEN, next, hidden);
            (
                EndpointKey::v6(dst),
                socket(flow, |port| StackKey::v6(dst, port, next)),
            )
        }
        _ => return Ok(PASS),
    };
    let Some(ep) = local_destination(&dst) else {
        return Ok(PASS);
    };
    if flow {
        return Ok(PASS);
    }
    deliver(ctx, &ep).map(|out| Outcome {
        why: reason::OVERLAY_TO_POD,
        verdict: out.verdict,
    })
}

/// Must a packet of `flow` to a local pod take the host stack? When its ports cannot be read
/// (or it is an ICMP error), or the pod's socket (`key(destination port)`) has a flow through
/// the stack.
#[inline(always)]
fn socket(flow: Flow, key: impl Fn(u16) -> StackKey) -> bool {
    match flow {
        Flow::NeedsStack => true,
        Flow::Ports(_, dport) => stack::recorded(&key(dport)),
        Flow::Other => false,
    }
}

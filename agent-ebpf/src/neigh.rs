//! Gateway resolution for pods, answered in the datapath as Cilium does: an ARP request or an
//! IPv6 neighbour solicitation from a pod, for any address but its own, is answered with the
//! MAC of the host-side veth it came through, and the reply goes straight back out of that veth.
//! Pods therefore reach their gateway (the node's router IP) without any address on the veth.

use agent_common::{EndpointKey, reason};
use aya_ebpf::{
    bindings::{TC_ACT_REDIRECT, TC_ACT_SHOT},
    helpers::bpf_redirect,
    programs::TcContext,
};

use crate::{
    from_container::{Outcome, ingress_ifindex},
    maps::{endpoint, iface},
    packet::{ETH_LEN, EthHdr, Ipv6Hdr, csum_add, csum_fold, ptr_at},
};

/// ARP over Ethernet for IPv4.
#[repr(C)]
struct ArpHdr {
    htype: [u8; 2],
    ptype: [u8; 2],
    hlen: u8,
    plen: u8,
    op: [u8; 2],
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
}

/// Neighbour solicitation with exactly one option, the source link-layer address; rewritten in
/// place into an advertisement with the target link-layer address.
#[repr(C)]
struct NeighMsg {
    icmp_type: u8,
    code: u8,
    check: [u8; 2],
    flags: [u8; 4],
    target: [u8; 16],
    opt_type: u8,
    opt_len: u8,
    opt_mac: [u8; 6],
}

const ARP_REQUEST: u16 = 1;
const ARP_REPLY: u16 = 2;
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_OPT_SOURCE_LL: u8 = 1;
const ND_OPT_TARGET_LL: u8 = 2;
/// Router | Solicited | Override.
const NA_FLAGS: [u8; 4] = [0xe0, 0, 0, 0];
const NEIGH_MSG_LEN: u16 = 32;

/// Answer a pod's ARP request; anything else ARP goes to the host stack.
#[inline(always)]
pub fn arp(ctx: &TcContext) -> Result<Outcome, Outcome> {
    let arp = ptr_at::<ArpHdr>(ctx, ETH_LEN)?;
    // SAFETY: bounds checked by `ptr_at`.
    let a = unsafe { &mut *arp };
    if u16::from_be_bytes(a.htype) != 1
        || u16::from_be_bytes(a.ptype) != 0x0800
        || a.hlen != 6
        || a.plen != 4
        || u16::from_be_bytes(a.op) != ARP_REQUEST
        || a.spa == [0; 4]
        || a.spa == a.tpa
    {
        // Probes, gratuitous ARP and replies are the host's business.
        return Ok(Outcome::PASS);
    }
    let ifindex = ingress_ifindex(ctx);
    let Some(info) = iface(ifindex) else {
        return Ok(Outcome::PASS);
    };
    if !matches!(endpoint(&EndpointKey::v4(a.spa)), Some(ep) if ep.ifindex == ifindex) {
        return Ok(Outcome::PASS);
    }
    let (asker_mac, asker_ip, wanted_ip) = (a.sha, a.spa, a.tpa);
    a.op = ARP_REPLY.to_be_bytes();
    a.sha = info.mac;
    a.spa = wanted_ip;
    a.tha = asker_mac;
    a.tpa = asker_ip;
    let eth = ptr_at::<EthHdr>(ctx, 0)?;
    // SAFETY: bounds checked by `ptr_at`.
    unsafe {
        (*eth).dst = asker_mac;
        (*eth).src = info.mac;
    }
    Ok(bounce(ifindex))
}

/// Answer a pod's neighbour solicitation. `Ok(None)`: not one we answer, carry on.
#[inline(always)]
pub fn ndp(ctx: &TcContext) -> Result<Option<Outcome>, Outcome> {
    let ip = ptr_at::<Ipv6Hdr>(ctx, ETH_LEN)?;
    let Ok(msg) = ptr_at::<NeighMsg>(ctx, ETH_LEN + size_of::<Ipv6Hdr>()) else {
        return Ok(None);
    };
    // SAFETY: both bounds checked by `ptr_at`.
    let (ip, msg) = unsafe { (&mut *ip, &mut *msg) };
    if msg.icmp_type != ND_NEIGHBOR_SOLICIT
        || msg.code != 0
        || ip.hop_limit != 255
        || u16::from_be_bytes(ip.payload_len) != NEIGH_MSG_LEN
        || msg.opt_type != ND_OPT_SOURCE_LL
        || msg.opt_len != 1
        || ip.src == [0; 16]
        || ip.src == msg.target
        || msg.target[0] == 0xff
    {
        // Duplicate-address detection, solicitations without a source link-layer option,
        // and everything else ICMPv6: the host stack decides.
        return Ok(None);
    }
    let ifindex = ingress_ifindex(ctx);
    let Some(info) = iface(ifindex) else {
        return Ok(None);
    };
    let asker_ip = ip.src;
    let asker_mac = msg.opt_mac;
    ip.src = msg.target;
    ip.dst = asker_ip;
    msg.icmp_type = ND_NEIGHBOR_ADVERT;
    msg.flags = NA_FLAGS;
    msg.opt_type = ND_OPT_TARGET_LL;
    msg.opt_mac = info.mac;
    msg.check = [0; 2];
    // Pseudo-header (source, destination, upper-layer length, next header) + the message.
    let mut sum = csum_add(0, &ip.src);
    sum = csum_add(sum, &ip.dst);
    sum += u32::from(NEIGH_MSG_LEN) + u32::from(crate::packet::IPPROTO_ICMPV6);
    sum += u32::from(u16::from_be_bytes([msg.icmp_type, msg.code]));
    sum = csum_add(sum, &msg.flags);
    sum = csum_add(sum, &msg.target);
    sum += u32::from(u16::from_be_bytes([msg.opt_type, msg.opt_len]));
    sum = csum_add(sum, &msg.opt_mac);
    msg.check = csum_fold(sum).to_be_bytes();
    let eth = ptr_at::<EthHdr>(ctx, 0)?;
    // SAFETY: bounds checked by `ptr_at`.
    unsafe {
        (*eth).dst = asker_mac;
        (*eth).src = info.mac;
    }
    Ok(Some(bounce(ifindex)))
}

/// Send the rewritten packet back out of the veth it came in on, towards the pod.
#[inline(always)]
fn bounce(ifindex: u32) -> Outcome {
    // SAFETY: plain helper call.
    let ret = unsafe { bpf_redirect(ifindex, 0) };
    if ret == i64::from(TC_ACT_REDIRECT) {
        Outcome {
            why: reason::NEIGH_REPLY,
            verdict: TC_ACT_REDIRECT as i32,
        }
    } else {
        Outcome {
            why: reason::DROP_REDIRECT_FAILED,
            verdict: TC_ACT_SHOT,
        }
    }
}

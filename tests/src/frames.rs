//! Hand-built Ethernet frames for `BPF_PROG_TEST_RUN`, and the checksum arithmetic tests use
//! to verify what the programs rewrote.

use std::net::{Ipv4Addr, Ipv6Addr};

/// MAC the test frames come from (the pod).
pub const POD_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
/// MAC the test frames are sent to (the gateway).
pub const GW_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

fn eth(proto: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&GW_MAC);
    f.extend_from_slice(&POD_MAC);
    f.extend_from_slice(&proto.to_be_bytes());
    f
}

/// One's-complement sum of 16-bit big-endian words (odd trailing byte padded with zero).
#[must_use]
pub fn sum16(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

/// Fold and complement a running sum into a checksum.
#[must_use]
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !u16::try_from(sum).unwrap_or(0)
}

/// IPv4 header checksum of `header` (with its checksum field zeroed or not: 0 means valid).
#[must_use]
pub fn ipv4_header_csum(header: &[u8]) -> u16 {
    fold(sum16(header))
}

/// Ethernet + IPv4 + UDP frame with `payload`, valid checksums.
#[must_use]
pub fn udp4(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    let total = u16::try_from(20 + 8 + payload.len()).expect("small frame");
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, ttl, 17, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let c = ipv4_header_csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let udp_len = u16::try_from(8 + payload.len()).expect("small frame");
    let mut udp = vec![0x30, 0x39, 0x00, 0x35];
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&udp_len.to_be_bytes());
    let c = fold(sum16(&pseudo) + sum16(&udp));
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&udp);
    f
}

/// Ethernet + IPv6 + UDP frame with `payload`.
#[must_use]
pub fn udp6(src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(0x86dd);
    let len = u16::try_from(8 + payload.len()).expect("small frame");
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[17, hop_limit]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// ARP request from `sender` (with [`POD_MAC`]) asking for `target`.
#[must_use]
pub fn arp_request(sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&POD_MAC);
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&POD_MAC);
    f.extend_from_slice(&sender.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target.octets());
    f
}

/// Solicited-node multicast address of `target`.
#[must_use]
pub fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let t = target.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(t[13]),
        u16::from_be_bytes([t[14], t[15]]),
    )
}

/// `ICMPv6` checksum of `message` between `src` and `dst` (0 when `message` carries a valid one).
#[must_use]
pub fn icmp6_csum(src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) -> u16 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    fold(sum16(&pseudo) + sum16(message))
}

/// Neighbour solicitation from `src` (with a source link-layer option) for `target`.
#[must_use]
pub fn neighbor_solicit(src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    let dst = solicited_node(target);
    let t = target.octets();
    let mut f = Vec::new();
    f.extend_from_slice(&[0x33, 0x33, 0xff, t[13], t[14], t[15]]);
    f.extend_from_slice(&POD_MAC);
    f.extend_from_slice(&0x86ddu16.to_be_bytes());
    let mut msg = vec![135, 0, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(&target.octets());
    msg.extend_from_slice(&[1, 1]);
    msg.extend_from_slice(&POD_MAC);
    let c = icmp6_csum(src, dst, &msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&u16::try_from(msg.len()).expect("small").to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&msg);
    f
}

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

/// A computed UDP checksum as sent: 0 means "no checksum" on the wire, so it goes as 0xffff
/// (RFC 768).
fn udp_csum(computed: u16) -> u16 {
    if computed == 0 { 0xffff } else { computed }
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
    let c = udp_csum(fold(sum16(&pseudo) + sum16(&udp)));
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

/// IPv4 header (no options) for a `proto` payload of `payload_len` bytes, valid checksum.
fn ipv4_header(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, proto: u8, payload_len: usize) -> Vec<u8> {
    let total = u16::try_from(20 + payload_len).expect("small frame");
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, ttl, proto, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let c = ipv4_header_csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip
}

/// Sum of the IPv4 pseudo-header of an L4 segment.
fn pseudo_sum(src: [u8; 4], dst: [u8; 4], proto: u8, len: usize) -> u32 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, proto]);
    pseudo.extend_from_slice(&u16::try_from(len).expect("small").to_be_bytes());
    sum16(&pseudo)
}

/// Ethernet + IPv4 + UDP from `src:sport` to `dst:dport`, valid checksums.
#[must_use]
pub fn udp4_ports(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut udp = Vec::new();
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(
        &u16::try_from(8 + payload.len())
            .expect("small")
            .to_be_bytes(),
    );
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let c = udp_csum(fold(
        pseudo_sum(src.octets(), dst.octets(), 17, udp.len()) + sum16(&udp),
    ));
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    l4_frame(src, dst, 17, &udp)
}

/// Ethernet + IPv4 + TCP (20-byte header, flags `flags`) from `src:sport` to `dst:dport`.
#[must_use]
pub fn tcp4(
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    flags: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut tcp = Vec::new();
    tcp.extend_from_slice(&sport.to_be_bytes());
    tcp.extend_from_slice(&dport.to_be_bytes());
    tcp.extend_from_slice(&0x1234_5678u32.to_be_bytes());
    tcp.extend_from_slice(&0u32.to_be_bytes());
    tcp.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend_from_slice(payload);
    let c = fold(pseudo_sum(src.octets(), dst.octets(), 6, tcp.len()) + sum16(&tcp));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    l4_frame(src, dst, 6, &tcp)
}

/// Ethernet + IPv4 + ICMP echo (`icmp_type` 8 = request, 0 = reply) with identifier `id`.
#[must_use]
pub fn icmp4_echo(src: Ipv4Addr, dst: Ipv4Addr, icmp_type: u8, id: u16, seq: u16) -> Vec<u8> {
    let mut icmp = vec![icmp_type, 0, 0, 0];
    icmp.extend_from_slice(&id.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(b"weft echo payload");
    let c = fold(sum16(&icmp));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    l4_frame(src, dst, 1, &icmp)
}

fn l4_frame(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend_from_slice(&ipv4_header(src, dst, 64, proto, l4.len()));
    f.extend_from_slice(l4);
    f
}

/// The parts of an IPv4 frame (no IP options) tests look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ipv4View {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// TTL.
    pub ttl: u8,
    /// IP protocol.
    pub proto: u8,
    /// Source port (TCP/UDP) or echo identifier (ICMP).
    pub sport: u16,
    /// Destination port (TCP/UDP) or echo identifier (ICMP).
    pub dport: u16,
    /// The IPv4 header checksum verifies.
    pub ip_csum_ok: bool,
    /// The L4 checksum verifies (TCP/UDP with the pseudo-header, ICMP without).
    pub l4_csum_ok: bool,
}

/// Decode an Ethernet + IPv4 (+ TCP/UDP/ICMP) frame and verify its checksums from scratch.
#[must_use]
pub fn view4(frame: &[u8]) -> Ipv4View {
    let ip = &frame[14..34];
    let l4 = &frame[34..];
    let src: [u8; 4] = ip[12..16].try_into().expect("4");
    let dst: [u8; 4] = ip[16..20].try_into().expect("4");
    let proto = ip[9];
    let word = |b: &[u8], i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let (sport, dport, l4_csum_ok) = match proto {
        1 => (word(l4, 4), word(l4, 4), fold(sum16(l4)) == 0),
        6 | 17 => {
            // Every UDP frame the tests build carries a checksum: a zero one ("none" on the
            // wire) is a rewrite that dropped it instead of updating it.
            let sum = pseudo_sum(src, dst, proto, l4.len()) + sum16(l4);
            let dropped = proto == 17 && word(l4, 6) == 0;
            (word(l4, 0), word(l4, 2), !dropped && fold(sum) == 0)
        }
        _ => (0, 0, false),
    };
    Ipv4View {
        src: src.into(),
        dst: dst.into(),
        ttl: ip[8],
        proto,
        sport,
        dport,
        ip_csum_ok: ipv4_header_csum(ip) == 0,
        l4_csum_ok,
    }
}

/// Ethernet + IPv4 + ICMP error (`icmp_type`/`code`, e.g. 3/4 "fragmentation needed") from
/// `src` to `dst` quoting the first 28 bytes (IPv4 header + 8) of the IPv4 packet in `quoted`
/// (an Ethernet frame).
#[must_use]
pub fn icmp4_error(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    icmp_type: u8,
    code: u8,
    quoted: &[u8],
) -> Vec<u8> {
    let mut icmp = vec![icmp_type, code, 0, 0, 0, 0, 0x05, 0x78];
    icmp.extend_from_slice(&quoted[14..14 + 28]);
    let c = fold(sum16(&icmp));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    l4_frame(src, dst, 1, &icmp)
}

/// Sum of the IPv6 pseudo-header of an upper-layer packet (RFC 8200 §8.1).
fn pseudo6_sum(src: Ipv6Addr, dst: Ipv6Addr, next: u8, len: usize) -> u32 {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&u32::try_from(len).expect("small").to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, next]);
    sum16(&pseudo)
}

/// Ethernet + IPv6 (hop limit 64, no extension headers) around the upper-layer packet `l4`
/// of next header `next`, whose checksum at `csum_at` is filled in here.
fn l4_frame6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, mut l4: Vec<u8>, csum_at: usize) -> Vec<u8> {
    let c = fold(pseudo6_sum(src, dst, next, l4.len()) + sum16(&l4));
    l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    let mut f = eth(0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&u16::try_from(l4.len()).expect("small").to_be_bytes());
    f.extend_from_slice(&[next, 64]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&l4);
    f
}

/// Ethernet + IPv6 + UDP from `src:sport` to `dst:dport`, valid checksum.
#[must_use]
pub fn udp6_ports(src: Ipv6Addr, sport: u16, dst: Ipv6Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut udp = Vec::new();
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(
        &u16::try_from(8 + payload.len())
            .expect("small")
            .to_be_bytes(),
    );
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    l4_frame6(src, dst, 17, udp, 6)
}

/// Ethernet + IPv6 + TCP (20-byte header, flags `flags`) from `src:sport` to `dst:dport`.
#[must_use]
pub fn tcp6(
    src: Ipv6Addr,
    sport: u16,
    dst: Ipv6Addr,
    dport: u16,
    flags: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut tcp = Vec::new();
    tcp.extend_from_slice(&sport.to_be_bytes());
    tcp.extend_from_slice(&dport.to_be_bytes());
    tcp.extend_from_slice(&0x1234_5678u32.to_be_bytes());
    tcp.extend_from_slice(&0u32.to_be_bytes());
    tcp.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend_from_slice(payload);
    l4_frame6(src, dst, 6, tcp, 16)
}

/// Ethernet + IPv6 + ICMPv6 echo (`icmp_type` 128 = request, 129 = reply) with identifier `id`.
#[must_use]
pub fn icmp6_echo(src: Ipv6Addr, dst: Ipv6Addr, icmp_type: u8, id: u16, seq: u16) -> Vec<u8> {
    let mut icmp = vec![icmp_type, 0, 0, 0];
    icmp.extend_from_slice(&id.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(b"weft echo payload");
    l4_frame6(src, dst, 58, icmp, 2)
}

/// Ethernet + IPv6 + ICMPv6 error (`icmp_type`/`code`, e.g. 2/0 "packet too big" with MTU
/// 1280) from `src` to `dst` quoting the whole IPv6 packet of the Ethernet frame `quoted`.
#[must_use]
pub fn icmp6_error(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    icmp_type: u8,
    code: u8,
    quoted: &[u8],
) -> Vec<u8> {
    let mut icmp = vec![icmp_type, code, 0, 0];
    icmp.extend_from_slice(&1280u32.to_be_bytes());
    icmp.extend_from_slice(&quoted[14..]);
    l4_frame6(src, dst, 58, icmp, 2)
}

/// The parts of an IPv6 frame (no extension headers) tests look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ipv6View {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Hop limit.
    pub hop_limit: u8,
    /// Next header.
    pub next: u8,
    /// Source port (TCP/UDP) or echo identifier (ICMPv6).
    pub sport: u16,
    /// Destination port (TCP/UDP) or echo identifier (ICMPv6).
    pub dport: u16,
    /// The L4 checksum verifies, pseudo-header included (TCP, UDP and ICMPv6 alike).
    pub l4_csum_ok: bool,
}

/// Decode an Ethernet + IPv6 (+ TCP/UDP/ICMPv6) frame and verify its L4 checksum from scratch.
#[must_use]
pub fn view6(frame: &[u8]) -> Ipv6View {
    let ip = &frame[14..54];
    let l4 = &frame[54..];
    let src: [u8; 16] = ip[8..24].try_into().expect("16");
    let dst: [u8; 16] = ip[24..40].try_into().expect("16");
    let next = ip[6];
    let word = |b: &[u8], i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let (sport, dport) = match next {
        58 => (word(l4, 4), word(l4, 4)),
        6 | 17 => (word(l4, 0), word(l4, 2)),
        _ => (0, 0),
    };
    let l4_csum_ok = matches!(next, 6 | 17 | 58)
        && fold(pseudo6_sum(src.into(), dst.into(), next, l4.len()) + sum16(l4)) == 0;
    Ipv6View {
        src: src.into(),
        dst: dst.into(),
        hop_limit: ip[7],
        next,
        sport,
        dport,
        l4_csum_ok,
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::{udp4_ports, view4};

    #[test]
    fn a_udp_checksum_zeroed_by_a_rewrite_does_not_verify() {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(192, 0, 2, 1));
        let mut frame = udp4_ports(src, 4000, dst, 53, b"query");
        assert!(view4(&frame).l4_csum_ok, "the built frame verifies");
        // What a NAT rewrite that drops the checksum instead of updating it leaves.
        frame[34 + 6..34 + 8].copy_from_slice(&[0, 0]);
        assert!(!view4(&frame).l4_csum_ok, "a zeroed UDP checksum passed");
    }
}

//! Bounds-checked direct packet access and the little checksum arithmetic the programs need.
//! Headers are byte arrays so no access is ever unaligned.

use aya_ebpf::programs::TcContext;

/// Length of an Ethernet header.
pub const ETH_LEN: usize = 14;
/// Ethertype of IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// Ethertype of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// Ethertype of ARP.
pub const ETH_P_ARP: u16 = 0x0806;
/// IPv6 next-header value of ICMPv6.
pub const IPPROTO_ICMPV6: u8 = 58;

/// Ethernet header.
#[repr(C)]
pub struct EthHdr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub proto: [u8; 2],
}

/// IPv4 header without options.
#[repr(C)]
pub struct Ipv4Hdr {
    pub ver_ihl: u8,
    pub tos: u8,
    pub tot_len: [u8; 2],
    pub id: [u8; 2],
    pub frag: [u8; 2],
    pub ttl: u8,
    pub proto: u8,
    pub check: [u8; 2],
    pub src: [u8; 4],
    pub dst: [u8; 4],
}

/// IPv6 fixed header.
#[repr(C)]
pub struct Ipv6Hdr {
    pub ver_tc_flow: [u8; 4],
    pub payload_len: [u8; 2],
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

/// Marker for malformed or truncated packets.
pub struct Truncated;

/// Pointer to a `T` at byte `off` of the packet, if the whole `T` is inside it.
#[inline(always)]
pub fn ptr_at<T>(ctx: &TcContext, off: usize) -> Result<*mut T, Truncated> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + off + size_of::<T>() > end {
        return Err(Truncated);
    }
    Ok((start + off) as *mut T)
}

/// Decrement an IPv4 TTL in place and patch the header checksum incrementally
/// (RFC 1624, as the kernel's `ip_decrease_ttl`).
#[inline(always)]
pub fn ipv4_decrement_ttl(ip: &mut Ipv4Hdr) {
    ip.ttl -= 1;
    let check = u32::from(u16::from_be_bytes(ip.check)) + 0x0100;
    let folded = (check + (check >> 16)) & 0xffff;
    // `folded` fits 16 bits after the mask.
    ip.check = (folded as u16).to_be_bytes();
}

/// Add the 16-bit big-endian words of `bytes` to a one's-complement running sum.
#[inline(always)]
pub fn csum_add(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut i = 0;
    while i + 1 < bytes.len() {
        sum += u32::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
        i += 2;
    }
    sum
}

/// Fold a running sum to the final 16-bit one's-complement checksum.
#[inline(always)]
pub fn csum_fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    // After two folds `sum` fits in 16 bits.
    !(sum as u16)
}

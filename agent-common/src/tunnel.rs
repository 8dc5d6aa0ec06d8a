//! The tunnel map: the one tunnel device of the node (tunnel routing mode), which
//! `from_container` redirects encapsulated packets to. One `ARRAY` slot; ifindex 0 means no
//! tunnel (native routing).

/// Value of the tunnel map's only slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelInfo {
    /// ifindex of the tunnel device; 0: no tunnel.
    pub ifindex: u32,
    /// `TUNNEL_F_*` bits.
    pub flags: u32,
}

abi_layout!(TunnelInfo, 8 { ifindex: 0, flags: 4 });

#[cfg(feature = "user")]
// SAFETY: repr(C), two u32, no padding.
unsafe impl aya::Pod for TunnelInfo {}

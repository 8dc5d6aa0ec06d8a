//! The ABI between weft's eBPF programs and the agent: map names, capacities, and the
//! `#[repr(C)]` keys and values both sides read and write. Nothing here allocates or does IO.
//!
//! Rules: every field is an integer or a byte array, padding is explicit, and every type has a
//! compile-time layout proof (`abi_layout!`: golden offsets, no implicit padding). Changing a
//! layout means changing the map's versioned name in [`maps`], so an agent never re-adopts a pin
//! of the old shape.
#![no_std]

#[cfg(test)]
extern crate std;

/// Compile-time proof of an ABI type's layout: its size, each field at the listed offset
/// (golden values: a reordered or resized field fails the build), the fields back to back and
/// nothing after the last (no implicit padding, which the kernel and the agent could read
/// differently, and which `aya::Pod` must not have).
macro_rules! abi_layout {
    ($ty:ident, $size:literal { $($field:ident: $off:literal),+ $(,)? }) => {
        const _: () = {
            assert!(core::mem::size_of::<$ty>() == $size);
            let mut end = 0;
            $(
                assert!(core::mem::offset_of!($ty, $field) == $off);
                assert!(
                    $off == end,
                    concat!(stringify!($ty), ".", stringify!($field), " follows implicit padding")
                );
                end = $off + $crate::field_size(|v: &$ty| &v.$field);
            )+
            assert!(end == $size, concat!(stringify!($ty), " ends in implicit padding"));
        };
    };
}

/// The size of the field `field` selects (for `abi_layout!`).
const fn field_size<T, F>(_field: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

pub mod counters;
pub mod endpoint;
pub mod identity;
pub mod ipcache;
pub mod maps;
pub mod masq;
pub mod nat;
pub mod stack;
pub mod tunnel;

pub use counters::{Counter, reason};
pub use endpoint::{EndpointInfo, EndpointKey, IfaceInfo};
pub use ipcache::{IpcacheInfo, IpcacheKey};
pub use masq::{MasqInfo, MasqKey};
pub use nat::{NatEntry4, NatEntry6, NatTuple4, NatTuple6, NetdevInfo};
pub use stack::{StackInfo, StackKey};
pub use tunnel::TunnelInfo;

/// Ethernet address as it appears on the wire.
pub type MacAddr = [u8; 6];

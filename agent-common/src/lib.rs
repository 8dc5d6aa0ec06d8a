//! The ABI between weft's eBPF programs and the agent: map names, capacities, and the
//! `#[repr(C)]` keys and values both sides read and write. Nothing here allocates or does IO.
//!
//! Rules (shared/STYLE.md §2): every field is an integer or a byte array, padding is explicit,
//! and every type has a compile-time size assert. Changing a layout means changing the map's
//! versioned name in [`maps`], so an agent never re-adopts a pin of the old shape.
#![no_std]

#[cfg(test)]
extern crate std;

pub mod counters;
pub mod endpoint;
pub mod identity;
pub mod ipcache;
pub mod maps;
pub mod masq;
pub mod nat;

pub use counters::{Counter, reason};
pub use endpoint::{EndpointInfo, EndpointKey, IfaceInfo};
pub use ipcache::{IpcacheInfo, IpcacheKey};
pub use masq::{MasqInfo, MasqKey};
pub use nat::{NatEntry4, NatEntry6, NatTuple4, NatTuple6, NetdevInfo};

/// Ethernet address as it appears on the wire.
pub type MacAddr = [u8; 6];

//! IPAM: Cilium's allocation rules, pure (no IO, no kube, no aya, no tokio). The agent feeds
//! these allocators the objects its store sees and writes back what they say; tests drive them
//! with plain values. Time and randomness come in as arguments so every rule is testable.
//!
//! What IPAM reads comes in as its own input types, converted from the wire types in `input`,
//! the one adapter: the own CiliumNode as [`input::NodeInput`], CiliumPodIPPools as
//! [`input::PoolInput`] (selectors compiled), pods and namespaces as [`input::Labelled`]. Only
//! the facade's two entry points for the own CiliumNode (`IpamManager::observe_node` and
//! `node_write`) take the wire object, and hand it straight to `input`; nothing else in `ipam`
//! names a CiliumNode, a CiliumPodIPPool, a Pod or a Namespace. What
//! IPAM writes back is in the CiliumNode's wire shapes (`crd::ipam`: a CRD pool entry, a pool
//! allocation and demand, [`crate::crd::ipam::NodeIpamWrite`]), since those are the fields it
//! owns there. Nothing in the crd types imports `ipam`.

use std::net::IpAddr;

pub mod cloud;
pub mod crdalloc;
pub mod hostscope;
pub mod input;
pub use weft_k8s::labels;
pub mod manager;
pub mod mode;
pub mod multipool;
pub mod native_routing;
pub mod prealloc;
pub mod problems;
pub mod sanity;
pub mod selection;
pub mod staticip;
#[cfg(test)]
pub(crate) mod testing;

/// Address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `ip`.
    #[must_use]
    pub const fn of(ip: &IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// `ipv4` / `ipv6`, as in Cilium's messages and metric labels.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V4 => "ipv4",
            Self::V6 => "ipv6",
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Source of randomness for "pick a random free address" (tests pass a seeded one).
pub trait Random {
    /// A uniformly distributed number in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64;
}

impl Random for fastrand::Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.u64(0..n)
    }
}

//! The cluster side of IPAM, in one place for the two programs that run it: `weft-operator`
//! drives it from Kubernetes events, and `weft-agent`'s single-host mode drives it from its
//! embedded store. Everything here is pure and synchronous: no Kubernetes client, no cloud API,
//! no BPF, no timers of its own.
//!
//! Dependencies run one way: both programs depend on this crate, and it depends only on
//! `weft-k8s` (the CRD wire types); it never depends on either program.
//!
//! - [`cidrset`]: Cilium's `cidrset`, the round-robin block carver over one cluster CIDR.
//! - [`clusterpool`]: Cilium's cluster-pool operator allocator (`podcidr`).
//! - [`multipool`]: Cilium's multi-pool operator allocator (CiliumPodIPPool).
//! - [`manager`]: the node manager, the one driver of the block allocators (both programs).
//! - [`migration`]: the cluster-pool → multi-pool migration, planned (the operator runs it).
//! - [`node`]: the one tolerant typed read of a CiliumNode, each bad field reported by path.
//! - [`operator_keys`]: the operator's configuration keys, one row each (read by both programs).
//! - [`pool`]: the one CiliumPodIPPool → pool spec conversion.

pub mod cidrset;
pub mod clusterpool;
mod family;
pub mod manager;
pub mod migration;
pub mod multipool;
pub mod node;
pub mod operator_keys;
pub mod pool;

pub use family::Family;

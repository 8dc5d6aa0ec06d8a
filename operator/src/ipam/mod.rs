//! The operator's allocator cores, pure and sans-IO: no kube, no tokio, no clock, no logging.
//! Each core is a plain struct fed with node and pool specs and answering with what to write
//! (CIDRs, status errors) and what to log (warnings as values). The operator's node manager
//! and the agent's single-host mode both drive these; neither the wire types nor the
//! Kubernetes client are known here.
//!
//! - [`cidrset`]: Cilium's `cidrset`, the round-robin block carver over one cluster CIDR.
//! - [`clusterpool`]: Cilium's cluster-pool operator allocator (`podcidr`).
//! - [`multipool`]: Cilium's multi-pool operator allocator (CiliumPodIPPool).

pub mod cidrset;
pub mod clusterpool;
mod family;
pub mod multipool;

pub use family::Family;

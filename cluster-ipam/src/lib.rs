//! The cluster side of IPAM, in one place for the two programs that run it: `weft-operator`
//! drives it from Kubernetes events, and `weft-agent`'s single-host mode drives it from its
//! embedded store. Everything here is pure and synchronous: no Kubernetes client, no cloud API,
//! no BPF, no timers of its own.
//!
//! Dependencies run one way: both programs depend on this crate, and it depends only on
//! `weft-k8s` (the CRD wire types); it never depends on either program.

pub mod operator_keys;

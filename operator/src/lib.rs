//! weft-operator: the cluster-wide half of weft's IPAM. It hands node CIDRs to CiliumNodes
//! (cluster-pool, multi-pool) and keeps Azure NICs stocked with addresses (azure) the way
//! Cilium's operator does, deletes the CiliumNodes of deleted nodes, and runs as replicas of
//! which one, elected through a Lease, mutates.
//!
//! Dependencies run one way: this crate uses `weft-k8s` (the CRD wire types and the client
//! plumbing it shares with the agent) and `weft-cluster-ipam` (the pure block allocators it
//! shares with the agent's single-host mode), and never the agent or its datapath.
//!
//! - [`cloud`], [`azure`]: the node manager for cloud allocators and Azure IPAM behind it.
//! - [`config`], [`cli`]: flags and cilium-config keys.
//! - [`k8s`]: watches, the CiliumNode writer, node lifecycle and auto-created pools.
//! - [`identitygc`]: garbage collection of unused CiliumIdentities (the leader's).
//! - [`leader`]: leader election on a `coordination.k8s.io/v1` Lease.
//! - [`metrics`], [`http`]: `/metrics` and `/healthz`.
//! - [`migrate`]: the cluster-pool → multi-pool migration pass and its dry run.
//! - [`run`]: the composition root.

pub mod azure;
pub mod cli;
pub mod cloud;
pub mod config;
pub mod eni;
pub mod http;
pub mod identitygc;
pub mod k8s;
pub mod leader;
pub mod metrics;
pub mod migrate;
pub mod run;

pub use weft_k8s::error::chain;

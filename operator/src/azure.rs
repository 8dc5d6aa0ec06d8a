//! Azure IPAM (`--ipam azure`): Cilium's Azure allocator behind the cloud node manager
//! ([`crate::cloud`]). The operator keeps `spec.ipam.pre-allocate` addresses free on every
//! node by adding ipConfigurations to the node's NIC (standalone VM) or VMSS instance, and
//! hands out static public IPs from tagged Public IP Prefixes.
//!
//! - [`resource_id`]: ARM resource IDs (parsing, the VMSS/VM parts of a NIC ID).
//! - [`model`]: serde types for the ARM JSON read and written (unknown fields kept).
//! - [`parse`]: a NIC as ARM returns it → the CiliumNode's `status.azure.interfaces` entry.
//! - [`imds`]: the Instance Metadata Service (cloud, subscription, resource group).
//! - [`auth`]: the credential chain (environment, workload identity, managed identity).
//! - [`api`]: the ARM client (the operations Cilium calls, LROs, retries, rate limit).
//! - [`instances`]: the instances cache (full resync, per-instance sync).
//! - [`node`]: one node's operations (capacity, allocation choice, status).
//! - [`setup`]: the composition (IMDS, credential, client, cache).

pub mod api;
pub mod auth;
pub mod imds;
pub mod instances;
pub mod model;
pub mod node;
pub mod parse;
pub mod resource_id;
pub mod setup;

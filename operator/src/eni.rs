//! AWS ENI IPAM (`--ipam eni`): the cloud provider that keeps each node's addresses on its
//! instance's Elastic Network Interfaces through the EC2 API, as Cilium's ENI allocator does.
//! It plugs into the cloud node manager ([`crate::cloud`]) like Azure, and imports nothing of
//! `azure`.
//!
//! - [`limits`]: the instance-type limits and the formulas built on them (pure).
pub mod api;
pub mod creds;
pub mod imds;
pub mod limits;

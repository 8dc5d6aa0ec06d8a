//! AWS ENI IPAM (`--ipam eni`): the cloud provider that keeps each node's addresses on its
//! instance's Elastic Network Interfaces through the EC2 API, as Cilium's ENI allocator does.
//! It plugs into the cloud node manager ([`crate::cloud`]) like Azure, and imports nothing of
//! `azure`.
//!
//! - [`api`]: the EC2 Query client (SigV4, token bucket, paging, retries, metrics).
//! - [`creds`]: the AWS credential chain. The instance metadata service (IMDSv2) client is
//!   `weft_aws_imds`, shared with the agent.
//! - [`ec2`]: the client as the cache's inventory and the allocator's operations.
//! - [`gc`]: the deletion of leaked (detached, GC-tagged) ENIs.
//! - [`instances`]: the instances cache: network, instances' ENIs, limits; synced through an
//!   [`instances::Inventory`].
//! - [`interfaces`]: one node's ENIs: what it holds, where addresses go, what it releases (pure).
//! - [`limits`]: the instance-type limits and the formulas built on them (pure).
//! - [`ops`]: the EC2 changes in the allocator's terms, and how their errors are told apart.
//! - [`provider`]: the [`crate::cloud::CloudProvider`] that executes the decisions over EC2.
//! - [`setup`]: region, VPC, credentials and the client at start.
//! - [`vpc`]: subnets, route tables, security groups, and the choices for a new ENI (pure).

pub mod api;
pub mod creds;
pub mod ec2;
pub mod gc;
pub mod instances;
pub mod interfaces;
pub mod limits;
pub mod ops;
pub mod provider;
pub mod setup;
pub mod vpc;

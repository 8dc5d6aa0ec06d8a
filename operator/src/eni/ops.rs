//! The EC2 changes the ENI allocator makes, in its own terms ([`Ec2Ops`]), and how their
//! errors are told apart ([`Classify`]: the decisions of Cilium that hang on an EC2 error
//! code or message). The EC2 client's adapter implements both; the node operations are
//! written against them only.

use std::{collections::BTreeMap, future::Future, net::IpAddr};

use ipnet::IpNet;
use weft_k8s::crd::eni::Eni;

use super::instances::{Assigned, Inventory, NetworkState};

/// What the allocator needs to know of an EC2 error.
pub trait Classify {
    /// Throttling, a 5xx or a network failure: the same call may succeed later.
    fn is_transient(&self) -> bool;
    /// A permission is missing (`UnauthorizedOperation`): granting it fixes it.
    fn is_unauthorized(&self) -> bool;
    /// The subnet has no free /28 (`InsufficientCidrBlocks`, or `InvalidParameterValue`
    /// "There aren't sufficient free Ipv4 addresses or prefixes"): fall back to addresses.
    fn is_prefix_capacity(&self) -> bool;
    /// The device index is taken (`InvalidParameterValue` "interface attached at device").
    fn is_index_conflict(&self) -> bool;
    /// The instance is not running (the message contains `is not 'running'`).
    fn is_not_running(&self) -> bool;
}

/// A new ENI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEni {
    /// The subnet.
    pub subnet: String,
    /// `Cilium-CNI (<instance-id>)`.
    pub description: String,
    /// Its security groups.
    pub security_groups: Vec<String>,
    /// Its tags (`--eni-tags` and the GC tags).
    pub tags: BTreeMap<String, String>,
    /// Secondary addresses, or /28 prefixes.
    pub size: Size,
    /// An IPv6 /80 prefix too.
    pub ipv6_prefix: bool,
    /// The idempotency token (`ClientToken`): a retried creation returns the same ENI.
    pub client_token: String,
}

/// How many addresses a call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Secondary addresses (`SecondaryPrivateIpAddressCount`).
    Addresses(u64),
    /// /28 prefixes (`Ipv4PrefixCount`).
    Prefixes(u64),
}

/// The EC2 calls that change an instance's ENIs.
pub trait Ec2Ops: Inventory<Error: Classify> {
    /// `AssignPrivateIpAddresses`: what the answer lists (never indexed by count: moto lists
    /// every address of the ENI, EC2 the new ones).
    fn assign(
        &self,
        eni: &str,
        size: Size,
    ) -> impl Future<Output = Result<Assigned, Self::Error>> + Send;
    /// `UnassignPrivateIpAddresses` of `addresses`, or of `prefixes`.
    fn unassign(
        &self,
        eni: &str,
        addresses: &[IpAddr],
        prefixes: &[IpNet],
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// `AssignIpv6Addresses` of one /80 prefix.
    fn assign_ipv6_prefix(&self, eni: &str)
    -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// `CreateNetworkInterface`: the ENI as EC2 answers it (its addresses, the primary among
    /// them; its subnet and VPC CIDRs from `network`).
    fn create(
        &self,
        eni: &NewEni,
        network: &NetworkState,
    ) -> impl Future<Output = Result<Eni, Self::Error>> + Send;
    /// `AttachNetworkInterface` at `index`; the attachment ID.
    fn attach(
        &self,
        eni: &str,
        instance: &str,
        index: u64,
    ) -> impl Future<Output = Result<String, Self::Error>> + Send;
    /// `ModifyNetworkInterfaceAttribute`: delete on termination.
    fn delete_on_termination(
        &self,
        eni: &str,
        attachment: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// `DeleteNetworkInterface`.
    fn delete(&self, eni: &str) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// `DescribeAddresses` with `tags`: the Elastic IPs not associated yet, `(allocation ID,
    /// public IP)`.
    fn free_elastic_ips(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<Vec<(String, IpAddr)>, Self::Error>> + Send;
    /// `DescribeNetworkInterfaces` of the detached (`status=available`) ENIs carrying every
    /// one of `tags`, in `subnets` when given: their IDs.
    fn detached(
        &self,
        tags: &BTreeMap<String, String>,
        subnets: &[String],
    ) -> impl Future<Output = Result<Vec<String>, Self::Error>> + Send;
    /// `AssociateAddress` of an Elastic IP with an ENI.
    fn associate(
        &self,
        allocation: &str,
        eni: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

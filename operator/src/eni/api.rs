//! The EC2 client (§3): the actions Cilium's ENI allocator calls, the narrow [`Ec2Api`] trait
//! the caches and node code are generic over (the real [`Ec2Client`], or a mock), and
//! [`Ec2Error`]. Requests use the Query protocol (`POST /`, a form body,
//! `Version=2016-11-15`), are signed with SigV4 from an [`crate::eni::creds`] provider, wait on
//! the shared token bucket once per page, are retried on throttling, server-side timeouts and
//! 5xx, and follow `nextToken`. Listings switch to `MaxResults=1000` for the process lifetime
//! when EC2 answers `OperationNotPermitted`, and security groups fall back from
//! GetSecurityGroupsForVpc to DescribeSecurityGroups. Calls are timed into [`Ec2Metrics`]. What
//! the answers mean for a CiliumNode is the caller's.
//!
//! - `query`: the form encoder (pure); `xml`: the answers' decoder (pure); `model`: their types.
//! - `sign`: SigV4; `retry`: the backoff (pure); [`metrics`]: `ec2_api_*`.
//! - `request`: one exchange (rate limit, signing, retries, metrics) and paging.
//! - `ops`: the actions.
//! - `error`: [`Ec2Error`].

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32},
    },
    time::Duration,
};

use crate::{
    cloud::{ratelimit::RateLimiter, transport},
    eni::creds::ProvideCredentials,
};

mod error;
pub mod metrics;
pub mod model;
mod ops;
pub mod query;
mod request;
pub mod retry;
pub mod sign;
pub(crate) mod xml;

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testserver;

pub use error::{Ec2Error, THROTTLE_CODES, status_line};
pub use metrics::Ec2Metrics;
pub use model::{
    Address, AddressRelease, AddressRequest, Attachment, CreateInterface, Instance,
    InstanceTypeInfo, NetworkInterface, ResourceTag, RouteTable, RouteTableAssociation,
    SecurityGroup, Subnet, Tags, Vpc,
};
pub use query::Filter;
pub use transport::TransportError;

/// `MaxResults` once EC2 refused an unpaginated listing (§3.4).
pub const PAGED_MAX_RESULTS: u32 = 1000;

/// The EC2 endpoint for `region`: `configured` when given (a full URL, `http://` allowed, or
/// a bare host meaning https, as Cilium's `--ec2-api-endpoint`), else
/// `https://ec2.<region>.amazonaws.com` (`.com.cn` for `cn-` regions). No trailing slash.
#[must_use]
pub fn endpoint_url(region: &str, configured: Option<&str>) -> String {
    match configured.map(str::trim).filter(|c| !c.is_empty()) {
        Some(url) if url.contains("://") => url.trim_end_matches('/').to_owned(),
        Some(host) => format!("https://{}", host.trim_end_matches('/')),
        None => format!("https://ec2.{region}.{}", aws_domain(region)),
    }
}

/// `amazonaws.com`, or `amazonaws.com.cn` for China regions.
#[must_use]
pub fn aws_domain(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    }
}

/// Where and how the client talks to EC2.
#[derive(Clone, Debug)]
pub struct Ec2Settings {
    /// Base URL, e.g. `https://ec2.us-east-1.amazonaws.com` (see [`endpoint_url`]).
    pub endpoint: String,
    /// The signing region.
    pub region: String,
    /// Sustained requests per second of the token bucket (`--limit-ipam-api-qps`, 4.0).
    pub qps: f64,
    /// Bucket size (`--limit-ipam-api-burst`, 20).
    pub burst: u32,
    /// `--aws-max-results-per-call`: 0 omits `MaxResults` (until EC2 asks for paging).
    pub max_results_per_call: u32,
    /// Timeout of one HTTP exchange (`None`: none).
    pub timeout: Option<Duration>,
    /// `User-Agent` header.
    pub user_agent: String,
}

impl Ec2Settings {
    /// Settings with Cilium's defaults (4 qps, burst 20, no `MaxResults`, 60 s timeout) for
    /// `region` at `endpoint` (`--ec2-api-endpoint`, see [`endpoint_url`]).
    #[must_use]
    pub fn new(region: &str, endpoint: Option<&str>) -> Self {
        Self {
            endpoint: endpoint_url(region, endpoint),
            region: region.to_owned(),
            qps: 4.0,
            burst: 20,
            max_results_per_call: 0,
            timeout: Some(Duration::from_mins(1)),
            user_agent: concat!("weft-operator/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

/// The EC2 operations the ENI allocator needs; [`Ec2Client`] is the real one. Listing methods
/// return every page.
pub trait Ec2Api: Send + Sync {
    /// DescribeVpcs (`VpcId.1` when `vpc_id` is given).
    fn describe_vpcs(
        &self,
        vpc_id: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Vpc>, Ec2Error>> + Send;

    /// DescribeSubnets with `filters` (the subnet filters and `vpc-id`).
    fn describe_subnets(
        &self,
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<Subnet>, Ec2Error>> + Send;

    /// DescribeRouteTables with `filters` (`vpc-id`).
    fn describe_route_tables(
        &self,
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<RouteTable>, Ec2Error>> + Send;

    /// The security groups of `vpc_id`: GetSecurityGroupsForVpc when a VPC is known, falling
    /// back to DescribeSecurityGroups (filtered on `vpc-id` when known) for the process
    /// lifetime once the former is refused (`UnauthorizedOperation`) or not implemented (a
    /// 5xx without an AWS error document).
    fn security_groups(
        &self,
        vpc_id: Option<&str>,
    ) -> impl Future<Output = Result<Vec<SecurityGroup>, Ec2Error>> + Send;

    /// DescribeNetworkInterfaces: by `ids` (`NetworkInterfaceId.N`, never with `MaxResults`)
    /// and/or `filters`.
    fn describe_network_interfaces(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<NetworkInterface>, Ec2Error>> + Send;

    /// DescribeInstances with `filters` (`tag:k=v`): instances and their interfaces' IDs.
    fn describe_instances(
        &self,
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<Instance>, Ec2Error>> + Send;

    /// DescribeInstanceTypes: every type's limits.
    fn describe_instance_types(
        &self,
    ) -> impl Future<Output = Result<Vec<InstanceTypeInfo>, Ec2Error>> + Send;

    /// DescribeTags with `filters` (`resource-type`, `resource-id`, `key`).
    fn describe_tags(
        &self,
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<ResourceTag>, Ec2Error>> + Send;

    /// CreateNetworkInterface; the new ENI.
    fn create_network_interface(
        &self,
        request: &CreateInterface,
    ) -> impl Future<Output = Result<NetworkInterface, Ec2Error>> + Send;

    /// AttachNetworkInterface at `device_index` (network card 0); the attachment ID.
    fn attach_network_interface(
        &self,
        interface_id: &str,
        instance_id: &str,
        device_index: u32,
    ) -> impl Future<Output = Result<String, Ec2Error>> + Send;

    /// ModifyNetworkInterfaceAttribute: `Attachment.DeleteOnTermination=true`.
    fn set_delete_on_termination(
        &self,
        interface_id: &str,
        attachment_id: &str,
    ) -> impl Future<Output = Result<(), Ec2Error>> + Send;

    /// DeleteNetworkInterface.
    fn delete_network_interface(
        &self,
        interface_id: &str,
    ) -> impl Future<Output = Result<(), Ec2Error>> + Send;

    /// AssignPrivateIpAddresses; what the answer lists (informational only: moto lists every
    /// address of the ENI).
    fn assign_private_ip_addresses(
        &self,
        interface_id: &str,
        request: AddressRequest,
    ) -> impl Future<Output = Result<Vec<String>, Ec2Error>> + Send;

    /// UnassignPrivateIpAddresses.
    fn unassign_private_ip_addresses(
        &self,
        interface_id: &str,
        release: &AddressRelease,
    ) -> impl Future<Output = Result<(), Ec2Error>> + Send;

    /// AssignIpv6Addresses with `Ipv6PrefixCount=1`.
    fn assign_ipv6_prefix(
        &self,
        interface_id: &str,
    ) -> impl Future<Output = Result<(), Ec2Error>> + Send;

    /// DescribeAddresses with `filters` (`tag:k=v`).
    fn describe_addresses(
        &self,
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<Address>, Ec2Error>> + Send;

    /// AssociateAddress (`AllowReassociation=false`); the association ID.
    fn associate_address(
        &self,
        allocation_id: &str,
        interface_id: &str,
    ) -> impl Future<Output = Result<String, Ec2Error>> + Send;
}

/// The EC2 client; cheap to clone.
#[derive(Clone, Debug)]
pub struct Ec2Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: transport::HttpClient,
    settings: Ec2Settings,
    credentials: Arc<dyn ProvideCredentials>,
    limiter: Arc<RateLimiter>,
    metrics: Ec2Metrics,
    /// `MaxResults` in force (0: omitted); raised once to [`PAGED_MAX_RESULTS`].
    max_results: AtomicU32,
    /// GetSecurityGroupsForVpc was refused or is not implemented: use DescribeSecurityGroups.
    sg_fallback: AtomicBool,
}

impl Ec2Client {
    /// A client with its own HTTP client and its own token bucket.
    ///
    /// # Errors
    /// [`Ec2Error::Transport`] when the HTTP client cannot be built.
    pub fn new(
        settings: Ec2Settings,
        credentials: Arc<dyn ProvideCredentials>,
        metrics: Ec2Metrics,
    ) -> Result<Self, Ec2Error> {
        let http = transport::client().map_err(|source| Ec2Error::Transport {
            action: "client",
            source: Box::new(source),
        })?;
        let limiter = Arc::new(RateLimiter::new(settings.qps, settings.burst));
        Ok(Self::with_parts(
            settings,
            credentials,
            metrics,
            http,
            limiter,
        ))
    }

    /// A client over an existing HTTP client and token bucket (shared with other callers).
    #[must_use]
    pub fn with_parts(
        settings: Ec2Settings,
        credentials: Arc<dyn ProvideCredentials>,
        metrics: Ec2Metrics,
        http: transport::HttpClient,
        limiter: Arc<RateLimiter>,
    ) -> Self {
        let max_results = AtomicU32::new(settings.max_results_per_call);
        Self {
            inner: Arc::new(Inner {
                http,
                settings,
                credentials,
                limiter,
                metrics,
                max_results,
                sg_fallback: AtomicBool::new(false),
            }),
        }
    }

    /// The settings.
    #[must_use]
    pub fn settings(&self) -> &Ec2Settings {
        &self.inner.settings
    }
}

//! The AWS ENI settings (`--ipam eni`): Cilium's operator flags, and weft's own so that the
//! operator can be pointed at any EC2 implementation (`ec2-api-endpoint` as a URL,
//! `aws-region`, `aws-vpc-id`, `aws-imds-endpoint`). The settings every cloud shares are in
//! [`super::CloudConfig`]; `aws-release-excess-ips` sets its release switch.

use std::{collections::BTreeMap, time::Duration};

pub use weft_cluster_ipam::operator_keys::DEFAULT_IMDS_ENDPOINT;

/// Cilium's default `cluster-name`.
pub const DEFAULT_CLUSTER_NAME: &str = "default";

/// Settings of ENI IPAM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EniConfig {
    /// `aws-enable-prefix-delegation`.
    pub prefix_delegation: bool,
    /// `eni-tags`.
    pub eni_tags: BTreeMap<String, String>,
    /// `eni-gc-interval` (zero: no GC).
    pub gc_interval: Duration,
    /// `eni-gc-tags` (empty: the defaults).
    pub gc_tags: BTreeMap<String, String>,
    /// `cluster-name`.
    pub cluster_name: String,
    /// `ec2-api-endpoint` (empty: the region's).
    pub ec2_api_endpoint: String,
    /// `aws-max-results-per-call` (0: none until EC2 asks for paging).
    pub max_results_per_call: u32,
    /// `subnet-ids-filter`.
    pub subnet_ids_filter: Vec<String>,
    /// `subnet-tags-filter`.
    pub subnet_tags_filter: BTreeMap<String, String>,
    /// `instance-tags-filter`.
    pub instance_tags_filter: BTreeMap<String, String>,
    /// `aws-region` (empty: `AWS_REGION`, `AWS_DEFAULT_REGION`, else IMDS).
    pub region: String,
    /// `aws-vpc-id` (empty: the operator's VPC from IMDS).
    pub vpc_id: String,
    /// `aws-imds-endpoint`.
    pub imds_endpoint: String,
}

impl Default for EniConfig {
    fn default() -> Self {
        Self {
            prefix_delegation: false,
            eni_tags: BTreeMap::new(),
            gc_interval: Duration::from_mins(5),
            gc_tags: BTreeMap::new(),
            cluster_name: DEFAULT_CLUSTER_NAME.to_owned(),
            ec2_api_endpoint: String::new(),
            max_results_per_call: 0,
            subnet_ids_filter: Vec::new(),
            subnet_tags_filter: BTreeMap::new(),
            instance_tags_filter: BTreeMap::new(),
            region: String::new(),
            vpc_id: String::new(),
            imds_endpoint: DEFAULT_IMDS_ENDPOINT.to_owned(),
        }
    }
}

/// cilium-config keys of Cilium's ENI operator that weft does not act on, and why: each one
/// found in the config directory is named at start (a flag of these names is refused as
/// unknown).
pub const NOT_SUPPORTED: [(&str, &str); 3] = [
    (
        "aws-use-primary-address",
        "removed from Cilium: set spec.eni.use-primary-address on the nodes (the agent's \
         --eni-use-primary-address)",
    ),
    (
        "aws-instance-limit-mapping",
        "removed from Cilium: the limits come from EC2's DescribeInstanceTypes",
    ),
    (
        "update-ec2-adapter-limit-via-api",
        "removed from Cilium: the limits always come from EC2's DescribeInstanceTypes",
    ),
];

/// The keys of [`NOT_SUPPORTED`] present in `file`, each with why it is not acted on.
pub fn not_supported(
    file: &BTreeMap<String, String>,
) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
    NOT_SUPPORTED
        .into_iter()
        .filter(|(key, _)| file.contains_key(*key))
}

//! The emulated AWS estate a test or the `ec2-emulator` program starts from: region and account,
//! VPCs, subnets, route tables, security groups, the instance-type catalogue, instances (each
//! with its primary ENI at device 0), Elastic IPs, pre-existing ENIs, IMDS, the IAM policy, the
//! accepted credentials and web identities, and the paging and rate limits. One serde struct
//! (YAML or JSON, camelCase keys) and a builder for Rust tests; nothing here serves or mutates.

mod builder;

use std::{collections::BTreeMap, net::Ipv4Addr, path::Path};

pub use self::builder::{
    EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET, EXAMPLE_SG, EXAMPLE_VPC,
};

use ipnet::{Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tags: key → value.
pub type Tags = BTreeMap<String, String>;

/// Why a scenario could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a scenario.
    #[error("{origin} is not a valid scenario")]
    Parse {
        /// The file, or `text`.
        origin: String,
        /// Why.
        #[source]
        source: serde_norway::Error,
    },
    /// The policy file cannot be read or is not JSON.
    #[error("cannot load the policy file {path}")]
    Policy {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The scenario contradicts itself (an unknown reference, a duplicate, a full subnet).
    #[error("inconsistent scenario: {what}")]
    Inconsistent {
        /// What is wrong, naming the object.
        what: String,
    },
}

/// Everything the emulator starts with.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// The region requests must be signed for (and IMDS's `region`).
    #[serde(default = "default_region")]
    pub region: String,
    /// The account id (`ownerId`).
    #[serde(default = "default_account")]
    pub account_id: String,
    /// VPCs.
    #[serde(default)]
    pub vpcs: Vec<VpcSpec>,
    /// Subnets.
    #[serde(default)]
    pub subnets: Vec<SubnetSpec>,
    /// Route tables and their subnet associations.
    #[serde(default)]
    pub route_tables: Vec<RouteTableSpec>,
    /// Security groups.
    #[serde(default)]
    pub security_groups: Vec<SecurityGroupSpec>,
    /// The instance-type catalogue (default: [`InstanceTypeSpec::catalogue`]).
    #[serde(default = "InstanceTypeSpec::catalogue")]
    pub instance_types: Vec<InstanceTypeSpec>,
    /// Instances, each with a primary ENI at device 0.
    #[serde(default)]
    pub instances: Vec<InstanceSpec>,
    /// Elastic IPs.
    #[serde(default)]
    pub elastic_ips: Vec<ElasticIpSpec>,
    /// ENIs that exist at start besides the instances' primaries (detached unless `attachment`).
    #[serde(default)]
    pub network_interfaces: Vec<EniSpec>,
    /// IMDS.
    #[serde(default)]
    pub imds: ImdsSpec,
    /// An IAM policy document (`Statement[].{Effect, Action, NotAction}`) enforced on every EC2
    /// action; none: every action is allowed.
    #[serde(default)]
    pub policy: Option<Value>,
    /// A policy document file (read at start, relative to the scenario file); combined with
    /// `policy` (both must allow).
    #[serde(default)]
    pub policy_file: Option<String>,
    /// Access key ids EC2 requests may be signed with; empty: any (STS-issued ones always).
    #[serde(default)]
    pub access_keys: Vec<String>,
    /// Access key → secret: requests signed with these keys are accepted and their SigV4
    /// signatures verified (`SignatureDoesNotMatch`); other keys' signatures are not checked.
    #[serde(default)]
    pub secret_keys: BTreeMap<String, String>,
    /// Web identities STS `AssumeRoleWithWebIdentity` accepts.
    #[serde(default)]
    pub web_identity: Option<WebIdentitySpec>,
    /// A listing without `MaxResults` longer than this answers `OperationNotPermitted`.
    #[serde(default)]
    pub unpaged_limit: Option<usize>,
    /// Requests per second above which EC2 answers `RequestLimitExceeded` (token bucket).
    #[serde(default)]
    pub rate_limit: Option<RateLimitSpec>,
    /// DescribeInstanceTypes' page without `MaxResults` (AWS pages it at 100 even then).
    #[serde(default = "default_types_page")]
    pub instance_types_page_size: u32,
    /// Most addresses (primary and prefixes included) on an ENI not attached to an instance.
    #[serde(default = "default_unattached_limit")]
    pub unattached_ipv4_limit: u32,
}

/// A VPC.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VpcSpec {
    /// `vpc-…`.
    pub id: String,
    /// The primary CIDR.
    pub cidr: Ipv4Net,
    /// Further associated CIDRs.
    #[serde(default)]
    pub extra_cidrs: Vec<Ipv4Net>,
    /// Tags.
    #[serde(default)]
    pub tags: Tags,
}

/// A subnet.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubnetSpec {
    /// `subnet-…`.
    pub id: String,
    /// Its VPC.
    pub vpc: String,
    /// Its CIDR (inside one of the VPC's).
    pub cidr: Ipv4Net,
    /// Availability zone (`us-east-1a`).
    pub az: String,
    /// An IPv6 block (a /64) for `Ipv6PrefixCount`; none: IPv6 prefixes are refused.
    #[serde(default)]
    pub ipv6_cidr: Option<Ipv6Net>,
    /// Tags.
    #[serde(default)]
    pub tags: Tags,
}

/// A route table.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteTableSpec {
    /// `rtb-…`.
    pub id: String,
    /// Its VPC.
    pub vpc: String,
    /// Subnets explicitly associated.
    #[serde(default)]
    pub subnets: Vec<String>,
    /// The VPC's main table.
    #[serde(default)]
    pub main: bool,
}

/// A security group.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityGroupSpec {
    /// `sg-…`.
    pub id: String,
    /// Its VPC.
    pub vpc: String,
    /// `groupName` (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Tags,
}

/// An instance type's network limits.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceTypeSpec {
    /// `m5.large`.
    pub name: String,
    /// `networkInfo/maximumNetworkInterfaces`.
    pub max_interfaces: u32,
    /// `networkInfo/ipv4AddressesPerInterface` (primary included).
    pub ipv4_per_interface: u32,
    /// `networkInfo/ipv6AddressesPerInterface`.
    pub ipv6_per_interface: u32,
    /// `hypervisor` (`nitro`, `xen`; none for bare metal).
    #[serde(default)]
    pub hypervisor: Option<String>,
    /// `bareMetal`.
    #[serde(default)]
    pub bare_metal: bool,
}

impl InstanceTypeSpec {
    /// A type.
    #[must_use]
    pub fn new(name: &str, interfaces: u32, ipv4: u32, hypervisor: Option<&str>) -> Self {
        Self {
            name: name.to_owned(),
            max_interfaces: interfaces,
            ipv4_per_interface: ipv4,
            ipv6_per_interface: ipv4,
            hypervisor: hypervisor.map(str::to_owned),
            bare_metal: false,
        }
    }

    /// The default catalogue, AWS's published numbers: m5.large 3×10 nitro, m5.xlarge 4×15
    /// nitro, m4.large 2×10 xen, t2.xlarge 3×15 xen, m5.metal 15×50 bare metal, c5.large 3×10
    /// nitro.
    #[must_use]
    pub fn catalogue() -> Vec<Self> {
        let mut metal = Self::new("m5.metal", 15, 50, None);
        metal.bare_metal = true;
        vec![
            Self::new("m5.large", 3, 10, Some("nitro")),
            Self::new("m5.xlarge", 4, 15, Some("nitro")),
            Self::new("c5.large", 3, 10, Some("nitro")),
            Self::new("m4.large", 2, 10, Some("xen")),
            Self::new("t2.xlarge", 3, 15, Some("xen")),
            metal,
        ]
    }
}

/// An instance with its primary ENI.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceSpec {
    /// `i-…`.
    pub id: String,
    /// Instance type (from the catalogue).
    #[serde(rename = "type")]
    pub instance_type: String,
    /// The subnet of its primary ENI (its AZ and VPC are the instance's).
    pub subnet: String,
    /// Tags.
    #[serde(default)]
    pub tags: Tags,
    /// Running (else stopped: attaching to it answers `IncorrectInstanceState`).
    #[serde(default = "yes")]
    pub running: bool,
    /// The primary ENI's id (default: derived from the instance id).
    #[serde(default)]
    pub primary_eni: Option<String>,
    /// The primary ENI's address (default: the subnet's lowest free).
    #[serde(default)]
    pub primary_ip: Option<Ipv4Addr>,
    /// Secondary addresses already on the primary ENI.
    #[serde(default)]
    pub secondary_ips: u32,
    /// The primary ENI's security groups.
    #[serde(default)]
    pub security_groups: Vec<String>,
}

impl InstanceSpec {
    /// A running instance of `instance_type` with its primary ENI in `subnet`, no tags.
    #[must_use]
    pub fn new(id: &str, instance_type: &str, subnet: &str) -> Self {
        Self {
            id: id.to_owned(),
            instance_type: instance_type.to_owned(),
            subnet: subnet.to_owned(),
            tags: Tags::new(),
            running: true,
            primary_eni: None,
            primary_ip: None,
            secondary_ips: 0,
            security_groups: Vec::new(),
        }
    }
}

/// An Elastic IP.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElasticIpSpec {
    /// `eipalloc-…`.
    pub allocation_id: String,
    /// The public address.
    pub public_ip: Ipv4Addr,
    /// Tags.
    #[serde(default)]
    pub tags: Tags,
    /// Associated at start to this ENI.
    #[serde(default)]
    pub network_interface: Option<String>,
}

/// An ENI that exists at start.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EniSpec {
    /// `eni-…`.
    pub id: String,
    /// Its subnet.
    pub subnet: String,
    /// `description`.
    #[serde(default)]
    pub description: String,
    /// Secondary addresses.
    #[serde(default)]
    pub secondary_ips: u32,
    /// Security groups.
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Tags,
    /// Attached at start: (instance, device index).
    #[serde(default)]
    pub attachment: Option<(String, u32)>,
}

/// IMDS.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImdsSpec {
    /// The instance IMDS describes (default: the first).
    #[serde(default)]
    pub instance: Option<String>,
    /// IMDSv2 required: a GET without a valid token answers 401.
    #[serde(default)]
    pub require_token: bool,
    /// An instance role (`iam/security-credentials/<role>` answers credentials).
    #[serde(default)]
    pub role: Option<String>,
}

/// STS `AssumeRoleWithWebIdentity`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebIdentitySpec {
    /// The role ARN callers must name.
    pub role_arn: String,
    /// Tokens accepted (the contents of `AWS_WEB_IDENTITY_TOKEN_FILE`).
    pub tokens: Vec<String>,
}

/// A token bucket over every EC2 request.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitSpec {
    /// Requests per second refilled.
    pub per_second: f64,
    /// Bucket size.
    pub burst: u32,
}

fn default_region() -> String {
    "us-east-1".to_owned()
}
fn default_account() -> String {
    "123456789012".to_owned()
}
fn default_types_page() -> u32 {
    100
}
fn default_unattached_limit() -> u32 {
    50
}
fn yes() -> bool {
    true
}

impl Default for Scenario {
    fn default() -> Self {
        serde_json::from_str("{}").expect("every field has a default")
    }
}

impl Scenario {
    /// An empty estate in `region`.
    #[must_use]
    pub fn new(region: &str) -> Self {
        Self {
            region: region.to_owned(),
            ..Self::default()
        }
    }

    /// Read a scenario file (YAML or JSON); a relative `policyFile` is taken beside it.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn from_file(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut s: Self = serde_norway::from_str(&text).map_err(|source| ScenarioError::Parse {
            origin: path.display().to_string(),
            source,
        })?;
        if let Some(file) = &s.policy_file
            && Path::new(file).is_relative()
            && let Some(dir) = path.parent()
        {
            s.policy_file = Some(dir.join(file).to_string_lossy().into_owned());
        }
        Ok(s)
    }

    /// Parse a scenario from YAML (JSON is YAML too).
    ///
    /// # Errors
    /// Not a valid scenario.
    pub fn from_yaml(text: &str) -> Result<Self, ScenarioError> {
        serde_norway::from_str(text).map_err(|source| ScenarioError::Parse {
            origin: "text".to_owned(),
            source,
        })
    }

    /// The policy documents in effect: `policyFile` (if any) then `policy`.
    ///
    /// # Errors
    /// The policy file cannot be read or is not JSON.
    pub fn load_policies(&self) -> Result<Vec<Value>, ScenarioError> {
        let mut docs = Vec::new();
        if let Some(file) = &self.policy_file {
            let policy = |source: Box<dyn std::error::Error + Send + Sync>| ScenarioError::Policy {
                path: file.clone(),
                source,
            };
            let text = std::fs::read_to_string(file).map_err(|e| policy(e.into()))?;
            docs.push(serde_json::from_str(&text).map_err(|e| policy(e.into()))?);
        }
        docs.extend(self.policy.clone());
        Ok(docs)
    }
}

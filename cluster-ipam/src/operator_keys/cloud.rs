//! The rows of the cloud modes: Azure's, AWS ENI's, and the knobs every cloud shares.

use super::{
    AZURE, CIDR_LIST, CLOUD, DEFAULT_IMDS_ENDPOINT,
    DefaultValue::{Empty, Value},
    ENI, KeyDoc, MAP, SWITCH, VALUE, op, weft,
};

/// `azure-subscription-id`.
pub const AZURE_SUBSCRIPTION_ID: KeyDoc = op(
    "azure-subscription-id",
    Empty("the operator's VM's, from IMDS"),
    AZURE,
    "subscription of the nodes",
)
.flag(VALUE);

/// `azure-resource-group`.
pub const AZURE_RESOURCE_GROUP: KeyDoc = op(
    "azure-resource-group",
    Empty("the operator's VM's, from IMDS"),
    AZURE,
    "resource group of the nodes' VMs or scale sets (AKS: `MC_…`)",
)
.flag(VALUE);

/// `azure-user-assigned-identity-id`.
pub const AZURE_USER_ASSIGNED_IDENTITY_ID: KeyDoc = op(
    "azure-user-assigned-identity-id",
    Empty("none"),
    AZURE,
    "client ID (a UUID) of a user-assigned managed identity",
)
.flag(VALUE);

/// `azure-use-primary-address`.
pub const AZURE_USE_PRIMARY_ADDRESS: KeyDoc = op(
    "azure-use-primary-address",
    Value("false"),
    AZURE,
    "hand out the NICs' primary addresses too",
)
.flag(SWITCH);

/// `azure-arm-endpoint`.
pub const AZURE_ARM_ENDPOINT: KeyDoc = weft(
    "azure-arm-endpoint",
    Empty("the cloud's, from IMDS `azEnvironment`"),
    AZURE,
    "none",
    "Azure Resource Manager at another URL (Azure Stack, an emulator)",
)
.flag(VALUE);

/// `azure-imds-endpoint`.
pub const AZURE_IMDS_ENDPOINT: KeyDoc = weft(
    "azure-imds-endpoint",
    Value(DEFAULT_IMDS_ENDPOINT),
    AZURE,
    "none",
    "Instance Metadata Service at another URL",
)
.flag(VALUE);

/// `azure-release-excess-ips`.
pub const AZURE_RELEASE_EXCESS_IPS: KeyDoc = weft(
    "azure-release-excess-ips",
    Value("false"),
    AZURE,
    "cilium-operator never releases on Azure",
    "release addresses beyond a node's watermarks",
)
.flag(SWITCH);

/// `limit-ipam-api-qps`.
pub const LIMIT_IPAM_API_QPS: KeyDoc = op(
    "limit-ipam-api-qps",
    Value("4.0"),
    CLOUD,
    "cloud API requests per second",
)
.flag(VALUE);

/// `limit-ipam-api-burst`.
pub const LIMIT_IPAM_API_BURST: KeyDoc = op(
    "limit-ipam-api-burst",
    Value("20"),
    CLOUD,
    "cloud API requests allowed in a burst",
)
.flag(VALUE);

/// `parallel-alloc-workers`.
pub const PARALLEL_ALLOC_WORKERS: KeyDoc = op(
    "parallel-alloc-workers",
    Value("50"),
    CLOUD,
    "nodes resolved at once",
)
.flag(VALUE);

/// `aws-release-excess-ips`.
pub const AWS_RELEASE_EXCESS_IPS: KeyDoc = op(
    "aws-release-excess-ips",
    Value("false"),
    ENI,
    "release addresses beyond a node's watermarks: what a 1.20+ agent left out of `spec.ipam.pools.allocated` after `excess-ip-release-delay`, a 1.19 agent's through the `release-ips` handshake",
)
.flag(SWITCH);

/// `excess-ip-release-delay`.
pub const EXCESS_IP_RELEASE_DELAY: KeyDoc = op(
    "excess-ip-release-delay",
    Value("180"),
    ENI,
    "seconds a CIDR a 1.20+ agent gave back stays attached before it is released (a duration such as 3m also works)",
)
.flag(VALUE);

/// `aws-enable-prefix-delegation`.
pub const AWS_ENABLE_PREFIX_DELEGATION: KeyDoc = op(
    "aws-enable-prefix-delegation",
    Value("false"),
    ENI,
    "allocate /28 prefixes on Nitro and bare-metal instances (falling back to addresses when a subnet has no free /28)",
)
.flag(SWITCH);

/// `eni-tags`.
pub const ENI_TAGS: KeyDoc = op(
    "eni-tags",
    Empty("none"),
    ENI,
    "tags of every ENI the operator creates (k1=v1,k2=v2)",
)
.flag(MAP);

/// `eni-gc-interval`.
pub const ENI_GC_INTERVAL: KeyDoc = op(
    "eni-gc-interval",
    Value("5m0s"),
    ENI,
    "how often leaked ENIs (detached, with the GC tags) are looked for; deleted when seen twice (0: no GC)",
)
.flag(VALUE);

/// `eni-gc-tags`.
pub const ENI_GC_TAGS: KeyDoc = op(
    "eni-gc-tags",
    Empty("`io.cilium/cilium-managed=true,io.cilium/cluster-name=<cluster>`"),
    ENI,
    "the tags of ENIs the GC may delete, also put on every ENI created (k1=v1,k2=v2)",
)
.flag(MAP);

/// `cluster-name`.
pub const CLUSTER_NAME: KeyDoc = op(
    "cluster-name",
    Value("default"),
    ENI,
    "the cluster's name in the default GC tags (`default`: the instance's `aws:eks:cluster-name` tag if any)",
)
.flag(VALUE);

/// `ec2-api-endpoint`.
pub const EC2_API_ENDPOINT: KeyDoc = weft(
    "ec2-api-endpoint",
    Empty("`ec2.<region>.amazonaws.com`"),
    ENI,
    "a host, always over https",
    "the EC2 API at another place: a URL (`http://` allowed, for an emulator or moto) or a host (https)",
)
.flag(VALUE);

/// `aws-max-results-per-call`.
pub const AWS_MAX_RESULTS_PER_CALL: KeyDoc = op(
    "aws-max-results-per-call",
    Value("0"),
    ENI,
    "`MaxResults` of EC2 listings (0: none, until EC2 asks for paging; then 1000)",
)
.flag(VALUE);

/// `subnet-ids-filter`.
pub const SUBNET_IDS_FILTER: KeyDoc = op(
    "subnet-ids-filter",
    Empty("none"),
    ENI,
    "read only these subnets (list)",
)
.flag(CIDR_LIST);

/// `subnet-tags-filter`.
pub const SUBNET_TAGS_FILTER: KeyDoc = op(
    "subnet-tags-filter",
    Empty("none"),
    ENI,
    "read only subnets with these tags (k1=v1,k2=v2)",
)
.flag(MAP);

/// `instance-tags-filter`.
pub const INSTANCE_TAGS_FILTER: KeyDoc = op(
    "instance-tags-filter",
    Empty("none"),
    ENI,
    "read only the ENIs of instances with these tags (k1=v1,k2=v2)",
)
.flag(MAP);

/// `aws-region`.
pub const AWS_REGION: KeyDoc = weft(
    "aws-region",
    Empty("`AWS_REGION`, `AWS_DEFAULT_REGION`, else IMDS"),
    ENI,
    "always from IMDS",
    "the EC2 region",
)
.flag(VALUE);

/// `aws-vpc-id`.
pub const AWS_VPC_ID: KeyDoc = weft(
    "aws-vpc-id",
    Empty("the operator's own VPC, from IMDS (none: every VPC)"),
    ENI,
    "always from IMDS",
    "the VPC whose subnets, route tables and security groups are read",
)
.flag(VALUE);

/// `aws-imds-endpoint`.
pub const AWS_IMDS_ENDPOINT: KeyDoc = weft(
    "aws-imds-endpoint",
    Value(DEFAULT_IMDS_ENDPOINT),
    ENI,
    "none",
    "the instance metadata service at another URL",
)
.flag(VALUE);

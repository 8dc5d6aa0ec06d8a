//! The operator's configuration table, as data: every setting `weft-operator` reads from a flag
//! or the same cilium-config key (name, default, the operator modes that read it, Cilium's
//! equivalent, a one-line meaning, the flag's shape), and the operator's IPAM mode enum the rows
//! name. Here rather than in the operator because the agent reads the same ConfigMap and must
//! know these names too. The operator binds each row to the code that reads its value; nothing
//! here parses a value.

use weft_k8s::config_ref::Modes as ModesOf;
pub use weft_k8s::config_ref::{Cilium, DefaultValue, Flag};

/// Which allocator `weft-operator` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpamMode {
    /// Per-node pod CIDRs from the cluster pool (`spec.ipam.podCIDRs`).
    ClusterPool,
    /// Per-node blocks of CiliumPodIPPools (`spec.ipam.pools.allocated`).
    MultiPool,
    /// Addresses on the nodes' Azure NICs (`spec.ipam.pool`), through Azure Resource Manager.
    Azure,
    /// Addresses on the nodes' AWS ENIs (`status.eni.enis`), through the EC2 API.
    Eni,
}

impl IpamMode {
    /// Every mode.
    pub const ALL: [Self; 4] = [Self::ClusterPool, Self::MultiPool, Self::Azure, Self::Eni];

    /// The mode's value of the `ipam` key.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ClusterPool => "cluster-pool",
            Self::MultiPool => "multi-pool",
            Self::Azure => "azure",
            Self::Eni => "eni",
        }
    }
}

/// Which operator modes read a setting.
pub type Modes = ModesOf<IpamMode>;

/// One setting's row (the shared shape, over the operator's modes).
pub type KeyDoc = weft_k8s::config_ref::KeyDoc<IpamMode>;

/// Cilium's default `--operator-prometheus-serve-addr`.
pub const DEFAULT_PROMETHEUS_ADDR: &str = ":9963";
/// Cilium's default `--operator-api-serve-addr`.
pub const DEFAULT_API_ADDR: &str = "localhost:9234";
/// The default Instance Metadata Service address.
pub const DEFAULT_IMDS_ENDPOINT: &str = "http://169.254.169.254";

const fn op(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    meaning: &'static str,
) -> KeyDoc {
    KeyDoc::new(key, default, modes, Cilium::Operator, meaning)
}

const fn weft(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    cilium: &'static str,
    meaning: &'static str,
) -> KeyDoc {
    KeyDoc::new(key, default, modes, Cilium::Weft(cilium), meaning)
}

/// A flag with a value.
const VALUE: Flag = Flag::Value;
/// A boolean flag: alone it means true; a value only with `=` (`--leader-election=false`).
const SWITCH: Flag = Flag::Switch {
    require_equals: true,
};
/// A list of CIDRs: the flag repeated, or values separated by commas.
const CIDR_LIST: Flag = Flag::List {
    delimiter: Some(','),
};

const AZURE: Modes = Modes::Only(&[IpamMode::Azure]);
const ENI: Modes = Modes::Only(&[IpamMode::Eni]);
const CLOUD: Modes = Modes::Only(&[IpamMode::Azure, IpamMode::Eni]);
/// A map: `k1=v1,k2=v2` (the flag may be repeated).
const MAP: Flag = Flag::List {
    delimiter: Some(','),
};
const CLUSTER_POOL: Modes = Modes::Only(&[IpamMode::ClusterPool]);
const MULTI_POOL: &[IpamMode] = &[IpamMode::MultiPool];

use DefaultValue::{Empty, Value};

/// `ipam`.
pub const IPAM: KeyDoc = op(
    "ipam",
    Value("cluster-pool"),
    Modes::All,
    "IPAM mode: cluster-pool, multi-pool, azure or eni",
)
.flag(VALUE);

/// `cluster-pool-ipv4-cidr`.
pub const CLUSTER_POOL_IPV4_CIDR: KeyDoc = op(
    "cluster-pool-ipv4-cidr",
    Empty("none; required with IPv4"),
    CLUSTER_POOL,
    "cluster CIDRs IPv4 node blocks are carved from (list)",
)
.flag(CIDR_LIST);

/// `cluster-pool-ipv4-mask-size`.
pub const CLUSTER_POOL_IPV4_MASK_SIZE: KeyDoc = op(
    "cluster-pool-ipv4-mask-size",
    Value("24"),
    CLUSTER_POOL,
    "prefix length of each node's IPv4 block",
)
.flag(VALUE);

/// `cluster-pool-ipv6-cidr`.
pub const CLUSTER_POOL_IPV6_CIDR: KeyDoc = op(
    "cluster-pool-ipv6-cidr",
    Empty("none; required with IPv6"),
    CLUSTER_POOL,
    "cluster CIDRs IPv6 node blocks are carved from (list)",
)
.flag(CIDR_LIST);

/// `cluster-pool-ipv6-mask-size`.
pub const CLUSTER_POOL_IPV6_MASK_SIZE: KeyDoc = op(
    "cluster-pool-ipv6-mask-size",
    Value("112"),
    CLUSTER_POOL,
    "prefix length of each node's IPv6 block",
)
.flag(VALUE);

/// `auto-create-cilium-pod-ip-pools`.
pub const AUTO_CREATE_CILIUM_POD_IP_POOLS: KeyDoc = op(
    "auto-create-cilium-pod-ip-pools",
    Empty("none"),
    Modes::Only(MULTI_POOL),
    "CiliumPodIPPools to create at start when missing, \
         `<pool>=ipv4-cidrs:<cidr>;ipv4-mask-size:<n>…`",
)
.flag(Flag::List { delimiter: None });

/// `ipam-default-ip-pool`.
pub const IPAM_DEFAULT_IP_POOL: KeyDoc = op(
    "ipam-default-ip-pool",
    Value("default"),
    Modes::Only(MULTI_POOL),
    "the pool migrated podCIDRs go into; the same as the agents' ipam-default-ip-pool",
)
.flag(VALUE);

/// `enable-cluster-pool-to-multi-pool-migration`.
pub const ENABLE_CLUSTER_POOL_TO_MULTI_POOL_MIGRATION: KeyDoc = op(
    "enable-cluster-pool-to-multi-pool-migration",
    Value("false"),
    Modes::Only(MULTI_POOL),
    "at start, before any block is handed out, move each CiliumNode's `spec.ipam.podCIDRs` into \
         `spec.ipam.pools.allocated` of ipam-default-ip-pool (docs/operator.md)",
)
.flag(SWITCH);

/// `multi-pool-migration-workers`.
pub const MULTI_POOL_MIGRATION_WORKERS: KeyDoc = op(
    "multi-pool-migration-workers",
    Value("16"),
    Modes::Only(MULTI_POOL),
    "CiliumNodes migrated at once by enable-cluster-pool-to-multi-pool-migration",
)
.flag(VALUE);

/// `enable-ipv4`.
pub const ENABLE_IPV4: KeyDoc = op(
    "enable-ipv4",
    Value("true"),
    Modes::All,
    "hand out IPv4 blocks",
)
.flag(SWITCH);

/// `enable-ipv6`.
pub const ENABLE_IPV6: KeyDoc = op(
    "enable-ipv6",
    Value("false"),
    Modes::All,
    "hand out IPv6 blocks",
)
.flag(SWITCH);

/// `operator-prometheus-serve-addr`.
pub const OPERATOR_PROMETHEUS_SERVE_ADDR: KeyDoc = op(
    "operator-prometheus-serve-addr",
    Value(DEFAULT_PROMETHEUS_ADDR),
    Modes::All,
    "where `/metrics` is served (with enable-metrics)",
)
.flag(VALUE);

/// `operator-api-serve-addr`.
pub const OPERATOR_API_SERVE_ADDR: KeyDoc = op(
    "operator-api-serve-addr",
    Value(DEFAULT_API_ADDR),
    Modes::All,
    "where `/healthz` is served",
)
.flag(VALUE);

/// `enable-metrics`.
pub const ENABLE_METRICS: KeyDoc = op(
    "enable-metrics",
    Value("false"),
    Modes::All,
    "serve Prometheus metrics",
)
.flag(SWITCH);

/// `leader-election`.
pub const LEADER_ELECTION: KeyDoc = weft(
    "leader-election",
    Value("true"),
    Modes::All,
    "cilium-operator always elects a leader",
    "elect a leader among replicas; false for a single replica",
)
.flag(SWITCH);

/// `leader-election-lease-duration`.
pub const LEADER_ELECTION_LEASE_DURATION: KeyDoc = op(
    "leader-election-lease-duration",
    Value("15s"),
    Modes::All,
    "a lease not renewed for this long may be taken over",
)
.flag(VALUE);

/// `leader-election-renew-deadline`.
pub const LEADER_ELECTION_RENEW_DEADLINE: KeyDoc = op(
    "leader-election-renew-deadline",
    Value("10s"),
    Modes::All,
    "the leader exits when it could not renew for this long",
)
.flag(VALUE);

/// `leader-election-retry-period`.
pub const LEADER_ELECTION_RETRY_PERIOD: KeyDoc = op(
    "leader-election-retry-period",
    Value("2s"),
    Modes::All,
    "wait between two attempts to acquire or renew",
)
.flag(VALUE);

/// `leader-election-namespace`.
pub const LEADER_ELECTION_NAMESPACE: KeyDoc = weft(
    "leader-election-namespace",
    Value("kube-system"),
    Modes::All,
    "cilium-operator uses its own namespace",
    "namespace of the Lease `weft-operator-resource-lock` (env `POD_NAMESPACE`)",
)
.flag(VALUE)
.env("POD_NAMESPACE");

/// `nodes-gc-interval`.
pub const NODES_GC_INTERVAL: KeyDoc = op(
    "nodes-gc-interval",
    Value("5m0s"),
    Modes::All,
    "CiliumNodes without a Node for two passes are deleted (0: never)",
)
.flag(VALUE);

/// `identity-gc-interval`.
pub const IDENTITY_GC_INTERVAL: KeyDoc = op(
    "identity-gc-interval",
    Value("15m0s"),
    Modes::All,
    "how often unused CiliumIdentities are marked, then deleted (0: never)",
)
.flag(VALUE);

/// `identity-heartbeat-timeout`.
pub const IDENTITY_HEARTBEAT_TIMEOUT: KeyDoc = op(
    "identity-heartbeat-timeout",
    Value("30m0s"),
    Modes::All,
    "an identity no CiliumEndpoint used for this long is marked; a marked one still \
         unused this long after is deleted",
)
.flag(VALUE);

/// `identity-gc-rate-interval`.
pub const IDENTITY_GC_RATE_INTERVAL: KeyDoc = op(
    "identity-gc-rate-interval",
    Value("1m0s"),
    Modes::All,
    "interval of the identity deletion rate limit",
)
.flag(VALUE);

/// `identity-gc-rate-limit`.
pub const IDENTITY_GC_RATE_LIMIT: KeyDoc = op(
    "identity-gc-rate-limit",
    Value("2500"),
    Modes::All,
    "identities deleted at most per identity-gc-rate-interval",
)
.flag(VALUE);

/// `debug`.
pub const DEBUG: KeyDoc = op(
    weft_k8s::telemetry::KEYS[0],
    Value("false"),
    Modes::All,
    "log debug messages (log-level wins when both are set; `RUST_LOG` beats both)",
)
.flag(Flag::None);

/// `log-level`.
pub const LOG_LEVEL: KeyDoc = op(
    weft_k8s::telemetry::KEYS[1],
    Value("info"),
    Modes::All,
    "trace, debug, info, warn or error (`RUST_LOG`, when set, wins)",
)
.flag(Flag::None);

/// `log-format`.
pub const LOG_FORMAT: KeyDoc = op(
    weft_k8s::telemetry::KEYS[2],
    Value("text-ts"),
    Modes::All,
    "text, text-ts, json or json-ts (`-ts`: with a timestamp)",
)
.flag(Flag::None);

mod cloud;

pub use self::cloud::{
    AWS_ENABLE_PREFIX_DELEGATION, AWS_IMDS_ENDPOINT, AWS_MAX_RESULTS_PER_CALL, AWS_REGION,
    AWS_RELEASE_EXCESS_IPS, AWS_VPC_ID, AZURE_ARM_ENDPOINT, AZURE_IMDS_ENDPOINT,
    AZURE_RELEASE_EXCESS_IPS, AZURE_RESOURCE_GROUP, AZURE_SUBSCRIPTION_ID,
    AZURE_USE_PRIMARY_ADDRESS, AZURE_USER_ASSIGNED_IDENTITY_ID, CLUSTER_NAME, EC2_API_ENDPOINT,
    ENI_GC_INTERVAL, ENI_GC_TAGS, ENI_TAGS, EXCESS_IP_RELEASE_DELAY, INSTANCE_TAGS_FILTER,
    LIMIT_IPAM_API_BURST, LIMIT_IPAM_API_QPS, PARALLEL_ALLOC_WORKERS, SUBNET_IDS_FILTER,
    SUBNET_TAGS_FILTER,
};

/// Every setting of `weft-operator`, in the order of the documentation.
pub const KEYS: [KeyDoc; 52] = [
    IPAM,
    CLUSTER_POOL_IPV4_CIDR,
    CLUSTER_POOL_IPV4_MASK_SIZE,
    CLUSTER_POOL_IPV6_CIDR,
    CLUSTER_POOL_IPV6_MASK_SIZE,
    AUTO_CREATE_CILIUM_POD_IP_POOLS,
    IPAM_DEFAULT_IP_POOL,
    ENABLE_CLUSTER_POOL_TO_MULTI_POOL_MIGRATION,
    MULTI_POOL_MIGRATION_WORKERS,
    ENABLE_IPV4,
    ENABLE_IPV6,
    OPERATOR_PROMETHEUS_SERVE_ADDR,
    OPERATOR_API_SERVE_ADDR,
    ENABLE_METRICS,
    LEADER_ELECTION,
    LEADER_ELECTION_LEASE_DURATION,
    LEADER_ELECTION_RENEW_DEADLINE,
    LEADER_ELECTION_RETRY_PERIOD,
    LEADER_ELECTION_NAMESPACE,
    NODES_GC_INTERVAL,
    IDENTITY_GC_INTERVAL,
    IDENTITY_HEARTBEAT_TIMEOUT,
    IDENTITY_GC_RATE_INTERVAL,
    IDENTITY_GC_RATE_LIMIT,
    AZURE_SUBSCRIPTION_ID,
    AZURE_RESOURCE_GROUP,
    AZURE_USER_ASSIGNED_IDENTITY_ID,
    AZURE_USE_PRIMARY_ADDRESS,
    AZURE_ARM_ENDPOINT,
    AZURE_IMDS_ENDPOINT,
    AZURE_RELEASE_EXCESS_IPS,
    LIMIT_IPAM_API_QPS,
    LIMIT_IPAM_API_BURST,
    PARALLEL_ALLOC_WORKERS,
    AWS_RELEASE_EXCESS_IPS,
    EXCESS_IP_RELEASE_DELAY,
    AWS_ENABLE_PREFIX_DELEGATION,
    ENI_TAGS,
    ENI_GC_INTERVAL,
    ENI_GC_TAGS,
    CLUSTER_NAME,
    EC2_API_ENDPOINT,
    AWS_MAX_RESULTS_PER_CALL,
    SUBNET_IDS_FILTER,
    SUBNET_TAGS_FILTER,
    INSTANCE_TAGS_FILTER,
    AWS_REGION,
    AWS_VPC_ID,
    AWS_IMDS_ENDPOINT,
    DEBUG,
    LOG_LEVEL,
    LOG_FORMAT,
];

/// The row of `key`, if it is one.
#[must_use]
pub fn lookup(key: &str) -> Option<&'static KeyDoc> {
    weft_k8s::config_ref::lookup(&KEYS, |row| row, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_one_row() {
        for row in &KEYS {
            let rows = KEYS.iter().filter(|other| other.key == row.key).count();
            assert_eq!(rows, 1, "{}: {rows} rows", row.key);
            assert!(!row.meaning.is_empty(), "{}: no meaning", row.key);
        }
    }
}

//! The operator's resolved configuration: each setting from its flag, else from the same
//! cilium-config key in `--config-dir`, else Cilium's default. The settings are the rows of
//! `weft_cluster_ipam::operator_keys`, each bound to the code that reads it ([`bind`]). Pure
//! (the caller reads the directory); every refusal names the key and what it accepts.

use std::{collections::BTreeMap, net::SocketAddr, time::Duration};

use ipnet::IpNet;
pub use weft_cluster_ipam::operator_keys::{DEFAULT_API_ADDR, DEFAULT_PROMETHEUS_ADDR, IpamMode};
use weft_cluster_ipam::{
    Family,
    cidrset::CidrSetError,
    clusterpool::ClusterPoolConfig,
    multipool::{MultiPoolError, PoolSpec},
    operator_keys::{
        LEADER_ELECTION_LEASE_DURATION, LEADER_ELECTION_RENEW_DEADLINE,
        LEADER_ELECTION_RETRY_PERIOD,
    },
};

use crate::cli::Cli;

/// The leader-election Lease's name (Cilium's is `cilium-operator-resource-lock`).
pub const LEASE_NAME: &str = "weft-operator-resource-lock";

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A value does not parse.
    #[error("{key}: {value:?} is not {expected}")]
    Invalid {
        /// The flag / config key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What it accepts.
        expected: &'static str,
    },
    /// `azure-user-assigned-identity-id` is an ARM resource ID where the client ID belongs.
    #[error(
        "--{key} {id:?} is an ARM resource ID, but the client ID (a UUID) of the identity is \
         expected: find it with `az identity show --ids {id} --query clientId`, or in the Azure \
         portal on the identity's Overview page as \"Client ID\""
    )]
    ResourceIdAsClientId {
        /// The key (`azure-user-assigned-identity-id`).
        key: &'static str,
        /// The value given.
        id: String,
    },
    /// The IPAM mode is not one the operator serves.
    #[error(
        "{key}: {value:?} is not served by weft-operator; use cluster-pool, multi-pool, azure or \
         eni (other modes need no operator or come later)"
    )]
    Mode {
        /// The key (`ipam`).
        key: &'static str,
        /// The value given.
        value: String,
    },
    /// An `auto-create-cilium-pod-ip-pools` entry is malformed.
    #[error(
        "{key}: {entry:?}: {fault}; expected \
         <pool>=ipv4-cidrs:<cidr>[,<cidr>...];ipv4-mask-size:<n>[;ipv6-cidrs:...;ipv6-mask-size:<n>]"
    )]
    AutoCreate {
        /// The key (`auto-create-cilium-pod-ip-pools`).
        key: &'static str,
        /// The entry.
        entry: String,
        /// What is wrong.
        #[source]
        fault: auto_create::AutoCreateFault,
    },
    /// An `auto-create-cilium-pod-ip-pools` pool the allocator would refuse (nothing is
    /// created then).
    #[error("{key}: pool {pool:?}, {field}: {source}{fix}")]
    AutoCreatePool {
        /// The key (`auto-create-cilium-pod-ip-pools`).
        key: &'static str,
        /// The pool.
        pool: String,
        /// The part of the entry to fix (`ipv4-mask-size`, `ipv6-cidrs`, …).
        field: String,
        /// How to fix it (starts with `; `), or empty where the source says it.
        fix: String,
        /// Why the allocator refuses it.
        #[source]
        source: Box<MultiPoolError>,
    },
    /// The leader-election durations do not nest.
    #[error(
        "{} ({lease:?}) must be longer than {} ({renew:?}), which must be longer than {} \
         ({retry:?})",
        LEADER_ELECTION_LEASE_DURATION.key,
        LEADER_ELECTION_RENEW_DEADLINE.key,
        LEADER_ELECTION_RETRY_PERIOD.key
    )]
    LeaderDurations {
        /// Lease duration.
        lease: Duration,
        /// Renew deadline.
        renew: Duration,
        /// Retry period.
        retry: Duration,
    },
}

/// The cluster-pool → multi-pool migration's settings (multi-pool only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationConfig {
    /// `enable-cluster-pool-to-multi-pool-migration` (default false).
    pub enabled: bool,
    /// `multi-pool-migration-workers` (default 16): CiliumNodes updated at once.
    pub workers: usize,
    /// `ipam-default-ip-pool` (default `default`): the pool the podCIDRs move into.
    pub default_pool: String,
}

impl Default for MigrationConfig {
    /// Cilium's defaults.
    fn default() -> Self {
        Self {
            enabled: false,
            workers: 16,
            default_pool: "default".to_owned(),
        }
    }
}

/// Leader-election timing (client-go's and Cilium's defaults: 15s / 10s / 2s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderTiming {
    /// A lease not renewed for this long may be taken over.
    pub lease_duration: Duration,
    /// The leader gives up (and exits) when it could not renew for this long.
    pub renew_deadline: Duration,
    /// Wait between attempts.
    pub retry_period: Duration,
}

/// Everything the operator runs with.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "mirrors Cilium's boolean flags"
)]
pub struct OperatorConfig {
    /// `ipam`.
    pub ipam: IpamMode,
    /// `enable-ipv4` (default true).
    pub enable_ipv4: bool,
    /// `enable-ipv6` (default false).
    pub enable_ipv6: bool,
    /// The cluster-pool settings (`cluster-pool-*`).
    pub cluster_pool: ClusterPoolConfig,
    /// `auto-create-cilium-pod-ip-pools`, by pool name.
    pub auto_create_pools: BTreeMap<String, PoolSpec>,
    /// `ipam-default-ip-pool`, `enable-cluster-pool-to-multi-pool-migration`,
    /// `multi-pool-migration-workers`.
    pub migration: MigrationConfig,
    /// `operator-prometheus-serve-addr`.
    pub prometheus_addr: SocketAddr,
    /// `operator-api-serve-addr`.
    pub api_addr: SocketAddr,
    /// `enable-metrics`.
    pub enable_metrics: bool,
    /// `leader-election`.
    pub leader_election: bool,
    /// `leader-election-*`.
    pub leader: LeaderTiming,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// `nodes-gc-interval` (zero: off).
    pub nodes_gc_interval: Duration,
    /// The Azure settings (read in every mode, used in `azure`).
    pub azure: AzureConfig,
    /// The settings of every cloud provider (read in every mode, used in the cloud modes).
    pub cloud: CloudConfig,
    /// The AWS ENI settings (read in every mode, used in `eni`).
    pub eni: EniConfig,
    /// `identity-gc-interval`, `identity-heartbeat-timeout`, `identity-gc-rate-*`.
    pub identity_gc: crate::identitygc::Settings,
}

impl Default for OperatorConfig {
    /// Cilium's defaults, as with no flag and no key.
    fn default() -> Self {
        Self {
            ipam: IpamMode::ClusterPool,
            enable_ipv4: true,
            enable_ipv6: false,
            cluster_pool: ClusterPoolConfig::default(),
            auto_create_pools: BTreeMap::new(),
            migration: MigrationConfig::default(),
            prometheus_addr: bind::parse_addr(DEFAULT_PROMETHEUS_ADDR)
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 9963))),
            api_addr: bind::parse_addr(DEFAULT_API_ADDR)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9234))),
            enable_metrics: false,
            leader_election: true,
            leader: LeaderTiming {
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
            },
            lease_namespace: "kube-system".to_owned(),
            nodes_gc_interval: Duration::from_mins(5),
            azure: AzureConfig::default(),
            eni: EniConfig::default(),
            cloud: CloudConfig::default(),
            identity_gc: crate::identitygc::Settings::default(),
        }
    }
}

impl OperatorConfig {
    /// Resolve `cli` over the config directory's keys `file`.
    ///
    /// # Errors
    /// A value that does not parse, an unserved mode, a malformed pool definition or
    /// leader-election durations that do not nest. Cluster-pool CIDR rules (family, collisions,
    /// mask sizes) are the allocator's and are checked when it is built.
    pub fn resolve(cli: &Cli, file: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        for binding in &bind::BINDINGS {
            let key = binding.doc.key;
            let flag = cli.keys.given(key);
            let file_value;
            let (values, from_file) = if !flag.is_empty() {
                (flag, false)
            } else if let Some(value) = file.get(key) {
                file_value = [value.clone()];
                (&file_value[..], true)
            } else {
                continue;
            };
            (binding.apply)(
                &mut config,
                bind::Given {
                    key,
                    values,
                    from_file,
                },
            )?;
        }
        config.cluster_pool.ipv4.enabled = config.enable_ipv4;
        config.cluster_pool.ipv6.enabled = config.enable_ipv6;
        check_leader(config.leader)?;
        Ok(config)
    }
}

/// [`ConfigError::AutoCreatePool`] for `source`, naming the entry's field and the fix.
fn auto_create_refused(key: &'static str, pool: &str, source: MultiPoolError) -> ConfigError {
    let (field, fix) = match &source {
        MultiPoolError::Cidrs { source: set, .. } => {
            let family = |cidr: &IpNet| Family::of(cidr).flag_name();
            match set {
                CidrSetError::MaskSizeInvalid { cluster, .. }
                | CidrSetError::MaskShorterThanCluster { cluster, .. } => {
                    (format!("{}-mask-size", family(cluster)), String::new())
                }
                CidrSetError::SubnetTooBig { cluster, .. } => (
                    format!("{}-mask-size", family(cluster)),
                    format!(
                        "; a mask size may be at most 16 bits longer than the CIDR's prefix                          (here at most /{})",
                        cluster.prefix_len().saturating_add(16)
                    ),
                ),
                CidrSetError::WrongFamily { family: f, cidr } => (
                    format!("{}-cidrs", f.flag_name()),
                    format!("; list {cidr} under {}-cidrs", family(cidr)),
                ),
                CidrSetError::Collision { cidr, .. } => (
                    format!("{}-cidrs", family(cidr)),
                    "; list each range once, without overlaps".to_owned(),
                ),
                _ => ("cidrs".to_owned(), String::new()),
            }
        }
        _ => ("spec".to_owned(), String::new()),
    };
    ConfigError::AutoCreatePool {
        key,
        pool: pool.to_owned(),
        field,
        fix,
        source: Box::new(source),
    }
}

fn check_leader(leader: LeaderTiming) -> Result<(), ConfigError> {
    if leader.lease_duration <= leader.renew_deadline
        || leader.renew_deadline <= leader.retry_period
        || leader.retry_period.is_zero()
    {
        return Err(ConfigError::LeaderDurations {
            lease: leader.lease_duration,
            renew: leader.renew_deadline,
            retry: leader.retry_period,
        });
    }
    Ok(())
}

/// One `auto-create-cilium-pod-ip-pools` entry (Cilium's `pool_handler.go` format).
///
/// # Errors
/// [`ConfigError::AutoCreate`] naming the entry and what is wrong.
pub fn parse_auto_create(entry: &str) -> Result<(String, PoolSpec), ConfigError> {
    auto_create::parse(entry).map_err(|fault| ConfigError::AutoCreate {
        key: weft_cluster_ipam::operator_keys::AUTO_CREATE_CILIUM_POD_IP_POOLS.key,
        entry: entry.to_owned(),
        fault,
    })
}

pub mod auto_create;
mod azure;
mod bind;
mod cloud;
mod eni;
#[cfg(test)]
mod tests;

pub use self::{
    azure::{AzureConfig, DEFAULT_IMDS_ENDPOINT},
    cloud::CloudConfig,
    eni::{DEFAULT_CLUSTER_NAME, EniConfig, not_supported as eni_not_supported},
};

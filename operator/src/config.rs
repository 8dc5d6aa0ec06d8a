//! The operator's resolved configuration: each setting from its flag, else from the same
//! cilium-config key in `--config-dir`, else Cilium's default. Pure (the caller reads the
//! directory); every refusal names the key and what it accepts.

use std::{collections::BTreeMap, net::SocketAddr, str::FromStr, time::Duration};

use ipnet::IpNet;
use weft_cluster_ipam::{
    Family,
    cidrset::CidrSetError,
    clusterpool::{ClusterPoolConfig, FamilyConfig},
    multipool::{FamilySpec, MultiPoolError, PoolSpec, check_pool},
};
use weft_k8s::config_values::{parse_bool, parse_duration};

use crate::cli::Cli;

/// Cilium's default `--operator-prometheus-serve-addr`.
pub const DEFAULT_PROMETHEUS_ADDR: &str = ":9963";
/// Cilium's default `--operator-api-serve-addr`.
pub const DEFAULT_API_ADDR: &str = "localhost:9234";
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
    /// The IPAM mode is not one the operator serves.
    #[error(
        "ipam: {0:?} is not served by weft-operator; use cluster-pool, multi-pool or azure (other \
         modes need no operator or come later)"
    )]
    Mode(String),
    /// An `--auto-create-cilium-pod-ip-pools` entry is malformed.
    #[error(
        "auto-create-cilium-pod-ip-pools: {entry:?}: {reason}; expected \
         <pool>=ipv4-cidrs:<cidr>[,<cidr>...];ipv4-mask-size:<n>[;ipv6-cidrs:...;ipv6-mask-size:<n>]"
    )]
    AutoCreate {
        /// The entry.
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// An `--auto-create-cilium-pod-ip-pools` pool the allocator would refuse (nothing is
    /// created then).
    #[error("auto-create-cilium-pod-ip-pools: pool {pool:?}, {field}: {source}{fix}")]
    AutoCreatePool {
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
        "leader-election-lease-duration ({lease:?}) must be longer than \
         leader-election-renew-deadline ({renew:?}), which must be longer than \
         leader-election-retry-period ({retry:?})"
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

/// Which allocator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpamMode {
    /// Per-node pod CIDRs from the cluster pool (`spec.ipam.podCIDRs`).
    ClusterPool,
    /// Per-node blocks of CiliumPodIPPools (`spec.ipam.pools.allocated`).
    MultiPool,
    /// Addresses on the nodes' Azure NICs (`spec.ipam.pool`), through Azure Resource Manager.
    Azure,
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
    /// `identity-gc-interval`, `identity-heartbeat-timeout`, `identity-gc-rate-*`.
    pub identity_gc: crate::identitygc::Settings,
}

/// One setting: the flag's value, else the config key's.
struct Layers<'a> {
    file: &'a BTreeMap<String, String>,
}

impl Layers<'_> {
    fn get(&self, key: &'static str, flag: Option<&str>) -> Option<String> {
        flag.map(str::to_owned)
            .or_else(|| self.file.get(key).cloned())
    }

    fn list(&self, key: &'static str, flag: &[String]) -> Vec<String> {
        let raw: Vec<String> = if flag.is_empty() {
            self.file
                .get(key)
                .map(|v| vec![v.clone()])
                .unwrap_or_default()
        } else {
            flag.to_vec()
        };
        raw.iter()
            .flat_map(|v| v.split([',', ' ', '\n', '\t']))
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn bool(
        &self,
        key: &'static str,
        flag: Option<&str>,
        default: bool,
    ) -> Result<bool, ConfigError> {
        self.get(key, flag).map_or(Ok(default), |v| {
            parse_bool(&v).ok_or(ConfigError::Invalid {
                key,
                value: v,
                expected: "true or false",
            })
        })
    }

    fn duration(
        &self,
        key: &'static str,
        flag: Option<&str>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        self.get(key, flag).map_or(Ok(default), |v| {
            parse_duration(&v).ok_or(ConfigError::Invalid {
                key,
                value: v,
                expected: "a duration such as 15s or 1m30s",
            })
        })
    }

    fn number<T: FromStr>(
        &self,
        key: &'static str,
        flag: Option<&str>,
        default: T,
    ) -> Result<T, ConfigError> {
        self.get(key, flag).map_or(Ok(default), |v| {
            v.parse().map_err(|_| ConfigError::Invalid {
                key,
                value: v,
                expected: "a number",
            })
        })
    }

    fn addr(
        &self,
        key: &'static str,
        flag: Option<&str>,
        default: &str,
    ) -> Result<SocketAddr, ConfigError> {
        let v = self.get(key, flag).unwrap_or_else(|| default.to_owned());
        parse_addr(&v).ok_or(ConfigError::Invalid {
            key,
            value: v,
            expected: "an address such as :9963, localhost:9234 or 127.0.0.1:0",
        })
    }
}

/// Go-style listen addresses: `:9963` (every interface), `localhost:9234`, `[::1]:80`.
fn parse_addr(v: &str) -> Option<SocketAddr> {
    if let Some(port) = v.strip_prefix(':') {
        return Some(SocketAddr::from(([0, 0, 0, 0], port.parse().ok()?)));
    }
    if let Some(port) = v.strip_prefix("localhost:") {
        return Some(SocketAddr::from(([127, 0, 0, 1], port.parse().ok()?)));
    }
    v.parse().ok()
}

fn cidrs(key: &'static str, values: Vec<String>) -> Result<Vec<IpNet>, ConfigError> {
    values
        .into_iter()
        .map(|v| {
            v.parse().map_err(|_| ConfigError::Invalid {
                key,
                value: v,
                expected: "a CIDR such as 10.0.0.0/8",
            })
        })
        .collect()
}

impl OperatorConfig {
    /// Resolve `cli` over the config directory's keys `file`.
    ///
    /// # Errors
    /// A value that does not parse, an unserved mode, a malformed pool definition or
    /// leader-election durations that do not nest. Cluster-pool CIDR rules (family, collisions,
    /// mask sizes) are the allocator's and are checked when it is built.
    pub fn resolve(cli: &Cli, file: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let l = Layers { file };
        let ipam = match l.get("ipam", cli.ipam.as_deref()).as_deref() {
            None | Some("cluster-pool") => IpamMode::ClusterPool,
            Some("multi-pool") => IpamMode::MultiPool,
            Some("azure") => IpamMode::Azure,
            Some(other) => return Err(ConfigError::Mode(other.to_owned())),
        };
        let enable_ipv4 = l.bool("enable-ipv4", cli.enable_ipv4.as_deref(), true)?;
        let enable_ipv6 = l.bool("enable-ipv6", cli.enable_ipv6.as_deref(), false)?;
        let cluster_pool = ClusterPoolConfig {
            ipv4: FamilyConfig {
                enabled: enable_ipv4,
                cidrs: cidrs(
                    "cluster-pool-ipv4-cidr",
                    l.list("cluster-pool-ipv4-cidr", &cli.cluster_pool_ipv4_cidr),
                )?,
                mask_size: l.number(
                    "cluster-pool-ipv4-mask-size",
                    cli.cluster_pool_ipv4_mask_size.as_deref(),
                    24,
                )?,
            },
            ipv6: FamilyConfig {
                enabled: enable_ipv6,
                cidrs: cidrs(
                    "cluster-pool-ipv6-cidr",
                    l.list("cluster-pool-ipv6-cidr", &cli.cluster_pool_ipv6_cidr),
                )?,
                mask_size: l.number(
                    "cluster-pool-ipv6-mask-size",
                    cli.cluster_pool_ipv6_mask_size.as_deref(),
                    112,
                )?,
            },
        };
        let pools_raw = if cli.auto_create_cilium_pod_ip_pools.is_empty() {
            file.get("auto-create-cilium-pod-ip-pools")
                .map(|v| v.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default()
        } else {
            cli.auto_create_cilium_pod_ip_pools.clone()
        };
        let mut auto_create_pools = BTreeMap::new();
        for entry in pools_raw {
            let (name, spec) = parse_auto_create(&entry)?;
            check_pool(&name, &spec).map_err(|source| auto_create_refused(&name, source))?;
            auto_create_pools.insert(name, spec);
        }
        let leader = leader_timing(&l, cli)?;
        Ok(Self {
            ipam,
            enable_ipv4,
            enable_ipv6,
            cluster_pool,
            auto_create_pools,
            prometheus_addr: l.addr(
                "operator-prometheus-serve-addr",
                cli.operator_prometheus_serve_addr.as_deref(),
                DEFAULT_PROMETHEUS_ADDR,
            )?,
            api_addr: l.addr(
                "operator-api-serve-addr",
                cli.operator_api_serve_addr.as_deref(),
                DEFAULT_API_ADDR,
            )?,
            enable_metrics: l.bool("enable-metrics", cli.enable_metrics.as_deref(), false)?,
            leader_election: l.bool("leader-election", cli.leader_election.as_deref(), true)?,
            leader,
            lease_namespace: l
                .get(
                    "leader-election-namespace",
                    cli.leader_election_namespace.as_deref(),
                )
                .unwrap_or_else(|| "kube-system".to_owned()),
            nodes_gc_interval: l.duration(
                "nodes-gc-interval",
                cli.nodes_gc_interval.as_deref(),
                Duration::from_mins(5),
            )?,
            azure: AzureConfig::resolve(&l, cli)?,
            identity_gc: identity_gc(&l, cli)?,
        })
    }
}

/// [`ConfigError::AutoCreatePool`] for `source`, naming the entry's field and the fix.
fn auto_create_refused(pool: &str, source: MultiPoolError) -> ConfigError {
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
        pool: pool.to_owned(),
        field,
        fix,
        source: Box::new(source),
    }
}

fn identity_gc(l: &Layers<'_>, cli: &Cli) -> Result<crate::identitygc::Settings, ConfigError> {
    let default = crate::identitygc::Settings::default();
    Ok(crate::identitygc::Settings {
        interval: l.duration(
            "identity-gc-interval",
            cli.identity_gc_interval.as_deref(),
            default.interval,
        )?,
        heartbeat_timeout: l.duration(
            "identity-heartbeat-timeout",
            cli.identity_heartbeat_timeout.as_deref(),
            default.heartbeat_timeout,
        )?,
        rate_interval: l.duration(
            "identity-gc-rate-interval",
            cli.identity_gc_rate_interval.as_deref(),
            default.rate_interval,
        )?,
        rate_limit: l.number(
            "identity-gc-rate-limit",
            cli.identity_gc_rate_limit.as_deref(),
            default.rate_limit,
        )?,
    })
}

fn leader_timing(l: &Layers<'_>, cli: &Cli) -> Result<LeaderTiming, ConfigError> {
    let leader = LeaderTiming {
        lease_duration: l.duration(
            "leader-election-lease-duration",
            cli.leader_election_lease_duration.as_deref(),
            Duration::from_secs(15),
        )?,
        renew_deadline: l.duration(
            "leader-election-renew-deadline",
            cli.leader_election_renew_deadline.as_deref(),
            Duration::from_secs(10),
        )?,
        retry_period: l.duration(
            "leader-election-retry-period",
            cli.leader_election_retry_period.as_deref(),
            Duration::from_secs(2),
        )?,
    };
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
    Ok(leader)
}

/// One `--auto-create-cilium-pod-ip-pools` entry (Cilium's `pool_handler.go` format).
///
/// # Errors
/// [`ConfigError::AutoCreate`] naming the entry and what is wrong.
pub fn parse_auto_create(entry: &str) -> Result<(String, PoolSpec), ConfigError> {
    let bad = |reason: String| ConfigError::AutoCreate {
        entry: entry.to_owned(),
        reason,
    };
    let (name, body) = entry
        .split_once('=')
        .ok_or_else(|| bad("no `=` after the pool name".to_owned()))?;
    if name.is_empty() {
        return Err(bad("the pool name is empty".to_owned()));
    }
    let mut spec = PoolSpec::default();
    let (mut v4, mut v6) = ((None, None), (None, None));
    for part in body.split(';').filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once(':')
            .ok_or_else(|| bad(format!("{part:?} has no `:`")))?;
        let parse_cidrs = |value: &str| -> Result<Vec<IpNet>, ConfigError> {
            value
                .split(',')
                .map(|c| c.parse().map_err(|_| bad(format!("{c:?} is not a CIDR"))))
                .collect()
        };
        let parse_mask = |value: &str| -> Result<u8, ConfigError> {
            value
                .parse()
                .map_err(|_| bad(format!("{value:?} is not a mask size")))
        };
        let parse_flag = |value: &str| -> Result<bool, ConfigError> {
            parse_bool(value).ok_or_else(|| bad(format!("{value:?} is not true or false")))
        };
        match key {
            "ipv4-cidrs" => v4.0 = Some(parse_cidrs(value)?),
            "ipv4-mask-size" => v4.1 = Some(parse_mask(value)?),
            "ipv6-cidrs" => v6.0 = Some(parse_cidrs(value)?),
            "ipv6-mask-size" => v6.1 = Some(parse_mask(value)?),
            "allow-first-ip" => spec.allow_first_ip = parse_flag(value)?,
            "allow-last-ip" => spec.allow_last_ip = parse_flag(value)?,
            other => return Err(bad(format!("unknown key {other:?}"))),
        }
    }
    for (family, (cidrs, mask), slot) in
        [("ipv4", v4, &mut spec.ipv4), ("ipv6", v6, &mut spec.ipv6)]
    {
        match (cidrs, mask) {
            (Some(cidrs), Some(mask_size)) => *slot = Some(FamilySpec { cidrs, mask_size }),
            (None, None) => {}
            _ => {
                return Err(bad(format!(
                    "{family}-cidrs and {family}-mask-size go together"
                )));
            }
        }
    }
    if spec.ipv4.is_none() && spec.ipv6.is_none() {
        return Err(bad("no CIDRs".to_owned()));
    }
    Ok((name.to_owned(), spec))
}

mod azure;
pub mod reference;
#[cfg(test)]
mod tests;

pub use self::azure::{AzureConfig, DEFAULT_IMDS_ENDPOINT};

//! Each row of the operator's key table (`weft_cluster_ipam::operator_keys`) bound to the code
//! that reads its value into [`OperatorConfig`]: [`BINDINGS`]. [`Given`] is a row's key with the
//! values its flag or its `--config-dir` file gave, and its readers refuse a value of the wrong
//! form naming the row's key. Pure; it names no key (the rows do).

use std::{net::SocketAddr, str::FromStr, time::Duration};

use ipnet::IpNet;
use weft_cluster_ipam::operator_keys::{self as keys, IpamMode, KeyDoc};
use weft_k8s::config_values::{parse_bool, parse_duration};

use super::{ConfigError, OperatorConfig, auto_create, auto_create_refused};
use weft_cluster_ipam::multipool::check_pool;

/// A row's key with the values one source gave it.
#[derive(Clone, Copy, Debug)]
pub struct Given<'a> {
    /// The key (from its row).
    pub key: &'static str,
    /// The flag's values (a list flag may have several), or the file's one value.
    pub values: &'a [String],
    /// Whether the values come from the file (not the flag).
    pub from_file: bool,
}

impl Given<'_> {
    /// The value (the last one given).
    fn one(&self) -> String {
        self.values.last().cloned().unwrap_or_default()
    }

    fn bad(&self, value: String, expected: &'static str) -> ConfigError {
        ConfigError::Invalid {
            key: self.key,
            value,
            expected,
        }
    }

    fn bool(&self) -> Result<bool, ConfigError> {
        let value = self.one();
        parse_bool(&value).ok_or_else(|| self.bad(value, "true or false"))
    }

    fn duration(&self) -> Result<Duration, ConfigError> {
        let value = self.one();
        parse_duration(&value).ok_or_else(|| self.bad(value, "a duration such as 15s or 1m30s"))
    }

    fn number<T: FromStr>(&self) -> Result<T, ConfigError> {
        let value = self.one();
        value.parse().map_err(|_| self.bad(value, "a number"))
    }

    fn addr(&self) -> Result<SocketAddr, ConfigError> {
        let value = self.one();
        parse_addr(&value).ok_or_else(|| {
            self.bad(
                value,
                "an address such as :9963, localhost:9234 or 127.0.0.1:0",
            )
        })
    }

    /// A list: every value split at commas and white space.
    fn list(&self) -> Vec<String> {
        self.values
            .iter()
            .flat_map(|v| v.split([',', ' ', '\n', '\t']))
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// A map: `k1=v1,k2=v2` (every value of a repeated flag).
    fn map(&self) -> Result<std::collections::BTreeMap<String, String>, ConfigError> {
        self.list()
            .into_iter()
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
                _ => Err(self.bad(pair, "key=value pairs separated by commas (k1=v1,k2=v2)")),
            })
            .collect()
    }

    fn cidrs(&self) -> Result<Vec<IpNet>, ConfigError> {
        self.list()
            .into_iter()
            .map(|v| {
                v.parse()
                    .map_err(|_| self.bad(v, "a CIDR such as 10.0.0.0/8"))
            })
            .collect()
    }
}

/// Go-style listen addresses: `:9963` (every interface), `localhost:9234`, `[::1]:80`.
pub(super) fn parse_addr(v: &str) -> Option<SocketAddr> {
    if let Some(port) = v.strip_prefix(':') {
        return Some(SocketAddr::from(([0, 0, 0, 0], port.parse().ok()?)));
    }
    if let Some(port) = v.strip_prefix("localhost:") {
        return Some(SocketAddr::from(([127, 0, 0, 1], port.parse().ok()?)));
    }
    v.parse().ok()
}

/// How a row's values are applied.
pub type Apply = fn(&mut OperatorConfig, Given<'_>) -> Result<(), ConfigError>;

/// A row and how its values are applied.
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    /// The row.
    pub doc: &'static KeyDoc,
    /// Applies its values.
    pub apply: Apply,
}

const fn bind(doc: &'static KeyDoc, apply: Apply) -> Binding {
    Binding { doc, apply }
}

/// What the keys of `weft_k8s::telemetry` do here: nothing (telemetry reads them itself).
const IN_TELEMETRY: Apply = |_, _| Ok(());

/// Every row of the operator's table, bound.
pub const BINDINGS: [Binding; keys::KEYS.len()] = [
    bind(&keys::IPAM, |c, v| {
        let value = v.one();
        c.ipam = IpamMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == value)
            .ok_or(ConfigError::Mode { key: v.key, value })?;
        Ok(())
    }),
    bind(&keys::CLUSTER_POOL_IPV4_CIDR, |c, v| {
        c.cluster_pool.ipv4.cidrs = v.cidrs()?;
        Ok(())
    }),
    bind(&keys::CLUSTER_POOL_IPV4_MASK_SIZE, |c, v| {
        c.cluster_pool.ipv4.mask_size = v.number()?;
        Ok(())
    }),
    bind(&keys::CLUSTER_POOL_IPV6_CIDR, |c, v| {
        c.cluster_pool.ipv6.cidrs = v.cidrs()?;
        Ok(())
    }),
    bind(&keys::CLUSTER_POOL_IPV6_MASK_SIZE, |c, v| {
        c.cluster_pool.ipv6.mask_size = v.number()?;
        Ok(())
    }),
    bind(&keys::AUTO_CREATE_CILIUM_POD_IP_POOLS, |c, v| {
        // The ConfigMap separates entries by white space; each flag is one entry.
        let entries: Vec<&str> = if v.from_file {
            v.values.iter().flat_map(|s| s.split_whitespace()).collect()
        } else {
            v.values.iter().map(String::as_str).collect()
        };
        for entry in entries {
            let (name, spec) =
                auto_create::parse(entry).map_err(|fault| ConfigError::AutoCreate {
                    key: v.key,
                    entry: entry.to_owned(),
                    fault,
                })?;
            check_pool(&name, &spec).map_err(|source| auto_create_refused(v.key, &name, source))?;
            c.auto_create_pools.insert(name, spec);
        }
        Ok(())
    }),
    bind(&keys::IPAM_DEFAULT_IP_POOL, |c, v| {
        let pool = v.one();
        if pool.is_empty() {
            return Err(v.bad(pool, "a CiliumPodIPPool name"));
        }
        c.migration.default_pool = pool;
        Ok(())
    }),
    bind(
        &keys::ENABLE_CLUSTER_POOL_TO_MULTI_POOL_MIGRATION,
        |c, v| {
            c.migration.enabled = v.bool()?;
            Ok(())
        },
    ),
    bind(&keys::MULTI_POOL_MIGRATION_WORKERS, |c, v| {
        let workers: usize = v.number()?;
        if workers == 0 {
            return Err(v.bad("0".to_owned(), "at least 1"));
        }
        c.migration.workers = workers;
        Ok(())
    }),
    bind(&keys::ENABLE_IPV4, |c, v| {
        c.enable_ipv4 = v.bool()?;
        Ok(())
    }),
    bind(&keys::ENABLE_IPV6, |c, v| {
        c.enable_ipv6 = v.bool()?;
        Ok(())
    }),
    bind(&keys::OPERATOR_PROMETHEUS_SERVE_ADDR, |c, v| {
        c.prometheus_addr = v.addr()?;
        Ok(())
    }),
    bind(&keys::OPERATOR_API_SERVE_ADDR, |c, v| {
        c.api_addr = v.addr()?;
        Ok(())
    }),
    bind(&keys::ENABLE_METRICS, |c, v| {
        c.enable_metrics = v.bool()?;
        Ok(())
    }),
    bind(&keys::LEADER_ELECTION, |c, v| {
        c.leader_election = v.bool()?;
        Ok(())
    }),
    bind(&keys::LEADER_ELECTION_LEASE_DURATION, |c, v| {
        c.leader.lease_duration = v.duration()?;
        Ok(())
    }),
    bind(&keys::LEADER_ELECTION_RENEW_DEADLINE, |c, v| {
        c.leader.renew_deadline = v.duration()?;
        Ok(())
    }),
    bind(&keys::LEADER_ELECTION_RETRY_PERIOD, |c, v| {
        c.leader.retry_period = v.duration()?;
        Ok(())
    }),
    bind(&keys::LEADER_ELECTION_NAMESPACE, |c, v| {
        c.lease_namespace = v.one();
        Ok(())
    }),
    bind(&keys::NODES_GC_INTERVAL, |c, v| {
        c.nodes_gc_interval = v.duration()?;
        Ok(())
    }),
    bind(&keys::IDENTITY_GC_INTERVAL, |c, v| {
        c.identity_gc.interval = v.duration()?;
        Ok(())
    }),
    bind(&keys::IDENTITY_HEARTBEAT_TIMEOUT, |c, v| {
        c.identity_gc.heartbeat_timeout = v.duration()?;
        Ok(())
    }),
    bind(&keys::IDENTITY_GC_RATE_INTERVAL, |c, v| {
        c.identity_gc.rate_interval = v.duration()?;
        Ok(())
    }),
    bind(&keys::IDENTITY_GC_RATE_LIMIT, |c, v| {
        c.identity_gc.rate_limit = v.number()?;
        Ok(())
    }),
    bind(&keys::AZURE_SUBSCRIPTION_ID, |c, v| {
        c.azure.subscription_id = v.one();
        Ok(())
    }),
    bind(&keys::AZURE_RESOURCE_GROUP, |c, v| {
        c.azure.resource_group = v.one();
        Ok(())
    }),
    bind(&keys::AZURE_USER_ASSIGNED_IDENTITY_ID, |c, v| {
        let id = v.one();
        if super::azure::is_resource_id(&id) {
            return Err(ConfigError::ResourceIdAsClientId {
                key: keys::AZURE_USER_ASSIGNED_IDENTITY_ID.key,
                id,
            });
        }
        c.azure.user_assigned_identity_id = id;
        Ok(())
    }),
    bind(&keys::AZURE_USE_PRIMARY_ADDRESS, |c, v| {
        c.azure.use_primary_address = v.bool()?;
        Ok(())
    }),
    bind(&keys::AZURE_ARM_ENDPOINT, |c, v| {
        c.azure.arm_endpoint = v.one();
        Ok(())
    }),
    bind(&keys::AZURE_IMDS_ENDPOINT, |c, v| {
        c.azure.imds_endpoint = v.one();
        Ok(())
    }),
    bind(&keys::AZURE_RELEASE_EXCESS_IPS, |c, v| {
        let release = v.bool()?;
        if c.ipam == IpamMode::Azure {
            c.cloud.release_excess_ips = release;
        }
        Ok(())
    }),
    bind(&keys::LIMIT_IPAM_API_QPS, |c, v| {
        let qps: f64 = v.number()?;
        if !(qps.is_finite() && qps >= super::cloud::MIN_API_QPS) {
            return Err(v.bad(
                qps.to_string(),
                "a number of requests per second of at least 0.001 (one per 1000 s)",
            ));
        }
        c.cloud.api_qps = qps;
        Ok(())
    }),
    bind(&keys::LIMIT_IPAM_API_BURST, |c, v| {
        let burst: u32 = v.number()?;
        if burst == 0 {
            return Err(v.bad(
                "0".to_owned(),
                "at least 1 (a burst of 0 lets no request through)",
            ));
        }
        c.cloud.api_burst = burst;
        Ok(())
    }),
    bind(&keys::PARALLEL_ALLOC_WORKERS, |c, v| {
        let workers: i64 = v.number()?;
        c.cloud.parallel_alloc_workers = usize::try_from(workers.max(1)).unwrap_or(1);
        Ok(())
    }),
    bind(&keys::AWS_RELEASE_EXCESS_IPS, |c, v| {
        let release = v.bool()?;
        if c.ipam == IpamMode::Eni {
            c.cloud.release_excess_ips = release;
        }
        Ok(())
    }),
    bind(&keys::EXCESS_IP_RELEASE_DELAY, |c, v| {
        // Cilium's integer seconds, or a duration.
        let value = v.one();
        c.cloud.release_delay = (value.parse::<u64>().ok().map(Duration::from_secs))
            .or_else(|| parse_duration(&value))
            .ok_or_else(|| v.bad(value, "seconds (such as 180) or a duration such as 3m"))?;
        Ok(())
    }),
    bind(&keys::AWS_ENABLE_PREFIX_DELEGATION, |c, v| {
        c.eni.prefix_delegation = v.bool()?;
        Ok(())
    }),
    bind(&keys::ENI_TAGS, |c, v| {
        c.eni.eni_tags = v.map()?;
        Ok(())
    }),
    bind(&keys::ENI_GC_INTERVAL, |c, v| {
        c.eni.gc_interval = v.duration()?;
        Ok(())
    }),
    bind(&keys::ENI_GC_TAGS, |c, v| {
        c.eni.gc_tags = v.map()?;
        Ok(())
    }),
    bind(&keys::CLUSTER_NAME, |c, v| {
        c.eni.cluster_name = v.one();
        Ok(())
    }),
    bind(&keys::EC2_API_ENDPOINT, |c, v| {
        c.eni.ec2_api_endpoint = v.one();
        Ok(())
    }),
    bind(&keys::AWS_MAX_RESULTS_PER_CALL, |c, v| {
        c.eni.max_results_per_call = v.number()?;
        Ok(())
    }),
    bind(&keys::SUBNET_IDS_FILTER, |c, v| {
        c.eni.subnet_ids_filter = v.list();
        Ok(())
    }),
    bind(&keys::SUBNET_TAGS_FILTER, |c, v| {
        c.eni.subnet_tags_filter = v.map()?;
        Ok(())
    }),
    bind(&keys::INSTANCE_TAGS_FILTER, |c, v| {
        c.eni.instance_tags_filter = v.map()?;
        Ok(())
    }),
    bind(&keys::AWS_REGION, |c, v| {
        c.eni.region = v.one();
        Ok(())
    }),
    bind(&keys::AWS_VPC_ID, |c, v| {
        c.eni.vpc_id = v.one();
        Ok(())
    }),
    bind(&keys::AWS_IMDS_ENDPOINT, |c, v| {
        c.eni.imds_endpoint = v.one();
        Ok(())
    }),
    bind(&keys::DEBUG, IN_TELEMETRY),
    bind(&keys::LOG_LEVEL, IN_TELEMETRY),
    bind(&keys::LOG_FORMAT, IN_TELEMETRY),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_bound_once() {
        for row in &keys::KEYS {
            let bound = BINDINGS.iter().filter(|b| b.doc.key == row.key).count();
            assert_eq!(bound, 1, "{}: bound {bound} times", row.key);
        }
    }
}

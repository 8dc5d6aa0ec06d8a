//! Agent configuration in Cilium's vocabulary: the keys of the `cilium-config` ConfigMap
//! (`ipam`, `ipam-default-ip-pool`, `enable-ipv6`, …), read from a directory of one file per
//! key (a mounted ConfigMap) or a YAML/JSON map ([`file`]), overridden per node by
//! CiliumNodeConfig defaults, and by command-line flags of the same names. Cilium's keys weft
//! does not read go through the feature guard ([`guard`], table in [`features`]). Pure but for [`file`], which reads the files.

mod cluster_pool;
pub mod features;
pub mod file;
pub mod guard;
pub mod keys;
pub mod reference;

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use ipnet::{Ipv4Net, Ipv6Net};
use weft_cluster_ipam::clusterpool::ClusterPoolConfig;

use crate::ipam::mode::IpamMode;

/// The keys weft understands (the feature guard, [`guard`], judges the others). Each has its
/// documentation in [`reference::REFERENCE`].
pub const KEYS: [&str; 45] = [
    "ipam",
    "ipam-default-ip-pool",
    "ipam-multi-pool-pre-allocation",
    "enable-ipv4",
    "enable-ipv6",
    "ipam-cilium-node-update-rate",
    "enable-health-checking",
    "only-masquerade-default-pool",
    "enable-bpf-masquerade",
    "enable-ipv4-masquerade",
    "enable-ipv6-masquerade",
    "devices",
    "enable-ip-masq-agent",
    "ip-masq-agent-config-path",
    "ipv4-native-routing-cidr",
    "ipv6-native-routing-cidr",
    "auto-create-cilium-node-resource",
    "ipam-min-allocate",
    "ipam-pre-allocate",
    "ipam-max-allocate",
    "ipam-static-ip-tags",
    "azure-interface-name",
    "read-cni-conf",
    "auto-direct-node-routes",
    "cluster-name",
    "bypass-ip-availability-upon-restore",
    "eni-first-interface-index",
    "eni-subnet-ids",
    "eni-subnet-tags",
    "eni-security-groups",
    "eni-security-group-tags",
    "eni-exclude-interface-tags",
    "eni-use-primary-address",
    "eni-disable-prefix-delegation",
    "eni-delete-on-termination",
    "cluster-pool-ipv4-cidr",
    "cluster-pool-ipv4-mask-size",
    "cluster-pool-ipv6-cidr",
    "cluster-pool-ipv6-mask-size",
    "agent-not-ready-taint-key",
    "remove-cilium-node-taints",
    "debug",
    "log-level",
    "log-format",
    "prometheus-serve-addr",
];

/// Cilium's `agent-not-ready-taint-key` default.
pub const DEFAULT_NOT_READY_TAINT: &str = "node.cilium.io/agent-not-ready";

/// Cilium's `ip-masq-agent-config-path` default.
pub const DEFAULT_IP_MASQ_AGENT_CONFIG: &str = "/etc/config/ip-masq-agent";

/// The resolved configuration.
#[expect(
    clippy::struct_excessive_bools,
    reason = "mirrors cilium-config's boolean keys"
)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    /// `ipam`: the IPAM mode (default `cluster-pool`).
    pub ipam: IpamMode,
    /// `ipam-default-ip-pool` (default `default`).
    pub default_pool: String,
    /// `ipam-multi-pool-pre-allocation`, unparsed (parsed by `ipam::prealloc`).
    pub multi_pool_pre_allocation: String,
    /// `enable-ipv4` (default true).
    pub enable_ipv4: bool,
    /// `enable-ipv6` (default false, as Cilium).
    pub enable_ipv6: bool,
    /// `agent-not-ready-taint-key` (default `node.cilium.io/agent-not-ready`): the taint the
    /// agent removes from its Node once it serves CNI (empty: none).
    pub not_ready_taint_key: String,
    /// `remove-cilium-node-taints` (default true): remove that taint at all.
    pub remove_node_taints: bool,
    /// `ipam-cilium-node-update-rate`: debounce of CiliumNode writes (default 15s).
    pub node_update_rate: Duration,
    /// `enable-health-checking` (default true): the CRD allocator then waits for 2 addresses.
    pub health_checking: bool,
    /// `only-masquerade-default-pool` (default false).
    pub only_masquerade_default_pool: bool,
    /// `enable-bpf-masquerade` (default false): masquerade pod traffic in `to_netdev`.
    pub enable_bpf_masquerade: bool,
    /// `enable-ipv4-masquerade` (default true).
    pub enable_ipv4_masquerade: bool,
    /// `enable-ipv6-masquerade` (default true; only matters with `enable-ipv6`).
    pub enable_ipv6_masquerade: bool,
    /// `devices`: native devices (empty: the device of the IPv4, else IPv6, default route).
    pub devices: Vec<String>,
    /// `enable-ip-masq-agent` (default false): read non-masquerade CIDRs from a file.
    pub enable_ip_masq_agent: bool,
    /// `ip-masq-agent-config-path` (default `/etc/config/ip-masq-agent`).
    pub ip_masq_agent_config_path: PathBuf,
    /// `ipv4-native-routing-cidr`: destinations that keep the pod address.
    pub ipv4_native_routing_cidr: Option<Ipv4Net>,
    /// `ipv6-native-routing-cidr`.
    pub ipv6_native_routing_cidr: Option<Ipv6Net>,
    /// What the agent seeds into its CiliumNode (Kubernetes only).
    pub node_seed: NodeSeedConfig,
    /// `auto-direct-node-routes` (default false): route other nodes' pod CIDRs via their
    /// addresses.
    pub auto_direct_node_routes: bool,
    /// `cluster-name` (default `default`): part of every pod's security labels.
    pub cluster_name: String,
    /// `bypass-ip-availability-upon-restore` (default false): restore a recorded IPv4
    /// address that left `spec.ipam.pool` (CRD modes) instead of reporting it.
    pub bypass_ip_availability_upon_restore: bool,
    /// `cluster-pool-ipv4-cidr`, `cluster-pool-ipv4-mask-size` (default 24) and the IPv6 twins
    /// (default 112), with `enable-ipv4`/`enable-ipv6` as the families: the operator's
    /// cluster-pool settings, used by the in-process allocator of the single-host store.
    pub cluster_pool: ClusterPoolConfig,
    /// `prometheus-serve-addr` (default empty: none): where `/metrics` is also served; the
    /// `--prometheus-serve-addr` flag wins.
    pub prometheus_serve_addr: Option<std::net::SocketAddr>,
}

/// The keys that seed the agent's own CiliumNode when it runs against Kubernetes (Cilium's
/// node discovery).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSeedConfig {
    /// `auto-create-cilium-node-resource` (default true): create the CiliumNode if missing.
    pub auto_create: bool,
    /// `ipam-min-allocate` (0: unset).
    pub min_allocate: u32,
    /// `ipam-pre-allocate` (0: unset).
    pub pre_allocate: u32,
    /// `ipam-max-allocate` (0: unset).
    pub max_allocate: u32,
    /// `ipam-static-ip-tags`: `key=value,key=value`.
    pub static_ip_tags: BTreeMap<String, String>,
    /// `azure-interface-name`.
    pub azure_interface_name: String,
    /// `read-cni-conf`: a custom CNI configuration whose `ipam`/`eni`/`azure` values win.
    pub read_cni_conf: Option<PathBuf>,
    /// `spec.eni` from the `eni-*` keys (eni mode).
    pub eni: crate::crd::eni::EniSpec,
}

impl Default for NodeSeedConfig {
    fn default() -> Self {
        Self {
            auto_create: true,
            min_allocate: 0,
            pre_allocate: 0,
            max_allocate: 0,
            static_ip_tags: BTreeMap::new(),
            azure_interface_name: String::new(),
            read_cni_conf: None,
            eni: crate::crd::eni::EniSpec {
                first_interface_index: Some(0),
                delete_on_termination: Some(true),
                use_primary_address: Some(false),
                disable_prefix_delegation: Some(false),
                ..crate::crd::eni::EniSpec::default()
            },
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            ipam: IpamMode::default(),
            default_pool: "default".to_owned(),
            multi_pool_pre_allocation: String::new(),
            enable_ipv4: true,
            enable_ipv6: false,
            node_update_rate: Duration::from_secs(15),
            health_checking: true,
            only_masquerade_default_pool: false,
            enable_bpf_masquerade: false,
            enable_ipv4_masquerade: true,
            enable_ipv6_masquerade: true,
            devices: Vec::new(),
            enable_ip_masq_agent: false,
            ip_masq_agent_config_path: PathBuf::from(DEFAULT_IP_MASQ_AGENT_CONFIG),
            ipv4_native_routing_cidr: None,
            ipv6_native_routing_cidr: None,
            node_seed: NodeSeedConfig::default(),
            auto_direct_node_routes: false,
            cluster_name: crate::identity::DEFAULT_CLUSTER.to_owned(),
            bypass_ip_availability_upon_restore: false,
            cluster_pool: ClusterPoolConfig::default(),
            not_ready_taint_key: DEFAULT_NOT_READY_TAINT.to_owned(),
            remove_node_taints: true,
            prometheus_serve_addr: None,
        }
    }
}

/// A configuration value that cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for {key}: expected {expected}")]
pub struct ConfigError {
    /// The key.
    pub key: String,
    /// The value given.
    pub value: String,
    /// What would be accepted.
    pub expected: String,
}

impl AgentConfig {
    /// Resolve from layers of key/value maps, later layers winning (e.g. config file, then
    /// CiliumNodeConfig defaults, then flags). Other keys are ignored here (the caller
    /// judges them with [`guard::review`]).
    ///
    /// # Errors
    /// A known key has a value of the wrong form, or two keys contradict each other; the
    /// error names the key and the fix.
    pub fn resolve<'a>(
        layers: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
    ) -> Result<Self, ConfigError> {
        Self::resolve_values(layers)?.checked()
    }

    /// [`Self::resolve`] without the checks across keys: what can be refused before every
    /// layer is known (a CiliumNodeConfig may still complete, e.g., `enable-ipv6`).
    ///
    /// # Errors
    /// A known key has a value of the wrong form; the error names the key and the fix.
    pub fn resolve_values<'a>(
        layers: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
    ) -> Result<Self, ConfigError> {
        let mut merged = BTreeMap::new();
        for layer in layers {
            for (k, v) in layer {
                merged.insert(k.as_str(), v.trim());
            }
        }
        let mut config = Self::default();
        for (key, value) in merged {
            let bad = |expected: &str| ConfigError {
                key: key.to_owned(),
                value: value.to_owned(),
                expected: expected.to_owned(),
            };
            match key {
                "ipam" => {
                    // Only the modes weft runs are named, whatever was given.
                    config.ipam = value.parse().map_err(|_| bad(&modes_weft_runs()))?;
                    if config.ipam == IpamMode::DelegatedPlugin {
                        return Err(bad(&delegated_refused()));
                    }
                }
                "ipam-default-ip-pool" if !value.is_empty() => {
                    value.clone_into(&mut config.default_pool);
                }
                "ipam-multi-pool-pre-allocation" => {
                    value.clone_into(&mut config.multi_pool_pre_allocation);
                }
                "enable-ipv4" => {
                    config.enable_ipv4 = parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "enable-ipv6" => {
                    config.enable_ipv6 = parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "enable-health-checking" => {
                    config.health_checking =
                        parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "only-masquerade-default-pool" => {
                    config.only_masquerade_default_pool =
                        parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "auto-direct-node-routes" => {
                    config.auto_direct_node_routes =
                        parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "bypass-ip-availability-upon-restore" => {
                    config.bypass_ip_availability_upon_restore =
                        parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "cluster-name" if !value.is_empty() => value.clone_into(&mut config.cluster_name),
                "agent-not-ready-taint-key" => value.clone_into(&mut config.not_ready_taint_key),
                "remove-cilium-node-taints" => {
                    config.remove_node_taints =
                        parse_bool(value).ok_or_else(|| bad("true or false"))?;
                }
                "prometheus-serve-addr" if !value.is_empty() => {
                    config.prometheus_serve_addr = Some(
                        crate::cli::parse_listen_addr(value)
                            .map_err(|_| bad("host:port, or :port for every interface (:9962)"))?,
                    );
                }
                "ipam-cilium-node-update-rate" => {
                    config.node_update_rate = parse_duration(value)
                        .ok_or_else(|| bad("a duration such as 15s, 500ms or 1m"))?;
                }
                _ => {
                    if !cluster_pool::apply(&mut config.cluster_pool, key, value)? {
                        masquerade_key(&mut config, key, value)?;
                        seed_key(&mut config.node_seed, key, value)?;
                    }
                }
            }
        }
        config.cluster_pool.ipv4.enabled = config.enable_ipv4;
        config.cluster_pool.ipv6.enabled = config.enable_ipv6;
        Ok(config)
    }

    /// The checks across keys.
    fn checked(self) -> Result<Self, ConfigError> {
        let config = self;
        if config.only_masquerade_default_pool && !config.enable_bpf_masquerade {
            return Err(ConfigError {
                key: "only-masquerade-default-pool".into(),
                value: "true".into(),
                expected: "enable-bpf-masquerade=true as well (--only-masquerade-default-pool \
                           requires --enable-bpf-masquerade to be enabled)"
                    .into(),
            });
        }
        if !config.enable_ipv4 && !config.enable_ipv6 {
            return Err(ConfigError {
                key: "enable-ipv4".into(),
                value: "false".into(),
                expected: "at least one of enable-ipv4 and enable-ipv6 to be true".into(),
            });
        }
        Ok(config)
    }
}

/// What an unknown `ipam` value gets: the modes weft runs (Cilium's, but delegated-plugin).
fn modes_weft_runs() -> String {
    let modes: Vec<&str> = IpamMode::ALL
        .iter()
        .filter(|mode| **mode != IpamMode::DelegatedPlugin)
        .map(|mode| mode.as_str())
        .collect();
    format!("one of the modes weft runs: {}", modes.join(", "))
}

/// What `ipam: delegated-plugin` gets: the modes weft runs instead. weft's plugin does not
/// delegate IPAM to another CNI plugin, so the agent would answer every ADD with an error.
fn delegated_refused() -> String {
    format!(
        "{} (weft-cni does not delegate IPAM to another CNI plugin, so Cilium's \
         delegated-plugin is not supported)",
        modes_weft_runs()
    )
}

/// The masquerade keys; unknown keys are ignored.
fn masquerade_key(config: &mut AgentConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    let bad = |expected: &str| ConfigError {
        key: key.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    };
    match key {
        "enable-bpf-masquerade" => {
            config.enable_bpf_masquerade = parse_bool(value).ok_or_else(|| bad("true or false"))?;
        }
        "enable-ipv4-masquerade" => {
            config.enable_ipv4_masquerade =
                parse_bool(value).ok_or_else(|| bad("true or false"))?;
        }
        "enable-ipv6-masquerade" => {
            config.enable_ipv6_masquerade =
                parse_bool(value).ok_or_else(|| bad("true or false"))?;
        }
        "enable-ip-masq-agent" => {
            config.enable_ip_masq_agent = parse_bool(value).ok_or_else(|| bad("true or false"))?;
        }
        "devices" => {
            config.devices = value
                .split([',', ' '])
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect();
        }
        "ip-masq-agent-config-path" if !value.is_empty() => {
            config.ip_masq_agent_config_path = PathBuf::from(value);
        }
        "ipv4-native-routing-cidr" if !value.is_empty() => {
            config.ipv4_native_routing_cidr = Some(value.parse().map_err(|_| {
                bad("an IPv4 CIDR (ipv4-native-routing-cidr must be an IPv4 CIDR)")
            })?);
        }
        "ipv6-native-routing-cidr" if !value.is_empty() => {
            config.ipv6_native_routing_cidr = Some(value.parse().map_err(|_| {
                bad("an IPv6 CIDR (ipv6-native-routing-cidr must be an IPv6 CIDR)")
            })?);
        }
        _ => {}
    }
    Ok(())
}

/// The CiliumNode seeding keys; unknown keys are ignored.
fn seed_key(seed: &mut NodeSeedConfig, key: &str, value: &str) -> Result<(), ConfigError> {
    let bad = |expected: &str| ConfigError {
        key: key.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    };
    let count = || {
        if value.is_empty() {
            return Ok(0);
        }
        value
            .parse::<u32>()
            .map_err(|_| bad("a non-negative integer (0: unset)"))
    };
    match key {
        "auto-create-cilium-node-resource" => {
            seed.auto_create = parse_bool(value).ok_or_else(|| bad("true or false"))?;
        }
        "ipam-min-allocate" => seed.min_allocate = count()?,
        "ipam-pre-allocate" => seed.pre_allocate = count()?,
        "ipam-max-allocate" => seed.max_allocate = count()?,
        "ipam-static-ip-tags" => {
            seed.static_ip_tags = parse_tags(value)
                .ok_or_else(|| bad("comma-separated key=value pairs, e.g. team=a,env=prod"))?;
        }
        "azure-interface-name" => value.clone_into(&mut seed.azure_interface_name),
        "read-cni-conf" => {
            seed.read_cni_conf = (!value.is_empty()).then(|| PathBuf::from(value));
        }
        _ => eni_key(&mut seed.eni, key, value)?,
    }
    Ok(())
}

/// The `eni-*` keys Cilium's agent copies into `spec.eni` (spec §6.4).
fn eni_key(eni: &mut crate::crd::eni::EniSpec, key: &str, value: &str) -> Result<(), ConfigError> {
    let bad = |expected: &str| ConfigError {
        key: key.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    };
    let list = || -> Vec<String> {
        value
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let tags = || parse_tags(value).ok_or_else(|| bad("comma-separated key=value pairs"));
    let flag = || parse_bool(value).ok_or_else(|| bad("true or false"));
    match key {
        "eni-first-interface-index" => {
            eni.first_interface_index =
                Some(value.parse().map_err(|_| bad("a non-negative integer"))?);
        }
        "eni-subnet-ids" => eni.subnet_ids = list(),
        "eni-subnet-tags" => eni.subnet_tags = tags()?,
        "eni-security-groups" => eni.security_groups = list(),
        "eni-security-group-tags" => eni.security_group_tags = tags()?,
        "eni-exclude-interface-tags" => eni.exclude_interface_tags = tags()?,
        "eni-use-primary-address" => eni.use_primary_address = Some(flag()?),
        "eni-disable-prefix-delegation" => eni.disable_prefix_delegation = Some(flag()?),
        "eni-delete-on-termination" => eni.delete_on_termination = Some(flag()?),
        _ => {}
    }
    Ok(())
}

/// `k=v,k2=v2` (Cilium's map flags); also accepts a JSON object.
fn parse_tags(value: &str) -> Option<BTreeMap<String, String>> {
    if value.starts_with('{') {
        return serde_json::from_str(value).ok();
    }
    value
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_owned(), v.trim().to_owned()))
        })
        .collect()
}

/// Go-style booleans and durations, as the operator reads them too.
pub use weft_k8s::config_values::{parse_bool, parse_duration};

#[cfg(test)]
mod tests;

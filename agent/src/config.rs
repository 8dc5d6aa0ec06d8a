//! Agent configuration in Cilium's vocabulary: the keys of the `cilium-config` ConfigMap
//! (`ipam`, `ipam-default-ip-pool`, `enable-ipv6`, …), read from a directory of one file per
//! key (a mounted ConfigMap) or a YAML/JSON map ([`file`]), overridden per node by
//! CiliumNodeConfig defaults, and by command-line flags of the same names. Cilium's keys weft
//! does not read go through the feature guard ([`guard`], table in [`features`]). Pure but for [`file`], which reads the files.

mod apply;
pub mod features;
pub mod file;
pub mod guard;
pub mod keys;
pub mod reference;
pub mod routing;

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use ipnet::{Ipv4Net, Ipv6Net};
use weft_cluster_ipam::clusterpool::ClusterPoolConfig;

use crate::ipam::mode::IpamMode;

/// The keys weft understands, in the order of their rows in [`reference::REFERENCE`] (the
/// feature guard, [`guard`], judges the others).
pub use self::reference::KEYS;

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
    /// `routing-mode` (default native; Cilium's default, an empty value, is tunnel).
    pub routing_mode: routing::RoutingMode,
    /// `tunnel-protocol` and `tunnel-port` (read in tunnel mode).
    pub tunnel: routing::TunnelConfig,
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
    /// `aws-imds-endpoint` (eni mode): the EC2 instance metadata service the instance, its
    /// type, zone, VPC and node subnet are read from.
    pub aws_imds_endpoint: String,
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
            aws_imds_endpoint: weft_aws_imds::DEFAULT_BASE_URL.to_owned(),
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
            routing_mode: routing::RoutingMode::Native,
            tunnel: routing::TunnelConfig::default(),
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
            // Other keys are the feature guard's.
            if let Some(row) = reference::lookup(key) {
                row.apply(&mut config, value)?;
            }
        }
        config.cluster_pool.ipv4.enabled = config.enable_ipv4;
        config.cluster_pool.ipv6.enabled = config.enable_ipv6;
        Ok(config)
    }

    /// The checks across keys.
    fn checked(self) -> Result<Self, ConfigError> {
        use reference::{
            ENABLE_BPF_MASQUERADE, ENABLE_IPV4, ENABLE_IPV6, ONLY_MASQUERADE_DEFAULT_POOL,
            TUNNEL_PROTOCOL,
        };
        let config = self;
        if config.only_masquerade_default_pool && !config.enable_bpf_masquerade {
            let (only, bpf) = (
                ONLY_MASQUERADE_DEFAULT_POOL.name(),
                ENABLE_BPF_MASQUERADE.name(),
            );
            return Err(ConfigError {
                key: only.to_owned(),
                value: "true".into(),
                expected: format!("{bpf}=true as well (--{only} requires --{bpf} to be enabled)"),
            });
        }
        if !config.enable_ipv4 && !config.enable_ipv6 {
            let (v4, v6) = (ENABLE_IPV4.name(), ENABLE_IPV6.name());
            return Err(ConfigError {
                key: v4.to_owned(),
                value: "false".into(),
                expected: format!("at least one of {v4} and {v6} to be true"),
            });
        }
        if config.routing_mode == routing::RoutingMode::Tunnel
            && config.tunnel.protocol == routing::TunnelProtocol::Geneve
        {
            return Err(ConfigError {
                key: TUNNEL_PROTOCOL.name().to_owned(),
                value: routing::TunnelProtocol::Geneve.as_str().to_owned(),
                expected: routing::GENEVE_REFUSED.to_owned(),
            });
        }
        Ok(config)
    }
}

/// Go-style booleans and durations, as the operator reads them too.
pub use weft_k8s::config_values::{parse_bool, parse_duration};

#[cfg(test)]
mod tests;

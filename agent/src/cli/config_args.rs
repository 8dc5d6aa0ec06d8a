//! The cilium-config keys `weft-agent run` also takes as flags, and the config file or
//! directory they come from; [`ConfigArgs::flags`] hands them to the configuration as one layer.

use std::path::PathBuf;

use clap::Args;

/// cilium-config keys: a directory of one file per key or a YAML/JSON map, and the same keys
/// as flags (flags win). A boolean flag alone means true, as in Cilium (`--enable-ipv6`);
/// `--enable-ipv6=false` and `--enable-ipv6 false` set it.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Directory with one file per key (a mounted ConfigMap).
    #[arg(long, env = "WEFT_CONFIG_DIR")]
    pub config_dir: Option<PathBuf>,
    /// A YAML or JSON map of keys, or the cilium-config ConfigMap manifest (its `data` is used).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// IPAM mode: kubernetes, cluster-pool, multi-pool, crd, eni, azure, alibabacloud.
    #[arg(long)]
    pub ipam: Option<String>,
    /// Default pool name.
    #[arg(long)]
    pub ipam_default_ip_pool: Option<String>,
    /// Multi-pool pre-allocation per pool, `pool=count,…` or JSON (default `<default pool>=8`).
    #[arg(long)]
    pub ipam_multi_pool_pre_allocation: Option<String>,
    /// Allocate IPv4 addresses.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_ipv4: Option<String>,
    /// Allocate IPv6 addresses.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_ipv6: Option<String>,
    /// Debounce of CiliumNode writes (Go duration, default 15s).
    #[arg(long)]
    pub ipam_cilium_node_update_rate: Option<String>,
    /// Health checking (the CRD allocator then waits for 2 addresses).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_health_checking: Option<String>,
    /// Skip masquerading for every pool but the default one (needs --enable-bpf-masquerade).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub only_masquerade_default_pool: Option<String>,
    /// Masquerade pod traffic leaving through the native devices in eBPF.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_bpf_masquerade: Option<String>,
    /// Masquerade IPv4 pod traffic (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_ipv4_masquerade: Option<String>,
    /// Masquerade IPv6 pod traffic (default true; needs --enable-ipv6).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_ipv6_masquerade: Option<String>,
    /// Native devices, comma-separated (default: the device of the IPv4, else IPv6, default route).
    #[arg(long)]
    pub devices: Option<String>,
    /// Read non-masquerade CIDRs from the ip-masq-agent configuration file.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub enable_ip_masq_agent: Option<String>,
    /// The ip-masq-agent configuration file (YAML or JSON).
    #[arg(long)]
    pub ip_masq_agent_config_path: Option<String>,
    /// Pod addresses are routable inside this IPv4 CIDR: not masqueraded there.
    #[arg(long)]
    pub ipv4_native_routing_cidr: Option<String>,
    /// Pod addresses are routable inside this IPv6 CIDR.
    #[arg(long)]
    pub ipv6_native_routing_cidr: Option<String>,
    /// Route other nodes' pod CIDRs via their addresses (nodes share an L2 network).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub auto_direct_node_routes: Option<String>,
    /// Cluster name, part of every pod's security labels (default `default`).
    #[arg(long)]
    pub cluster_name: Option<String>,
    /// Restore a recorded IPv4 address that left `spec.ipam.pool` (crd modes) anyway.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub bypass_ip_availability_upon_restore: Option<String>,
    /// Create the own CiliumNode when missing (Kubernetes; default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub auto_create_cilium_node_resource: Option<String>,
    /// `spec.ipam.min-allocate` to seed (crd, eni, azure, alibabacloud).
    #[arg(long)]
    pub ipam_min_allocate: Option<String>,
    /// `spec.ipam.pre-allocate` to seed.
    #[arg(long)]
    pub ipam_pre_allocate: Option<String>,
    /// `spec.ipam.max-allocate` to seed.
    #[arg(long)]
    pub ipam_max_allocate: Option<String>,
    /// `spec.ipam.static-ip-tags` to seed (`key=value,…`).
    #[arg(long)]
    pub ipam_static_ip_tags: Option<String>,
    /// `spec.azure.interface-name` to seed (azure).
    #[arg(long)]
    pub azure_interface_name: Option<String>,
    /// A custom CNI configuration whose `ipam` / `azure` values win when seeding.
    #[arg(long)]
    pub read_cni_conf: Option<String>,
    /// Cluster CIDRs the in-process cluster-pool allocator carves node blocks from (`--store`
    /// only; space- or comma-separated).
    #[arg(long)]
    pub cluster_pool_ipv4_cidr: Option<String>,
    /// Prefix length of each node's IPv4 block (default 24).
    #[arg(long)]
    pub cluster_pool_ipv4_mask_size: Option<String>,
    /// Cluster CIDRs for IPv6 node blocks (`--store` only; needs --enable-ipv6).
    #[arg(long)]
    pub cluster_pool_ipv6_cidr: Option<String>,
    /// Prefix length of each node's IPv6 block (default 112).
    #[arg(long)]
    pub cluster_pool_ipv6_mask_size: Option<String>,
}

impl ConfigArgs {
    /// The flags that were given, as cilium-config keys.
    #[must_use]
    pub fn flags(&self) -> std::collections::BTreeMap<String, String> {
        let pairs = [
            ("ipam", &self.ipam),
            ("ipam-default-ip-pool", &self.ipam_default_ip_pool),
            (
                "ipam-multi-pool-pre-allocation",
                &self.ipam_multi_pool_pre_allocation,
            ),
            ("enable-ipv4", &self.enable_ipv4),
            ("enable-ipv6", &self.enable_ipv6),
            (
                "ipam-cilium-node-update-rate",
                &self.ipam_cilium_node_update_rate,
            ),
            ("enable-health-checking", &self.enable_health_checking),
            (
                "only-masquerade-default-pool",
                &self.only_masquerade_default_pool,
            ),
            ("enable-bpf-masquerade", &self.enable_bpf_masquerade),
            ("enable-ipv4-masquerade", &self.enable_ipv4_masquerade),
            ("enable-ipv6-masquerade", &self.enable_ipv6_masquerade),
            ("devices", &self.devices),
            ("enable-ip-masq-agent", &self.enable_ip_masq_agent),
            ("ip-masq-agent-config-path", &self.ip_masq_agent_config_path),
            ("ipv4-native-routing-cidr", &self.ipv4_native_routing_cidr),
            ("ipv6-native-routing-cidr", &self.ipv6_native_routing_cidr),
            ("auto-direct-node-routes", &self.auto_direct_node_routes),
            ("cluster-name", &self.cluster_name),
            (
                "bypass-ip-availability-upon-restore",
                &self.bypass_ip_availability_upon_restore,
            ),
            (
                "auto-create-cilium-node-resource",
                &self.auto_create_cilium_node_resource,
            ),
            ("ipam-min-allocate", &self.ipam_min_allocate),
            ("ipam-pre-allocate", &self.ipam_pre_allocate),
            ("ipam-max-allocate", &self.ipam_max_allocate),
            ("ipam-static-ip-tags", &self.ipam_static_ip_tags),
            ("azure-interface-name", &self.azure_interface_name),
            ("read-cni-conf", &self.read_cni_conf),
            ("cluster-pool-ipv4-cidr", &self.cluster_pool_ipv4_cidr),
            (
                "cluster-pool-ipv4-mask-size",
                &self.cluster_pool_ipv4_mask_size,
            ),
            ("cluster-pool-ipv6-cidr", &self.cluster_pool_ipv6_cidr),
            (
                "cluster-pool-ipv6-mask-size",
                &self.cluster_pool_ipv6_mask_size,
            ),
        ];
        pairs
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v.clone()?)))
            .collect()
    }
}

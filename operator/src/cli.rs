//! `weft-operator`'s command line, in Cilium's operator vocabulary. Every setting is optional
//! here: a flag that is given wins over the same key in `--config-dir` (a mounted
//! cilium-config ConfigMap), which wins over the default ([`crate::config`] resolves them).

use std::path::PathBuf;

use clap::Parser;

/// weft's operator: hands out pod CIDRs (cluster-pool) and pool blocks (multi-pool) to
/// CiliumNodes, deletes the CiliumNodes of deleted nodes, and elects a leader.
#[derive(Debug, Clone, Default, Parser)]
#[command(name = "weft-operator", version)]
pub struct Cli {
    /// IPAM mode: `cluster-pool` (default), `multi-pool` or `azure`.
    #[arg(long)]
    pub ipam: Option<String>,
    /// Cluster CIDRs node blocks are carved from (IPv4); repeat or separate by commas.
    #[arg(long, value_delimiter = ',')]
    pub cluster_pool_ipv4_cidr: Vec<String>,
    /// Prefix length of each node's IPv4 block (default 24).
    #[arg(long)]
    pub cluster_pool_ipv4_mask_size: Option<String>,
    /// Cluster CIDRs node blocks are carved from (IPv6); repeat or separate by commas.
    #[arg(long, value_delimiter = ',')]
    pub cluster_pool_ipv6_cidr: Vec<String>,
    /// Prefix length of each node's IPv6 block (default 112).
    #[arg(long)]
    pub cluster_pool_ipv6_mask_size: Option<String>,
    /// CiliumPodIPPools to create at start when missing, one per flag:
    /// `<pool>=ipv4-cidrs:<cidr>[,<cidr>…];ipv4-mask-size:<n>[;ipv6-cidrs:…;ipv6-mask-size:<n>]`.
    #[arg(long)]
    pub auto_create_cilium_pod_ip_pools: Vec<String>,
    /// Hand out IPv4 blocks (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_ipv4: Option<String>,
    /// Hand out IPv6 blocks (default false).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_ipv6: Option<String>,
    /// A directory of one file per cilium-config key (a mounted ConfigMap).
    #[arg(long, env = "WEFT_OPERATOR_CONFIG_DIR")]
    pub config_dir: Option<PathBuf>,
    /// A kubeconfig; without it: `KUBECONFIG`, `~/.kube/config` or the in-cluster account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Where `/metrics` is served with `--enable-metrics` (default `:9963`).
    #[arg(long)]
    pub operator_prometheus_serve_addr: Option<String>,
    /// Where `/healthz` is served (default `localhost:9234`).
    #[arg(long)]
    pub operator_api_serve_addr: Option<String>,
    /// The metric names `/metrics` serves: `weft` (`weft_operator_…`) or `cilium` (Cilium's
    /// `cilium_operator_…` where the meaning is the same, weft's for the rest).
    #[arg(long, env = "WEFT_METRICS_NAMING", default_value = "weft")]
    pub metrics_naming: weft_k8s::metrics_naming::Naming,
    /// Serve Prometheus metrics (default false).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_metrics: Option<String>,
    /// Elect a leader among replicas (default true; `--leader-election=false` for one).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub leader_election: Option<String>,
    /// How long a lease is valid without renewal (default 15s).
    #[arg(long)]
    pub leader_election_lease_duration: Option<String>,
    /// How long the leader keeps trying to renew before it gives up (default 10s).
    #[arg(long)]
    pub leader_election_renew_deadline: Option<String>,
    /// Wait between two attempts to acquire or renew (default 2s).
    #[arg(long)]
    pub leader_election_retry_period: Option<String>,
    /// Namespace of the leader-election Lease (default `kube-system`, or `POD_NAMESPACE`).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Interval of the CiliumNode garbage collection (default 5m0s; 0 disables it).
    #[arg(long)]
    pub nodes_gc_interval: Option<String>,
    /// GC interval for security identities (default 15m0s; 0 disables the collection).
    #[arg(long)]
    pub identity_gc_interval: Option<String>,
    /// Timeout after which an unused identity expires on lack of heartbeat (default 30m0s).
    #[arg(long)]
    pub identity_heartbeat_timeout: Option<String>,
    /// Interval used for rate limiting the GC of security identities (default 1m0s).
    #[arg(long)]
    pub identity_gc_rate_interval: Option<String>,
    /// Maximum number of identities deleted within the identity-gc-rate-interval (default 2500).
    #[arg(long)]
    pub identity_gc_rate_limit: Option<String>,
    /// Azure subscription of the nodes (default: the operator's VM's, from IMDS).
    #[arg(long)]
    pub azure_subscription_id: Option<String>,
    /// Resource group of the nodes' VMs or VMSSes (default: the operator's VM's, from IMDS).
    #[arg(long)]
    pub azure_resource_group: Option<String>,
    /// Client ID (a UUID) of the user-assigned managed identity to authenticate with.
    #[arg(long)]
    pub azure_user_assigned_identity_id: Option<String>,
    /// Hand out the NICs' primary addresses to pods too (default false).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub azure_use_primary_address: Option<String>,
    /// Azure Resource Manager URL (default: the cloud's, from IMDS `azEnvironment`).
    #[arg(long)]
    pub azure_arm_endpoint: Option<String>,
    /// Instance Metadata Service URL (default `http://169.254.169.254`).
    #[arg(long)]
    pub azure_imds_endpoint: Option<String>,
    /// Release addresses beyond a node's watermarks (default false, as Cilium never does).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub azure_release_excess_ips: Option<String>,
    /// Cloud API requests per second (default 4.0).
    #[arg(long)]
    pub limit_ipam_api_qps: Option<String>,
    /// Cloud API requests allowed in a burst (default 20).
    #[arg(long)]
    pub limit_ipam_api_burst: Option<String>,
    /// Nodes whose addresses are resolved at once (default 50).
    #[arg(long)]
    pub parallel_alloc_workers: Option<String>,
    /// `--debug`, `--log-level`, `--log-format` (Cilium's; the keys of the same names).
    #[command(flatten)]
    pub log: weft_k8s::telemetry::LogArgs,
}

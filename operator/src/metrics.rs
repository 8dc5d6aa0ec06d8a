//! The operator's Prometheus metrics, under `weft_operator_`: Cilium's operator IPAM names
//! (`ipam_nodes{category}`, `ipam_available_ips`/`ipam_used_ips`/`ipam_needed_ips{target_node}`,
//! `ipam_resync_total`), the blocks of each pool in use and free, whether this replica leads,
//! the Kubernetes API calls and the process's CPU and memory; with `--metrics-naming cilium`, [`naming`]'s table serves
//! Cilium's under `cilium_operator_`. Gauges of state are set from the node manager before each
//! scrape ([`Metrics::observe`]); label values are bounded (node and pool names, fixed
//! categories).

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};
use weft_cluster_ipam::manager::NodeManager;
use weft_k8s::api_metrics::KubeApiMetrics;
pub use weft_k8s::metrics_naming::Naming;

pub use self::{
    cloud::{CloudMetrics, CloudObserver},
    identitygc::IdentityGcMetrics,
};

mod cloud;
mod identitygc;
pub mod naming;

/// Prefix of every metric name.
pub const PREFIX: &str = "weft_operator";

/// `category` of `ipam_nodes`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CategoryLabels {
    /// `total`, `in-deficit` or `at-capacity`.
    pub category: &'static str,
}

/// `target_node` of the per-node gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    /// The CiliumNode.
    pub target_node: String,
}

/// Labels of `ipam_pool_blocks`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BlockLabels {
    /// The pool (`cluster-pool` in cluster-pool mode).
    pub pool: String,
    /// `ipv4` or `ipv6`.
    pub family: &'static str,
    /// `in-use` or `free`.
    pub state: &'static str,
}

/// Every metric of the operator; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    nodes: Family<CategoryLabels, Gauge>,
    available: Family<NodeLabels, Gauge>,
    used: Family<NodeLabels, Gauge>,
    needed: Family<NodeLabels, Gauge>,
    /// Passes over every node (the initial restore, pool changes).
    pub resync: Counter,
    blocks: Family<BlockLabels, Gauge>,
    /// CiliumNode writes carried out, by part.
    pub writes: Family<PartLabels, Counter>,
    /// 1 while this replica holds the lease.
    pub leader: Gauge,
    /// The Kubernetes API calls.
    pub kube: KubeApiMetrics,
    /// The cloud node manager (`--ipam azure`).
    pub cloud: CloudMetrics,
    /// The ARM calls.
    pub azure: crate::azure::api::ApiMetrics,
    /// The EC2 calls.
    pub ec2: crate::eni::api::Ec2Metrics,
    /// The names `/metrics` serves (`--metrics-naming`).
    pub naming: Naming,
    /// The CiliumIdentity garbage collector.
    pub identity_gc: IdentityGcMetrics,
}

/// `part` of `ciliumnode_writes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartLabels {
    /// `spec` or `status`.
    pub part: &'static str,
}

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Metrics {
    /// A registry with every metric registered under [`PREFIX`].
    #[must_use]
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::with_prefix(PREFIX);
        registry.register(
            "ipam_nodes",
            "Number of nodes by category { total | in-deficit | at-capacity }",
            self.nodes.clone(),
        );
        registry.register(
            "ipam_available_ips",
            "Addresses in the blocks of a node",
            self.available.clone(),
        );
        registry.register(
            "ipam_used_ips",
            "Addresses a node reports in use (status.ipam.used)",
            self.used.clone(),
        );
        registry.register(
            "ipam_needed_ips",
            "Addresses a node asks for beyond its blocks",
            self.needed.clone(),
        );
        registry.register(
            "ipam_resync",
            "Passes of the node manager over every node",
            self.resync.clone(),
        );
        registry.register(
            "ipam_pool_blocks",
            "Node blocks of each pool and family, in use and free",
            self.blocks.clone(),
        );
        registry.register(
            "ciliumnode_writes",
            "CiliumNode writes carried out, by part",
            self.writes.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader-election lease",
            self.leader.clone(),
        );
        self.kube.register(&mut registry);
        self.cloud.register(&mut registry);
        self.azure.register(&mut registry);
        self.ec2.register(&mut registry);
        registry.register_collector(Box::new(weft_k8s::process_metrics::ProcessCollector));
        self.identity_gc.register(&mut registry);
        registry
    }

    /// Every metric, served under `naming`'s names.
    #[must_use]
    pub fn with_naming(naming: Naming) -> Self {
        Self {
            naming,
            ..Self::default()
        }
    }

    /// `registry`, encoded in the text format 0.0.4 under [`Self::naming`]'s names.
    ///
    /// # Errors
    /// A metric failed to encode.
    pub fn encode(&self, registry: &Registry) -> Result<String, std::fmt::Error> {
        weft_k8s::metrics_naming::encode(registry, self.naming, naming::RULES)
    }

    /// Set the gauges of state from the node manager.
    pub fn observe(&self, manager: &NodeManager) {
        let (counts, per_node) = manager.usage();
        for (category, n) in [
            ("total", counts.total),
            ("in-deficit", counts.in_deficit),
            ("at-capacity", counts.at_capacity),
        ] {
            self.nodes
                .get_or_create(&CategoryLabels { category })
                .set(gauge(n));
        }
        // Nodes that went away drop out of the per-node gauges.
        self.available.clear();
        self.used.clear();
        self.needed.clear();
        for (node, usage, used) in per_node {
            let labels = NodeLabels { target_node: node };
            self.available
                .get_or_create(&labels)
                .set(gauge(usage.available));
            self.used.get_or_create(&labels).set(gauge(used));
            self.needed.get_or_create(&labels).set(gauge(usage.needed));
        }
        self.blocks.clear();
        for b in manager.blocks() {
            for (state, n) in [("in-use", b.in_use), ("free", b.free)] {
                self.blocks
                    .get_or_create(&BlockLabels {
                        pool: b.pool.clone(),
                        family: b.family.flag_name(),
                        state,
                    })
                    .set(gauge(n));
            }
        }
    }
}

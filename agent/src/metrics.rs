//! Prometheus metrics and the agent's HTTP endpoint (`/metrics`, `/healthz`, `/readyz`).
//!
//! One [`Metrics`] holds every part (IPAM, Kubernetes API calls, CiliumNode writes, datapath,
//! CNI requests, endpoints, the process's CPU and memory); each part registers its metrics in the registry under the `weft_`
//! prefix and owns small, bounded label sets. A scrape serves them under weft's names or,
//! with `--metrics-naming cilium`, through the one table of [`naming`] under Cilium's. Counters of operations (allocations, releases, API calls) are counted
//! where they happen; gauges of state (pool usage, map entries, the kernel's counters, the
//! writer's counters) are set by the daemon right before each scrape. Metrics owns the
//! CiliumNode writer's counters ([`WriteStats`]): both stores count into them, and this module
//! never imports `store`. It reads the IPAM and datapath modules' plain data types and never
//! calls into kube, aya or the IPAM allocators.

pub use weft_k8s::api_metrics as apiserver;
pub mod cni;
pub mod datapath;
pub mod endpoints;
pub mod ipam;
pub mod naming;
pub mod server;
pub mod writes;

use std::net::SocketAddr;

use prometheus_client::registry::Registry;
pub use weft_k8s::metrics_naming::Naming;

pub use self::{
    apiserver::KubeApiMetrics,
    cni::CniMetrics,
    datapath::DatapathMetrics,
    endpoints::{EndpointCounts, EndpointMetrics},
    ipam::{IpamMetrics, Outcome},
    server::{DEFAULT_HEALTH_ADDR, Endpoint, Readiness, Refresh},
    writes::{WriteMetrics, WriteStats},
};

/// Prefix of every metric name (`weft_ipam_used_ips`, …): Cilium's names after `cilium_`.
pub const PREFIX: &str = "weft";

/// Why metrics could not be served.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Encoding the registry failed.
    #[error("encoding the metrics")]
    Encode(#[source] std::fmt::Error),
    /// A listener could not be bound.
    #[error("cannot serve HTTP on {addr}: pass another --health-addr / --prometheus-serve-addr")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
}

/// Every metric of the agent.
#[derive(Debug)]
pub struct Metrics {
    /// Node IPAM usage, pool usage, allocation and release operations.
    pub ipam: IpamMetrics,
    /// Kubernetes API request durations.
    pub kube: KubeApiMetrics,
    /// CiliumNode writes.
    pub writes: WriteMetrics,
    /// eBPF counters, map entries, attachments.
    pub datapath: DatapathMetrics,
    /// CNI request and ADD step durations.
    pub cni: CniMetrics,
    /// Endpoints by state.
    pub endpoints: EndpointMetrics,
    naming: Naming,
    registry: Registry,
}

impl Metrics {
    /// Every metric, registered, for node `node_name` (the `target_node` label), served under
    /// `naming`'s names.
    #[must_use]
    pub fn new(node_name: &str, naming: Naming) -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let ipam = IpamMetrics::new(node_name);
        ipam.register(&mut registry);
        let kube = KubeApiMetrics::default();
        kube.register(&mut registry);
        let writes = WriteMetrics::default();
        writes.register(&mut registry);
        let datapath = DatapathMetrics::default();
        datapath.register(&mut registry);
        let cni = CniMetrics::default();
        cni.register(&mut registry);
        let endpoints = EndpointMetrics::default();
        endpoints.register(&mut registry);
        registry.register_collector(Box::new(weft_k8s::process_metrics::ProcessCollector));
        Self {
            ipam,
            kube,
            writes,
            datapath,
            cni,
            endpoints,
            naming,
            registry,
        }
    }

    /// The registry in the Prometheus text format 0.0.4, under the names chosen at start.
    ///
    /// # Errors
    /// A metric failed to encode.
    pub fn encode(&self) -> Result<String, MetricsError> {
        weft_k8s::metrics_naming::encode(&self.registry, self.naming, naming::RULES)
            .map_err(MetricsError::Encode)
    }
}

#[cfg(test)]
mod tests;

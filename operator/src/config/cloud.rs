//! The settings every cloud provider's node manager reads, whatever the cloud: the rate limit
//! of its API client, how many nodes are resolved at once and whether excess addresses are
//! released. A provider's own settings (Azure's: [`super::AzureConfig`]) live beside it.

use std::time::Duration;

/// The smallest `limit-ipam-api-qps` accepted: one request per 1000 s.
pub const MIN_API_QPS: f64 = 0.001;

/// Settings of the cloud node manager and its API client.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudConfig {
    /// `limit-ipam-api-qps`: cloud API requests per second (finite, at least
    /// `MIN_API_QPS`).
    pub api_qps: f64,
    /// `limit-ipam-api-burst`: requests allowed in a burst (at least 1).
    pub api_burst: u32,
    /// `parallel-alloc-workers`: nodes resolved at once (values below 1 mean 1).
    pub parallel_alloc_workers: usize,
    /// `azure-release-excess-ips` (weft; Cilium never releases on Azure): release addresses
    /// beyond a node's watermarks.
    pub release_excess_ips: bool,
    /// `excess-ip-release-delay`: how long a CIDR a 1.20+ agent gave back stays attached.
    pub release_delay: Duration,
}

impl Default for CloudConfig {
    fn default() -> Self {
        Self {
            api_qps: 4.0,
            api_burst: 20,
            parallel_alloc_workers: 50,
            release_excess_ips: false,
            release_delay: Duration::from_mins(3),
        }
    }
}

//! Kubernetes API client metrics: the duration of every request a `kube::Client` sends, by
//! verb, resource and response code (observed by the client's timing layer in
//! [`crate::instrument`]). Labels stay bounded: verbs and resources come from fixed lists (anything
//! else is `other`), codes are HTTP status codes or `error` when no response came back. A
//! watch is timed until its response headers arrive, not for as long as it streams.

use std::time::Duration;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, histogram::Histogram},
    registry::Registry,
};

/// One kind of API call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiCallLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` or `other`.
    pub verb: &'static str,
    /// `ciliumnodes`, `ciliumnodes/status`, `pods`, … or `other`.
    pub resource: &'static str,
    /// HTTP status code, or `error` (connection failed, timed out).
    pub code: String,
}

/// The Kubernetes API part of a program's metrics (the agent's and the operator's).
#[derive(Debug, Clone)]
pub struct KubeApiMetrics {
    duration: Family<ApiCallLabels, Histogram>,
}

impl Default for KubeApiMetrics {
    fn default() -> Self {
        Self {
            // 1 ms … ~8 s.
            duration: Family::new_with_constructor(|| {
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.001, 2.0, 14,
                ))
            }),
        }
    }
}

impl KubeApiMetrics {
    /// Register the API call metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "k8s_client_api_duration_seconds",
            "Duration of Kubernetes API requests (until the response headers), by verb, resource and response code",
            self.duration.clone(),
        );
    }

    /// One request of `verb` on `resource` answered `code` (`None`: no response) after `took`.
    pub fn observe(
        &self,
        verb: &'static str,
        resource: &'static str,
        code: Option<u16>,
        took: Duration,
    ) {
        let code = code.map_or_else(|| "error".to_owned(), |c| c.to_string());
        self.duration
            .get_or_create(&ApiCallLabels {
                verb,
                resource,
                code,
            })
            .observe(took.as_secs_f64());
    }
}

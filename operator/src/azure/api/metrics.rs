//! The ARM client's metrics, Cilium's names under the registry's prefix:
//! `azure_api_duration_seconds{operation,response_code}` (`OK`/`Failed`),
//! `azure_api_rate_limit_duration_seconds{operation}`, and weft's
//! `azure_api_retries_total{operation}`. Operation names are Cilium's (`Interfaces.Get`, …), a
//! fixed set. Durations are observed by a drop guard, so failed and cancelled calls count too.

use std::time::Duration;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};
use tokio::time::Instant;

/// Labels of `azure_api_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// Cilium's operation name.
    pub operation: &'static str,
    /// `OK` or `Failed`.
    pub response_code: &'static str,
}

/// Labels of the per-operation metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// Cilium's operation name.
    pub operation: &'static str,
}

/// The ARM client's metrics; cheap to clone.
#[derive(Clone, Debug)]
pub struct ApiMetrics {
    duration: Family<CallLabels, Histogram>,
    rate_limit: Family<OperationLabels, Histogram>,
    retries: Family<OperationLabels, Counter>,
}

impl Default for ApiMetrics {
    fn default() -> Self {
        Self {
            // 5 ms … ~80 s.
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.005, 2.0, 15))
            }),
            // 1 ms … ~16 s.
            rate_limit: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 15))
            }),
            retries: Family::default(),
        }
    }
}

impl ApiMetrics {
    /// Register the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "azure_api_duration_seconds",
            "Duration of Azure API calls (retries included), by operation and outcome",
            self.duration.clone(),
        );
        registry.register(
            "azure_api_rate_limit_duration_seconds",
            "Time Azure API calls waited on the client-side rate limit, by operation",
            self.rate_limit.clone(),
        );
        registry.register(
            "azure_api_retries",
            "Azure API requests sent again after a retriable failure, by operation",
            self.retries.clone(),
        );
    }

    /// Start timing a call; the guard observes it when dropped (`Failed` unless [`CallTimer::ok`]).
    #[must_use]
    pub fn start(&self, operation: &'static str) -> CallTimer {
        CallTimer {
            metrics: self.clone(),
            operation,
            start: Instant::now(),
            ok: false,
        }
    }

    /// A wait of `waited` on the rate limiter.
    pub fn observe_rate_limit(&self, operation: &'static str, waited: Duration) {
        self.rate_limit
            .get_or_create(&OperationLabels { operation })
            .observe(waited.as_secs_f64());
    }

    /// One retry of `operation`.
    pub fn retried(&self, operation: &'static str) {
        self.retries
            .get_or_create(&OperationLabels { operation })
            .inc();
    }

    /// Retries of `operation` so far.
    #[must_use]
    pub fn retries(&self, operation: &'static str) -> u64 {
        self.retries
            .get_or_create(&OperationLabels { operation })
            .get()
    }
}

/// Times one call (see [`ApiMetrics::start`]).
#[derive(Debug)]
pub struct CallTimer {
    metrics: ApiMetrics,
    operation: &'static str,
    start: Instant,
    ok: bool,
}

impl CallTimer {
    /// The call succeeded.
    pub fn ok(&mut self) {
        self.ok = true;
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        let labels = CallLabels {
            operation: self.operation,
            response_code: if self.ok { "OK" } else { "Failed" },
        };
        self.metrics
            .duration
            .get_or_create(&labels)
            .observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn guard_observes_failures_and_successes() {
        let metrics = ApiMetrics::default();
        drop(metrics.start("Interfaces.Get"));
        let mut t = metrics.start("Interfaces.Get");
        t.ok();
        drop(t);
        metrics.observe_rate_limit("Interfaces.List", Duration::from_millis(250));
        metrics.retried("Interfaces.List");
        let mut registry = Registry::with_prefix("weft_operator");
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for want in [
            r#"weft_operator_azure_api_duration_seconds_count{operation="Interfaces.Get",response_code="Failed"} 1"#,
            r#"weft_operator_azure_api_duration_seconds_count{operation="Interfaces.Get",response_code="OK"} 1"#,
            r#"weft_operator_azure_api_rate_limit_duration_seconds_sum{operation="Interfaces.List"} 0.25"#,
            r#"weft_operator_azure_api_retries_total{operation="Interfaces.List"} 1"#,
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
    }
}

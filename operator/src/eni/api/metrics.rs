//! The EC2 client's metrics, Cilium's names under the registry's prefix (§3.4):
//! `ec2_api_duration_seconds{operation,response_code}` with Cilium's buckets, `response_code`
//! `OK`, `Failed` or the HTTP status line (`400 Bad Request`), and
//! `ec2_api_rate_limit_duration_seconds{operation}`; plus weft's
//! `ec2_api_retries_total{operation}`. Operation labels are action names, except
//! ModifyNetworkInterfaceAttribute, which Cilium labels `ModifyNetworkInterface`. Durations are
//! observed by a drop guard, so failed and cancelled calls count too.

use std::time::Duration;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};
use tokio::time::Instant;

/// Buckets of `ec2_api_duration_seconds` (Cilium's).
pub const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Cilium's operation label of `action`.
#[must_use]
pub fn operation(action: &'static str) -> &'static str {
    match action {
        "ModifyNetworkInterfaceAttribute" => "ModifyNetworkInterface",
        other => other,
    }
}

/// Labels of `ec2_api_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// Cilium's operation label.
    pub operation: &'static str,
    /// `OK`, `Failed` or the HTTP status line (a bounded set).
    pub response_code: String,
}

/// Labels of the per-operation metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// Cilium's operation label.
    pub operation: &'static str,
}

/// The EC2 client's metrics; cheap to clone.
#[derive(Clone, Debug)]
pub struct Ec2Metrics {
    duration: Family<CallLabels, Histogram>,
    rate_limit: Family<OperationLabels, Histogram>,
    retries: Family<OperationLabels, Counter>,
}

impl Default for Ec2Metrics {
    fn default() -> Self {
        Self {
            duration: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            rate_limit: Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS)),
            retries: Family::default(),
        }
    }
}

impl Ec2Metrics {
    /// Register the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "ec2_api_duration_seconds",
            "Duration of EC2 API calls (retries included), by operation and response code",
            self.duration.clone(),
        );
        registry.register(
            "ec2_api_rate_limit_duration_seconds",
            "Time EC2 API calls waited on the client-side rate limit, by operation",
            self.rate_limit.clone(),
        );
        registry.register(
            "ec2_api_retries",
            "EC2 API requests sent again after a retriable failure, by operation",
            self.retries.clone(),
        );
    }

    /// Start timing a call of `action`; the guard observes it when dropped (`Failed` unless
    /// told otherwise).
    #[must_use]
    pub fn start(&self, action: &'static str) -> CallTimer {
        CallTimer {
            metrics: self.clone(),
            operation: operation(action),
            start: Instant::now(),
            response_code: None,
        }
    }

    /// A wait of `waited` on the rate limiter before a call of `action`.
    pub fn observe_rate_limit(&self, action: &'static str, waited: Duration) {
        self.rate_limit
            .get_or_create(&OperationLabels {
                operation: operation(action),
            })
            .observe(waited.as_secs_f64());
    }

    /// One retry of `action`.
    pub fn retried(&self, action: &'static str) {
        self.retries
            .get_or_create(&OperationLabels {
                operation: operation(action),
            })
            .inc();
    }

    /// Retries of `action` so far.
    #[must_use]
    pub fn retries(&self, action: &'static str) -> u64 {
        self.retries
            .get_or_create(&OperationLabels {
                operation: operation(action),
            })
            .get()
    }
}

/// Times one call (see [`Ec2Metrics::start`]).
#[derive(Debug)]
pub struct CallTimer {
    metrics: Ec2Metrics,
    operation: &'static str,
    start: Instant,
    response_code: Option<String>,
}

impl CallTimer {
    /// The call succeeded (`OK`).
    pub fn ok(&mut self) {
        self.response_code = Some("OK".to_owned());
    }

    /// The call ended with `response_code` (`Failed` or a status line).
    pub fn failed(&mut self, response_code: String) {
        self.response_code = Some(response_code);
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        let labels = CallLabels {
            operation: self.operation,
            response_code: self
                .response_code
                .take()
                .unwrap_or_else(|| "Failed".to_owned()),
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
    fn labels_and_names() {
        let metrics = Ec2Metrics::default();
        drop(metrics.start("DescribeVpcs"));
        let mut t = metrics.start("ModifyNetworkInterfaceAttribute");
        t.ok();
        drop(t);
        let mut t = metrics.start("AttachNetworkInterface");
        t.failed("400 Bad Request".to_owned());
        drop(t);
        metrics.observe_rate_limit("DescribeSubnets", Duration::from_millis(250));
        metrics.retried("DescribeSubnets");
        let mut registry = Registry::with_prefix("weft_operator");
        metrics.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for want in [
            r#"weft_operator_ec2_api_duration_seconds_count{operation="DescribeVpcs",response_code="Failed"} 1"#,
            r#"weft_operator_ec2_api_duration_seconds_count{operation="ModifyNetworkInterface",response_code="OK"} 1"#,
            r#"weft_operator_ec2_api_duration_seconds_count{operation="AttachNetworkInterface",response_code="400 Bad Request"} 1"#,
            r#"weft_operator_ec2_api_duration_seconds_bucket{le="0.005",operation="DescribeVpcs",response_code="Failed"} 1"#,
            r#"weft_operator_ec2_api_duration_seconds_bucket{le="60.0",operation="DescribeVpcs",response_code="Failed"} 1"#,
            r#"weft_operator_ec2_api_rate_limit_duration_seconds_sum{operation="DescribeSubnets"} 0.25"#,
            r#"weft_operator_ec2_api_retries_total{operation="DescribeSubnets"} 1"#,
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        assert_eq!(metrics.retries("DescribeSubnets"), 1);
    }
}

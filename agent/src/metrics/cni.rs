//! CNI request metrics: `weft_cni_request_duration_seconds{command,outcome}`, timed by the
//! daemon around every request from the moment it is read to the answer on every exit path,
//! and `weft_cni_phase_duration_seconds{phase}`, the steps of a successful ADD (allocate,
//! record writes, netlink wiring, eBPF programming). Labels are bounded: the CNI commands and
//! the phases below.

use std::time::Duration;

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder},
    metrics::{family::Family, histogram::Histogram},
    registry::Registry,
};

use super::Outcome;

/// A step of CNI ADD.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Phase {
    /// Reserving the addresses under the state lock (readiness, allocation, clash check).
    Allocate,
    /// Writing the endpoint record (the intent before wiring, the result after).
    Record,
    /// The veth pair, addresses and routes over netlink.
    Wire,
    /// `from_container` attached and the endpoint, interface and IPCache entries written.
    Program,
}

impl Phase {
    /// The label value and the name in logs.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allocate => "allocate",
            Self::Record => "record",
            Self::Wire => "wire",
            Self::Program => "program",
        }
    }
}

impl EncodeLabelValue for Phase {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// `command` and `outcome` of a CNI request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `ADD`, `DEL`, `CHECK`, `STATUS`, `GC` (and weft's own `EXPLAIN`, `AGENT_STATUS`).
    pub command: &'static str,
    /// `success` or `failure` (a CNI error was returned).
    pub outcome: Outcome,
}

/// `phase` of an ADD.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// The step.
    pub phase: Phase,
}

/// The CNI part of [`super::Metrics`].
#[derive(Debug)]
pub struct CniMetrics {
    requests: Family<RequestLabels, Histogram>,
    phases: Family<PhaseLabels, Histogram>,
}

fn latency_histogram() -> Histogram {
    // 25 µs … ~1.6 s: a map write is microseconds, an ADD milliseconds, a waiting one seconds.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_025, 2.0, 17,
    ))
}

impl Default for CniMetrics {
    fn default() -> Self {
        Self {
            requests: Family::new_with_constructor(latency_histogram),
            phases: Family::new_with_constructor(latency_histogram),
        }
    }
}

impl CniMetrics {
    /// Register the CNI metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cni_request_duration_seconds",
            "Time the agent took to answer a CNI request, per command and outcome",
            self.requests.clone(),
        );
        registry.register(
            "cni_phase_duration_seconds",
            "Time of each step of a successful CNI ADD",
            self.phases.clone(),
        );
    }

    /// Count one answered request.
    pub fn request(&self, command: &'static str, outcome: Outcome, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels { command, outcome })
            .observe(took.as_secs_f64());
    }

    /// Count one step of a successful ADD.
    pub fn phase(&self, phase: Phase, took: Duration) {
        self.phases
            .get_or_create(&PhaseLabels { phase })
            .observe(took.as_secs_f64());
    }
}

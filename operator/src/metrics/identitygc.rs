//! The identity garbage collector's metrics, Cilium's `identity_gc_entries{status}` (alive and
//! deleted identities at the end of the last run) and `identity_gc_runs{outcome}` (runs so
//! far, `success` or `fail`), both gauges as in Cilium. Set by
//! [`crate::identitygc`] only.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

/// `status` of `identity_gc_entries`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    /// `alive` or `deleted`.
    pub status: &'static str,
}

/// `outcome` of `identity_gc_runs`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `success` or `fail`.
    pub outcome: &'static str,
}

/// The collector's gauges; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct IdentityGcMetrics {
    entries: Family<StatusLabels, Gauge>,
    runs: Family<OutcomeLabels, Gauge>,
}

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl IdentityGcMetrics {
    /// Register under the registry's prefix.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "identity_gc_entries",
            "CiliumIdentities kept (alive) and deleted by the last collection",
            self.entries.clone(),
        );
        registry.register(
            "identity_gc_runs",
            "Identity collections so far, by outcome",
            self.runs.clone(),
        );
    }

    /// One run ended (`success`: it went through every identity).
    pub fn run(&self, success: bool, alive: u64, deleted: u64) {
        let outcome = if success { "success" } else { "fail" };
        self.runs.get_or_create(&OutcomeLabels { outcome }).inc();
        for (status, n) in [("alive", alive), ("deleted", deleted)] {
            self.entries
                .get_or_create(&StatusLabels { status })
                .set(gauge(n));
        }
    }
}

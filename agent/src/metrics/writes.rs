//! CiliumNode write-back metrics, mirrored at scrape time from the store's
//! [`WriteStats`](crate::store::WriteStats) (either store): writes by result and the time of
//! the last successful one.

use std::sync::atomic::Ordering;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::store::WriteStats;

/// `result` of a write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `written`, `conflict` (409, retried) or `failed` (kept queued).
    pub result: &'static str,
}

/// The CiliumNode writer part of [`super::Metrics`].
#[derive(Debug, Default)]
pub struct WriteMetrics {
    writes: Family<WriteLabels, Counter>,
    last_write: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl WriteMetrics {
    /// Register the write metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "ciliumnode_writes",
            "Writes of the own CiliumNode (status.ipam.used, release-ips or spec.ipam.pools) by result",
            self.writes.clone(),
        );
        registry.register(
            "ciliumnode_last_write_timestamp_seconds",
            "Unix time of the last successful CiliumNode write (0: none since start)",
            self.last_write.clone(),
        );
    }

    /// Copy the store's counters.
    pub fn set(&self, stats: &WriteStats) {
        for (result, counter) in [
            ("written", &stats.writes),
            ("conflict", &stats.conflicts),
            ("failed", &stats.failures),
        ] {
            self.writes
                .get_or_create(&WriteLabels { result })
                .inner()
                .store(counter.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "milliseconds since 1970 fit f64's 53 bits for millennia"
        )]
        let seconds = stats.last_write_ms.load(Ordering::Relaxed) as f64 / 1000.0;
        self.last_write.set(seconds);
    }
}

//! CiliumNode write-back metrics. The writer of either store counts into a [`WriteStats`]
//! (defined here: metrics owns its counters, the stores import them, never the reverse);
//! [`WriteMetrics`] mirrors them at scrape time: writes by result and the time of the last
//! successful one.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, SystemTime},
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// Counters of the CiliumNode writer of either store (metrics and `weft-agent status`).
#[derive(Debug, Default)]
pub struct WriteStats {
    /// Successful writes of the CiliumNode (or its status).
    pub writes: AtomicU64,
    /// 409 Conflicts answered to a write (Kubernetes only; the write is retried).
    pub conflicts: AtomicU64,
    /// Writes that failed otherwise (and stay queued).
    pub failures: AtomicU64,
    /// Write-backs that would have left the document as it was, so nothing was written
    /// (embedded store).
    pub unchanged: AtomicU64,
    /// Unix time in milliseconds of the last successful write; 0: none yet.
    pub last_write_ms: AtomicU64,
}

impl WriteStats {
    /// Count a successful write, now.
    pub fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last_write_ms.store(ms, Ordering::Relaxed);
    }

    /// When the last successful write happened, if any.
    #[must_use]
    pub fn last_write(&self) -> Option<SystemTime> {
        match self.last_write_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }
}

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
    last_write: Gauge<f64, AtomicU64>,
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

//! The program's own process metrics (CPU time, memory, file descriptors, start time), read
//! from `/proc/self` at each scrape: the `process_*` metrics every Prometheus client exports,
//! under the program's prefix (`weft_process_…`, `weft_operator_process_…`), which Cilium
//! exports as `cilium_process_…` and `cilium_operator_process_…` and its dashboards chart.
//! Linux only; a file that cannot be read leaves its metric out of that scrape.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
};

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, fixed at 100 in Linux's ABI on
/// every architecture weft builds for).
const USER_HZ: f64 = 100.0;

/// Registers the process metrics in a registry: `registry.register_collector(Box::new(..))`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessCollector;

/// One read of `/proc/self`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident memory, bytes.
    pub resident_bytes: Option<i64>,
    /// Virtual memory, bytes.
    pub virtual_bytes: Option<i64>,
    /// Open file descriptors.
    pub open_fds: Option<i64>,
    /// The soft limit of open file descriptors.
    pub max_fds: Option<i64>,
    /// Unix time the process started, seconds.
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// Read `/proc/self` (and the boot time from `/proc/stat`).
    #[must_use]
    pub fn read() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        // The fields after the command name (which may hold spaces) start at field 3, `state`.
        let fields: Vec<&str> = stat
            .as_deref()
            .and_then(|s| s.rsplit_once(')'))
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
                .map(|k| k * 1024)
        };
        let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<f64>().ok())
        });
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        Self {
            cpu_seconds: field(14)
                .zip(field(15))
                .map(|(user, system)| (user + system) / USER_HZ),
            resident_bytes: kib("VmRSS:"),
            virtual_bytes: kib("VmSize:"),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| i64::try_from(d.count()).unwrap_or(i64::MAX)),
            max_fds: limits
                .lines()
                .find_map(|l| l.strip_prefix("Max open files"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok()),
            start_time_seconds: boot.zip(field(22)).map(|(b, ticks)| b + ticks / USER_HZ),
        }
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = ProcessStats::read();
        if let Some(seconds) = stats.cpu_seconds {
            let metric = ConstCounter::new(seconds);
            metric.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "User and system CPU time spent, in seconds",
                None,
                metric.metric_type(),
            )?)?;
        }
        for (name, help, value) in [
            (
                "process_resident_memory_bytes",
                "Resident memory size, in bytes",
                stats.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size, in bytes",
                stats.virtual_bytes,
            ),
            ("process_open_fds", "Open file descriptors", stats.open_fds),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                stats.max_fds,
            ),
        ] {
            if let Some(value) = value {
                let metric = ConstGauge::new(value);
                metric.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    metric.metric_type(),
                )?)?;
            }
        }
        if let Some(start) = stats.start_time_seconds {
            let metric = ConstGauge::new(start);
            metric.encode(encoder.encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds",
                None,
                metric.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

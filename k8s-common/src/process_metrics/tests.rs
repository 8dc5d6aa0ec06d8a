//! The process metrics of this test process: read from `/proc/self`, and encoded under the
//! registry's prefix with the types Prometheus's clients give them.

use prometheus_client::registry::Registry;

use super::*;
use crate::metrics_naming::{Naming, encode};

#[test]
fn this_process_has_cpu_time_memory_fds_and_a_start_time() {
    let stats = ProcessStats::read();
    assert!(stats.cpu_seconds.is_some_and(|s| s >= 0.0), "{stats:?}");
    assert!(stats.resident_bytes.is_some_and(|b| b > 0), "{stats:?}");
    assert!(stats.virtual_bytes >= stats.resident_bytes, "{stats:?}");
    assert!(stats.open_fds.is_some_and(|n| n >= 3), "{stats:?}");
    assert!(stats.max_fds >= stats.open_fds, "{stats:?}");
    assert!(
        stats.start_time_seconds.is_some_and(|t| t > 1.6e9),
        "{stats:?}"
    );
}

#[test]
fn they_are_encoded_under_the_prefix() {
    let mut registry = Registry::with_prefix("weft");
    registry.register_collector(Box::new(ProcessCollector));
    let text = encode(&registry, Naming::Weft, &[]).expect("encode");
    for line in [
        "# TYPE weft_process_cpu_seconds_total counter",
        "# TYPE weft_process_resident_memory_bytes gauge",
        "# TYPE weft_process_open_fds gauge",
        "# TYPE weft_process_start_time_seconds gauge",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing in:\n{text}"
        );
    }
}

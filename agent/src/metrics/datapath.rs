//! Datapath metrics, mirrored at scrape time from the pins ([`DatapathStats`]): packets and
//! bytes per counter reason with the verdict it stands for (`redirected`, `passed`, `answered`,
//! `dropped`, `masqueraded`), entries and capacity of every pinned map (endpoints, IPCache, NAT,
//! …) and the number of tc attachments per program. Label values come from the fixed reason
//! and map names of agent-common.

use std::sync::atomic::Ordering;

use agent_common::reason;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::datapath::DatapathStats;

/// A counter reason and its verdict.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// `agent_common::reason::name`, e.g. `redirect_local`, `drop_invalid_source`, `snat`.
    pub reason: &'static str,
    /// What happened to the packet (see [`verdict`]).
    pub verdict: &'static str,
}

/// A pinned map.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MapLabels {
    /// The map's name, e.g. `weft_eps_v1`.
    pub map: &'static str,
}

/// A tc program.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProgramLabels {
    /// `from_container`, `to_netdev` or `from_netdev`.
    pub program: &'static str,
}

/// What a counter reason means for the packet: `redirected` (delivered to a pod past the host
/// stack, or to the tunnel device), `passed` (to the host stack, reverse-NATed or not, or out of the device untouched), `answered` (ARP/ND reply), `dropped`,
/// `masqueraded` (source-NATed on the way out).
#[must_use]
pub fn verdict(reason_name: &str) -> &'static str {
    match reason_name {
        n if n == reason::name(reason::REDIRECT_LOCAL)
            || n == reason::name(reason::ENCAP)
            || n == reason::name(reason::OVERLAY_TO_POD) =>
        {
            "redirected"
        }
        n if n == reason::name(reason::NEIGH_REPLY) => "answered",
        n if n == reason::name(reason::SNAT) => "masqueraded",
        n if n.starts_with("drop_") => "dropped",
        _ => "passed",
    }
}

/// The datapath part of [`super::Metrics`].
#[derive(Debug, Default)]
pub struct DatapathMetrics {
    packets: Family<ReasonLabels, Counter>,
    bytes: Family<ReasonLabels, Counter>,
    entries: Family<MapLabels, Gauge>,
    capacity: Family<MapLabels, Gauge>,
    attachments: Family<ProgramLabels, Gauge>,
}

impl DatapathMetrics {
    /// Register the datapath metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "datapath_packets",
            "Packets the eBPF programs handled, by reason and verdict (summed over CPUs)",
            self.packets.clone(),
        );
        registry.register(
            "datapath_bytes",
            "Bytes the eBPF programs handled, by reason and verdict (summed over CPUs)",
            self.bytes.clone(),
        );
        registry.register(
            "bpf_map_entries",
            "Entries in a pinned eBPF map (endpoints, IPCache, NAT, …)",
            self.entries.clone(),
        );
        registry.register(
            "bpf_map_capacity",
            "max_entries of a pinned eBPF map",
            self.capacity.clone(),
        );
        registry.register(
            "datapath_attachments",
            "Interfaces a tc program is attached to",
            self.attachments.clone(),
        );
    }

    /// Copy a fresh read of the pins.
    pub fn set(&self, stats: &DatapathStats) {
        for row in &stats.counters {
            let labels = ReasonLabels {
                reason: row.reason,
                verdict: verdict(row.reason),
            };
            // The kernel's counters are the truth: mirror them (they only reset when a new map
            // layout replaces the pin, which Prometheus treats as a counter reset).
            self.packets
                .get_or_create(&labels)
                .inner()
                .store(row.packets, Ordering::Relaxed);
            self.bytes
                .get_or_create(&labels)
                .inner()
                .store(row.bytes, Ordering::Relaxed);
        }
        for map in &stats.maps {
            let labels = MapLabels { map: map.name };
            self.entries
                .get_or_create(&labels)
                .set(i64::try_from(map.entries).unwrap_or(i64::MAX));
            self.capacity
                .get_or_create(&labels)
                .set(i64::from(map.capacity));
        }
        for program in [
            agent_common::maps::PROG_FROM_CONTAINER,
            agent_common::maps::PROG_TO_NETDEV,
            agent_common::maps::PROG_FROM_NETDEV,
        ] {
            let n = stats
                .attachments
                .iter()
                .filter(|a| a.program == program)
                .count();
            self.attachments
                .get_or_create(&ProgramLabels { program })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

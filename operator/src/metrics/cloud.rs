//! The cloud node manager's metrics (Cilium's operator IPAM names after `weft_operator_`):
//! allocation and release operations and their durations per subnet, the background sync,
//! free addresses per subnet; the node gauges shared with the block modes are set from each
//! [`Snapshot`].

use prometheus_client::{
    encoding::{EncodeLabel as _, EncodeLabelSet, LabelSetEncoder},
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};

use super::{CategoryLabels, Metrics, NodeLabels, gauge};
use crate::cloud::manager::{Observer, Outcome, Snapshot};

/// Cilium's buckets for allocation and release durations: 0.25, 0.5, then 1 s to 60 s.
fn duration_buckets() -> Vec<f64> {
    let mut b = vec![0.25, 0.5];
    b.extend((1..=60).map(f64::from));
    b
}

fn new_histogram() -> Histogram {
    Histogram::new(duration_buckets())
}

/// `subnet_id` of the operation counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SubnetLabels {
    /// The subnet's resource ID.
    pub subnet_id: String,
}

/// Labels of `available_ips_per_subnet`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SubnetZoneLabels {
    /// The subnet's resource ID.
    pub subnet_id: String,
    /// Empty on Azure (as in Cilium).
    pub availability_zone: String,
}

/// Labels of the allocation and release histograms (`type` is a keyword, so the set is
/// encoded by hand).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct OperationLabels {
    /// `type`: `allocateIP` or `releaseIP`.
    pub kind: &'static str,
    /// `success` or `failed`.
    pub status: &'static str,
    /// The subnet's resource ID.
    pub subnet_id: String,
}

impl EncodeLabelSet for OperationLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        ("type", self.kind).encode(encoder.encode_label())?;
        ("status", self.status).encode(encoder.encode_label())?;
        ("subnet_id", self.subnet_id.as_str()).encode(encoder.encode_label())
    }
}

/// `status` of the background sync histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabels {
    /// `success` or `failed`.
    pub status: &'static str,
}

/// The cloud manager's metrics; cheap to clone.
#[derive(Debug, Clone)]
pub struct CloudMetrics {
    allocation_ops: Family<SubnetLabels, Counter>,
    release_ops: Family<SubnetLabels, Counter>,
    interface_creation_ops: Family<SubnetLabels, Counter>,
    allocation_duration: Family<OperationLabels, Histogram>,
    release_duration: Family<OperationLabels, Histogram>,
    background_sync: Family<StatusLabels, Histogram>,
    per_subnet: Family<SubnetZoneLabels, prometheus_client::metrics::gauge::Gauge>,
}

impl Default for CloudMetrics {
    fn default() -> Self {
        Self {
            allocation_ops: Family::default(),
            release_ops: Family::default(),
            interface_creation_ops: Family::default(),
            allocation_duration: Family::new_with_constructor(new_histogram),
            release_duration: Family::new_with_constructor(new_histogram),
            background_sync: Family::new_with_constructor(new_histogram),
            per_subnet: Family::default(),
        }
    }
}

impl CloudMetrics {
    /// Register every metric under `registry`'s prefix.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "ipam_ip_allocation_ops",
            "Addresses allocated, per subnet",
            self.allocation_ops.clone(),
        );
        registry.register(
            "ipam_ip_release_ops",
            "Addresses released, per subnet",
            self.release_ops.clone(),
        );
        registry.register(
            "ipam_interface_creation_ops",
            "Interfaces created, per subnet",
            self.interface_creation_ops.clone(),
        );
        registry.register(
            "ipam_allocation_duration_seconds",
            "Duration of address allocations",
            self.allocation_duration.clone(),
        );
        registry.register(
            "ipam_release_duration_seconds",
            "Duration of address releases",
            self.release_duration.clone(),
        );
        registry.register(
            "ipam_background_sync_duration_seconds",
            "Duration of the full resync of the cloud's instances",
            self.background_sync.clone(),
        );
        registry.register(
            "ipam_available_ips_per_subnet",
            "Free addresses per subnet",
            self.per_subnet.clone(),
        );
    }
}

/// Feeds the operator's metrics from the cloud manager.
#[derive(Debug, Clone)]
pub struct CloudObserver(pub Metrics);

impl Observer for CloudObserver {
    fn round(&self, outcome: Outcome, subnet: &str, count: u64, secs: f64) {
        let cloud = &self.0.cloud;
        let subnet_id = subnet.to_owned();
        let (family, kind, status) = match outcome {
            Outcome::Allocated => (&cloud.allocation_duration, "allocateIP", "success"),
            Outcome::AllocationFailed => (&cloud.allocation_duration, "allocateIP", "failed"),
            Outcome::Released => (&cloud.release_duration, "releaseIP", "success"),
            Outcome::ReleaseFailed => (&cloud.release_duration, "releaseIP", "failed"),
            Outcome::InterfaceCreated => (
                &cloud.allocation_duration,
                "createInterfaceAndAllocateIP",
                "success",
            ),
            Outcome::InterfaceCreationFailed(condition) => (
                &cloud.allocation_duration,
                "createInterfaceAndAllocateIP",
                condition,
            ),
        };
        family
            .get_or_create(&OperationLabels {
                kind,
                status,
                subnet_id: subnet_id.clone(),
            })
            .observe(secs);
        let ops = match outcome {
            Outcome::Allocated => &cloud.allocation_ops,
            Outcome::Released => &cloud.release_ops,
            Outcome::InterfaceCreated => {
                cloud
                    .interface_creation_ops
                    .get_or_create(&SubnetLabels {
                        subnet_id: subnet_id.clone(),
                    })
                    .inc();
                &cloud.allocation_ops
            }
            Outcome::AllocationFailed
            | Outcome::ReleaseFailed
            | Outcome::InterfaceCreationFailed(_) => return,
        };
        ops.get_or_create(&SubnetLabels { subnet_id }).inc_by(count);
    }

    fn background_sync(&self, ok: bool, secs: f64) {
        let status = if ok { "success" } else { "failed" };
        self.0
            .cloud
            .background_sync
            .get_or_create(&StatusLabels { status })
            .observe(secs);
    }

    fn resynced(&self) {
        self.0.resync.inc();
    }

    fn snapshot(&self, s: &Snapshot) {
        let m = &self.0;
        for (category, n) in [
            ("total", s.total),
            ("in-deficit", s.in_deficit),
            ("at-capacity", s.at_capacity),
        ] {
            m.nodes
                .get_or_create(&CategoryLabels { category })
                .set(gauge(n));
        }
        m.available.clear();
        m.used.clear();
        m.needed.clear();
        for (node, &(capacity, used, needed)) in &s.per_node {
            let labels = NodeLabels {
                target_node: node.clone(),
            };
            // Cilium sets `available_ips` to the node's capacity.
            m.available.get_or_create(&labels).set(gauge(capacity));
            m.used.get_or_create(&labels).set(gauge(used));
            m.needed.get_or_create(&labels).set(gauge(needed));
        }
        m.cloud.per_subnet.clear();
        for (subnet, &free) in &s.per_subnet {
            m.cloud
                .per_subnet
                .get_or_create(&SubnetZoneLabels {
                    subnet_id: subnet.clone(),
                    availability_zone: String::new(),
                })
                .set(gauge(free));
        }
    }
}

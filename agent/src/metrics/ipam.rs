//! IPAM metrics: the node's available, used and needed addresses (named like the operator's
//! `ipam_*_ips{target_node}`), capacity and use per pool and family (set at scrape time from
//! [`IpamUsage`]), and allocation and release operations with their durations (counted by the
//! daemon as they happen). Labels are the node name, pool names and `ipv4`/`ipv6`: bounded by
//! the pools the node holds.

use std::time::Duration;

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

use crate::ipam::{Family as IpFamily, manager::IpamUsage};

impl EncodeLabelValue for IpFamily {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// `target_node`: the node this agent runs on (one value per agent).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    /// The node name.
    pub target_node: String,
}

/// A pool and an address family.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// Pool name.
    pub pool: String,
    /// `ipv4` or `ipv6`.
    pub family: IpFamily,
}

/// How an IPAM operation ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Outcome {
    /// Addresses were handed out (or released): `success`.
    Success,
    /// The operation failed (pool exhausted, not ready, datapath error, …): `failure`.
    Failure,
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        let value = match self {
            Self::Success => "success",
            Self::Failure => "failure",
        };
        std::fmt::Write::write_str(encoder, value)
    }
}

/// `outcome`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// How it ended.
    pub outcome: Outcome,
}

/// The IPAM part of [`super::Metrics`].
#[derive(Debug)]
pub struct IpamMetrics {
    node: NodeLabels,
    available: Family<NodeLabels, Gauge>,
    used: Family<NodeLabels, Gauge>,
    needed: Family<NodeLabels, Gauge>,
    pool_capacity: Family<PoolLabels, Gauge>,
    pool_used: Family<PoolLabels, Gauge>,
    allocation_ops: Family<PoolLabels, Counter>,
    release_ops: Family<PoolLabels, Counter>,
    allocation_duration: Family<OutcomeLabels, Histogram>,
    release_duration: Histogram,
}

fn op_histogram() -> Histogram {
    // 50 µs … ~1.6 s: an allocation is microseconds, a full CNI ADD tens of milliseconds.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_05, 2.0, 16,
    ))
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl IpamMetrics {
    /// IPAM metrics of node `node`.
    #[must_use]
    pub fn new(node: &str) -> Self {
        Self {
            node: NodeLabels {
                target_node: node.to_owned(),
            },
            available: Family::default(),
            used: Family::default(),
            needed: Family::default(),
            pool_capacity: Family::default(),
            pool_used: Family::default(),
            allocation_ops: Family::default(),
            release_ops: Family::default(),
            allocation_duration: Family::new_with_constructor(op_histogram),
            release_duration: op_histogram(),
        }
    }

    /// Register every IPAM metric in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "ipam_available_ips",
            "Free IP addresses on the node, over every pool and family",
            self.available.clone(),
        );
        registry.register(
            "ipam_used_ips",
            "IP addresses in use on the node (pods and the router), over every pool and family",
            self.used.clone(),
        );
        registry.register(
            "ipam_needed_ips",
            "IP addresses the node still needs from the operator (pre-allocation demand or CRD minimum beyond what it holds)",
            self.needed.clone(),
        );
        registry.register(
            "ipam_pool_capacity",
            "IP addresses a pool can hand out on this node, per family",
            self.pool_capacity.clone(),
        );
        registry.register(
            "ipam_pool_used_ips",
            "IP addresses in use in a pool on this node, per family",
            self.pool_used.clone(),
        );
        registry.register(
            "ipam_ip_allocation_ops",
            "IP addresses allocated, per pool and family",
            self.allocation_ops.clone(),
        );
        registry.register(
            "ipam_ip_release_ops",
            "IP addresses released, per pool and family",
            self.release_ops.clone(),
        );
        registry.register(
            "ipam_allocation_duration_seconds",
            "Duration of an allocation for a pod (every family), by outcome",
            self.allocation_duration.clone(),
        );
        registry.register(
            "ipam_release_duration_seconds",
            "Duration of releasing a pod's addresses",
            self.release_duration.clone(),
        );
    }

    /// Set the gauges from a fresh [`IpamUsage`]; pools that disappeared are dropped.
    pub fn set_usage(&self, usage: &IpamUsage) {
        self.available
            .get_or_create(&self.node)
            .set(gauge(usage.available()));
        self.used.get_or_create(&self.node).set(gauge(usage.used()));
        self.needed
            .get_or_create(&self.node)
            .set(gauge(usage.needed));
        self.pool_capacity.clear();
        self.pool_used.clear();
        for p in &usage.pools {
            let labels = PoolLabels {
                pool: p.pool.clone(),
                family: p.family,
            };
            self.pool_capacity
                .get_or_create(&labels)
                .set(gauge(p.capacity));
            self.pool_used.get_or_create(&labels).set(gauge(p.used));
        }
    }

    /// One allocation for a pod finished after `took`; `addresses` are what it handed out
    /// (pool and family of each).
    pub fn allocated(&self, outcome: Outcome, took: Duration, addresses: &[(String, IpFamily)]) {
        self.allocation_duration
            .get_or_create(&OutcomeLabels { outcome })
            .observe(took.as_secs_f64());
        for (pool, family) in addresses {
            self.allocation_ops
                .get_or_create(&PoolLabels {
                    pool: pool.clone(),
                    family: *family,
                })
                .inc();
        }
    }

    /// One release of a pod's addresses (a release cannot fail) finished after `took`.
    pub fn released(&self, took: Duration, addresses: &[(String, IpFamily)]) {
        self.release_duration.observe(took.as_secs_f64());
        for (pool, family) in addresses {
            self.release_ops
                .get_or_create(&PoolLabels {
                    pool: pool.clone(),
                    family: *family,
                })
                .inc();
        }
    }
}

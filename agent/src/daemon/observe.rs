//! What the daemon shows about itself: the scrape-time metrics ([`Refresh`]), the
//! `weft-agent status` report (with the IPAM input it cannot use) and `weft-agent ipam
//! explain`. The state lock is held only to compute IPAM usage (pure, no
//! IO); the datapath is read from its pins on a blocking thread, and the store's counters are
//! atomics, so neither a scrape nor a status request holds up a CNI ADD for long.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    pin::Pin,
    sync::{Arc, atomic::Ordering},
    time::{Instant, SystemTime},
};

use tracing::warn;

use super::{Daemon, NodeStore, chain};
use crate::{
    cni::{
        proto::Response,
        types::{CniError, code},
    },
    datapath::{DatapathError, DatapathStats, read_stats},
    ipam::{
        Family,
        input::{NodeInput, PoolInput},
        manager::{IpamManager, IpamUsage},
        problems::{IpamProblem, node_problems},
    },
    metrics::Refresh,
    status::{
        AgentStatus, DatapathStatus, IpamStatus, MapStatus, PoolStatus, ProgramStatus, StoreStatus,
    },
    store::Snapshot,
};

/// Why the datapath's pins could not be read for a report.
#[derive(Debug, thiserror::Error)]
enum StatsError {
    /// A pinned map could not be read.
    #[error("reading the datapath's pins")]
    Read(#[from] DatapathError),
    /// The blocking read did not complete (panicked or cancelled).
    #[error("the read of the datapath's pins did not complete")]
    Join(#[from] tokio::task::JoinError),
}

/// IPAM as one lock acquisition saw it.
struct IpamView {
    usage: IpamUsage,
    /// Why new pods cannot get addresses now.
    not_ready: Option<String>,
    /// Unusable CiliumNode entries and pods whose pool does not exist.
    problems: Vec<IpamProblem>,
    snapshot: Arc<Snapshot>,
}

/// `restoring 2 endpoint address(es): pool default ipv6 ×2`: what the restore waits for.
fn restoring(unrestored: &[(IpAddr, String, String)]) -> String {
    let mut waits: BTreeMap<(&str, Family), usize> = BTreeMap::new();
    for (ip, _, pool) in unrestored {
        *waits.entry((pool.as_str(), Family::of(ip))).or_default() += 1;
    }
    let waits: Vec<String> = waits
        .into_iter()
        .map(|((pool, family), n)| format!("pool {pool} {family} ×{n}"))
        .collect();
    format!(
        "restoring {} endpoint address(es): {}",
        unrestored.len(),
        waits.join(", ")
    )
}

impl Daemon {
    /// IPAM now; with `problems`, also the unusable input (`status` asks, a scrape does not).
    async fn ipam_view(&self, problems: bool) -> IpamView {
        let mut state = self.state.lock().await;
        let usage = state.ipam.usage(Instant::now());
        let not_ready = match state.ipam.ready() {
            Err(e) => Some(e.to_string()),
            Ok(()) if !state.unrestored.is_empty() => Some(restoring(&state.unrestored)),
            Ok(()) if state.router.is_empty() => Some("no router address yet".to_owned()),
            Ok(()) => None,
        };
        let snapshot = Arc::clone(&state.snapshot);
        let problems = if problems {
            self.input_problems(&state.ipam, &snapshot)
        } else {
            Vec::new()
        };
        IpamView {
            usage,
            not_ready,
            problems,
            snapshot,
        }
    }

    /// Entries of the own CiliumNode that are not addresses, and pods whose pool does not exist.
    fn input_problems(&self, ipam: &IpamManager, snapshot: &Snapshot) -> Vec<IpamProblem> {
        let mut problems = snapshot
            .own_node()
            .map(|node| node_problems(self.config.ipam, &NodeInput::from(node)))
            .unwrap_or_default();
        let owners: Vec<String> = snapshot
            .pods
            .keys()
            .map(|(ns, name)| format!("{ns}/{name}"))
            .collect();
        let pools = PoolInput::all(snapshot.pools.values());
        problems.extend(ipam.missing_pools(owners.iter().map(String::as_str), snapshot, &pools));
        problems
    }

    /// `weft-agent ipam explain`: which pool each family of `owner` gets and why. An error
    /// (the CLI exits non-zero) when the pod is not in the store, its pool does not exist or
    /// selection fails; the details hold every family's line.
    pub(super) async fn explain(&self, owner: &str) -> Response {
        let state = self.state.lock().await;
        let snapshot = Arc::clone(&state.snapshot);
        let pools = PoolInput::all(snapshot.pools.values());
        let mut failure = owner.split_once('/').and_then(|(ns, name)| {
            let known = snapshot
                .pods
                .contains_key(&(ns.to_owned(), name.to_owned()));
            (!known).then(|| {
                format!(
                    "pod {owner} does not exist: no Pod {name} in namespace {ns} on node {} \
                     (check the name, and that the pod is scheduled to this node)",
                    self.opts.node_name
                )
            })
        });
        let mut lines = Vec::new();
        for (family, choice) in state.ipam.explain(owner, snapshot.as_ref(), &pools) {
            let (line, failed) = match choice {
                Ok(c) if state.ipam.pool_missing(&c.pool, &pools) => (
                    format!(
                        "{family}: pool {pool} ({}): pool {pool} does not exist (no \
                         CiliumPodIPPool {pool}); the pod's ADD waits until it is created",
                        c.rule,
                        pool = c.pool
                    ),
                    true,
                ),
                Ok(c) => (format!("{family}: pool {} ({})", c.pool, c.rule), false),
                Err(e) => (format!("{family}: error: {e}"), true),
            };
            if failed && failure.is_none() {
                failure = Some(line.clone());
            }
            lines.push(line);
        }
        match failure {
            None => Response::Explained(lines),
            Some(msg) => {
                Response::Error(CniError::new("", code::IPAM_FAILED, msg, lines.join("\n")))
            }
        }
    }

    async fn datapath_stats(&self) -> Result<DatapathStats, StatsError> {
        let pin_dir = self.opts.datapath.pin_dir.clone();
        let mode = self.attach_mode;
        Ok(tokio::task::spawn_blocking(move || read_stats(&pin_dir, mode)).await??)
    }

    /// The `weft-agent status` report.
    pub(super) async fn agent_status(&self) -> AgentStatus {
        let view = self.ipam_view(true).await;
        let mut problems = Vec::new();
        if let Some(reason) = &view.not_ready {
            problems.push(format!("IPAM not ready: {reason}"));
        }
        problems.extend(super::restore::problems(&self.records));
        let operator_error = view
            .snapshot
            .own_node()
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.ipam.as_ref())
            .and_then(|i| i.operator_status.as_ref())
            .map(|o| o.error.clone())
            .filter(|e| !e.is_empty());
        if let Some(error) = &operator_error {
            problems.push(format!("operator: {error}"));
        }
        if !view.snapshot.synced {
            problems.push("store: the first full read has not finished".to_owned());
        }
        for (path, reason) in &view.snapshot.problems {
            problems.push(format!("{}: {reason}", path.display()));
        }
        problems.extend(view.problems.iter().map(ToString::to_string));
        let records = match self.records.all() {
            Ok((records, corrupt)) => {
                problems.extend(
                    corrupt
                        .iter()
                        .map(|e| format!("endpoint record: {}", chain(e))),
                );
                records
            }
            Err(e) => {
                problems.push(format!("endpoint records: {}", chain(&e)));
                Vec::new()
            }
        };
        let stats = match self.datapath_stats().await {
            Ok(stats) => stats,
            Err(error) => {
                problems.push(format!("datapath: {}", chain(&error)));
                DatapathStats::default()
            }
        };
        for record in &records {
            if let Some(problem) = &record.routing_problem {
                problems.push(format!(
                    "endpoint {} ({}): not routed through its cloud interface: {problem}",
                    record.container_id, record.owner
                ));
            }
            let attached = stats.attachments.iter().any(|a| {
                a.program == agent_common::maps::PROG_FROM_CONTAINER
                    && a.ifname == record.host_ifname
            });
            if !attached && record.result.is_some() {
                problems.push(format!(
                    "endpoint {} ({}): from_container is not attached to {}",
                    record.container_id, record.owner, record.host_ifname
                ));
            }
        }
        let interfaces = self.devices.status();
        problems.extend(
            interfaces
                .iter()
                .filter(|i| i.state != "configured" && !i.state.starts_with("looking"))
                .map(|i| format!("cloud interface {} ({}): {}", i.id, i.mac, i.state)),
        );
        let pod_rules = if super::cloud::routes_pods(self.config.ipam) {
            match crate::datapath::netlink::cloud::list().await {
                Ok(rows) => rows.iter().map(ToString::to_string).collect(),
                Err(error) => {
                    problems.push(format!("pod routing rules: {}", chain(&error)));
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        AgentStatus {
            node: self.opts.node_name.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_seconds: self.started.elapsed().as_secs(),
            ipam: ipam_status(&self.config.ipam.to_string(), &view, operator_error),
            datapath: datapath_status(self, &stats),
            routing: self.routing_status(),
            store: self.store_status(view.snapshot.synced),
            endpoints: records.len(),
            interfaces,
            pod_rules,
            problems,
        }
    }

    fn store_status(&self, synced: bool) -> StoreStatus {
        let (kind, source) = match &self.store {
            NodeStore::Embedded(s) => ("embedded", s.root().display().to_string()),
            NodeStore::Kube(_) => ("kubernetes", "API server".to_owned()),
        };
        let stats = self.store.stats();
        StoreStatus {
            kind: kind.to_owned(),
            source,
            synced,
            writes: stats.writes.load(Ordering::Relaxed),
            conflicts: stats.conflicts.load(Ordering::Relaxed),
            failures: stats.failures.load(Ordering::Relaxed),
            last_write_seconds_ago: stats.last_write().map(|at| {
                SystemTime::now()
                    .duration_since(at)
                    .map_or(0, |d| d.as_secs())
            }),
        }
    }
}

fn ipam_status(mode: &str, view: &IpamView, operator_error: Option<String>) -> IpamStatus {
    let usage = &view.usage;
    IpamStatus {
        mode: mode.to_owned(),
        status: usage.status.clone(),
        pools: usage
            .pools
            .iter()
            .map(|p| PoolStatus {
                pool: p.pool.clone(),
                family: p.family.as_str().to_owned(),
                capacity: p.capacity,
                used: p.used,
                cidr: p.cidr.map(|c| c.to_string()),
                cidrs: p.cidrs,
            })
            .collect(),
        available: usage.available(),
        used: usage.used(),
        needed: usage.needed,
        not_ready: view.not_ready.clone(),
        operator_error,
    }
}

fn datapath_status(daemon: &Daemon, stats: &DatapathStats) -> DatapathStatus {
    let programs = [
        agent_common::maps::PROG_FROM_CONTAINER,
        agent_common::maps::PROG_TO_NETDEV,
        agent_common::maps::PROG_FROM_NETDEV,
        agent_common::maps::PROG_FROM_OVERLAY,
    ]
    .into_iter()
    .map(|program| ProgramStatus {
        program: program.to_owned(),
        devices: stats
            .attachments
            .iter()
            .filter(|a| a.program == program)
            .map(|a| a.ifname.clone())
            .collect(),
    })
    .collect();
    DatapathStatus {
        pin_dir: daemon.opts.datapath.pin_dir.display().to_string(),
        attach_mode: daemon.attach_mode.describe(),
        programs,
        maps: stats
            .maps
            .iter()
            .map(|m| MapStatus {
                name: m.name.to_owned(),
                entries: m.entries,
                capacity: m.capacity,
            })
            .collect(),
    }
}

impl Refresh for Daemon {
    fn refresh(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let view = self.ipam_view(false).await;
            self.metrics.ipam.set_usage(&view.usage);
            self.metrics.writes.set(self.store.stats());
            match self.records.all() {
                Ok((records, _corrupt)) => self.metrics.endpoints.set(endpoint_counts(&records)),
                Err(error) => warn!(error = %chain(&error), "/metrics without the endpoint counts"),
            }
            match self.datapath_stats().await {
                Ok(stats) => self.metrics.datapath.set(&stats),
                Err(error) => {
                    warn!(error = %chain(&error), "/metrics without the datapath figures");
                }
            }
        })
    }
}

/// Endpoints by state, from their records.
fn endpoint_counts(records: &[super::records::EndpointRecord]) -> crate::metrics::EndpointCounts {
    let mut counts = crate::metrics::EndpointCounts::default();
    for record in records {
        if record.deleting {
            counts.disconnecting += 1;
        } else if record.result.is_some() {
            counts.ready += 1;
        } else {
            counts.creating += 1;
        }
    }
    counts
}

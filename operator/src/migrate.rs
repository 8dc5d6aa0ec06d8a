//! The cluster-pool → multi-pool migration pass (`enable-cluster-pool-to-multi-pool-migration`)
//! and its dry run (`weft-operator migrate cluster-pool-to-multi-pool --dry-run`). The pass runs
//! once, after the configured pools were created and before the node manager sees any
//! CiliumNode ([`before`]): each node whose `spec.ipam.podCIDRs` the plan
//! (`weft_cluster_ipam::migration`) lets move gets them in `spec.ipam.pools.allocated` of
//! `ipam-default-ip-pool` and loses `podCIDRs`, in one update, retried on a conflict,
//! `multi-pool-migration-workers` nodes at a time. A refused node keeps its podCIDRs, and says
//! why in `status.ipam.operator-status.error` and in a Warning Event on the pool; so does a node
//! whose update failed. The allocator keeps both kinds' blocks taken. Failures never stop the
//! operator (as in Cilium).
//!
//! It owns no allocation: it only moves what the nodes list. It touches nothing but those
//! fields, and never the writer's queue (the writer does not run yet).

mod api;

use std::{sync::Arc, time::Duration};

use futures::{StreamExt as _, stream};
use ipnet::IpNet;
use kube::Client;
use serde_json::Value;
use tracing::{info, warn};
use weft_cluster_ipam::{
    migration::{FAILED_PREFIX, NodePlan, Planned, PoolState, migrated, plan, plan_node},
    node::NodeView,
    pool::PoolView,
};
use weft_k8s::Resource;

pub use self::api::KubeApi;
use crate::{
    chain,
    config::{IpamMode, MigrationConfig, OperatorConfig},
};

/// The Event reason of a refused node (on the pool, or the node when the pool is missing).
pub const REFUSED_REASON: &str = "MultiPoolMigrationRefused";

/// Why one step of the migration failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// A request failed.
    #[error("{verb} {what}")]
    Api {
        /// The verb.
        verb: &'static str,
        /// The object or resource.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A node's update kept conflicting with other writers.
    #[error("CiliumNode {node}: still conflicting after {attempts} attempts")]
    Conflicts {
        /// The node.
        node: String,
        /// Attempts made.
        attempts: usize,
    },
    /// The migrated object does not form a CiliumNode.
    #[error(transparent)]
    Decode(#[from] weft_k8s::DecodeError),
    /// The node changed between the plan and the update, and its new podCIDRs are refused.
    #[error("CiliumNode {node} changed during the migration; it is refused now")]
    RefusedNow {
        /// The node.
        node: String,
    },
}

/// The outcome of a write the migration makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Done.
    Done,
    /// The object changed since it was read (409).
    Conflict,
    /// The object is gone (404).
    Gone,
}

/// The calls the migration makes: [`KubeApi`], or a fake in tests.
pub trait Api: Sync {
    /// The pool `name` as the API server sends it (`None`: it does not exist).
    fn pool(&self, name: &str) -> impl Future<Output = Result<Option<Value>, MigrationError>>;
    /// Every CiliumNode.
    fn nodes(&self) -> impl Future<Output = Result<Vec<Value>, MigrationError>>;
    /// One CiliumNode (`None`: gone).
    fn node(&self, name: &str) -> impl Future<Output = Result<Option<Value>, MigrationError>>;
    /// Replaces a CiliumNode (its `resourceVersion` guards against lost updates).
    fn replace(&self, doc: &Value) -> impl Future<Output = Result<Written, MigrationError>>;
    /// Sets `status.ipam.operator-status.error` of a node.
    fn set_error(
        &self,
        node: &str,
        text: &str,
    ) -> impl Future<Output = Result<Written, MigrationError>>;
    /// Posts a Warning Event about `object` (best effort: a failure is logged).
    fn event(&self, object: &Value, message: &str) -> impl Future<Output = ()>;
}

/// How often a node's update is tried, and the first wait (Cilium: 10 steps from 10 ms, ×2.5).
const ATTEMPTS: usize = 10;
const FIRST_WAIT: Duration = Duration::from_millis(10);

/// What the pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Nodes whose podCIDRs moved.
    pub moved: Vec<String>,
    /// Nodes refused by the plan.
    pub refused: Vec<String>,
    /// Nodes whose update failed.
    pub failed: Vec<String>,
}

/// Runs `serve` (the node manager's loop) only once `pass` has ended; `None` when `stop`
/// resolves first. The one ordering the migration relies on: no block is handed out while
/// podCIDRs are still moving.
pub async fn before<T>(
    pass: impl Future<Output = ()>,
    stop: impl Future<Output = ()>,
    serve: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        () = pass => Some(serve.await),
        () = stop => None,
    }
}

/// The pass of the running operator: nothing unless the mode is multi-pool and the migration
/// is enabled. Reading the nodes is retried until it works (the node manager must not start
/// before); every failure after that is written to its node and logged.
pub async fn pass(client: &Client, config: &OperatorConfig, pool_resource: Option<Resource>) {
    if config.ipam != IpamMode::MultiPool || !config.migration.enabled {
        return;
    }
    let resources = pool_resource.map_or_else(Vec::new, |r| vec![r]);
    let api = KubeApi::new(client, resources);
    let mut wait = Duration::from_millis(200);
    let summary = loop {
        match run_pass(&api, &config.migration).await {
            Ok(summary) => break summary,
            Err(error) => {
                warn!(error = %chain(&error), "cluster-pool to multi-pool migration: reading the cluster failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    };
    info!(
        moved = summary.moved.len(),
        refused = summary.refused.len(),
        failed = summary.failed.len(),
        pool = %config.migration.default_pool,
        "cluster-pool to multi-pool migration pass done"
    );
}

/// The pool as the plan takes it.
fn pool_state(doc: Option<&Value>) -> PoolState {
    match doc.map(PoolView::from_json) {
        None => PoolState::Missing,
        Some(PoolView { spec: Ok(spec), .. }) => PoolState::Spec(spec),
        Some(PoolView { spec: Err(e), .. }) => PoolState::Unusable(Arc::new(e)),
    }
}

/// Reads the pool and the nodes, and plans.
async fn read_and_plan(
    api: &impl Api,
    pool_name: &str,
) -> Result<(Option<Value>, PoolState, Vec<Value>, Vec<Planned>), MigrationError> {
    let pool_doc = api.pool(pool_name).await?;
    let pool = pool_state(pool_doc.as_ref());
    let docs = api.nodes().await?;
    let views: Vec<NodeView> = docs.iter().map(NodeView::from_json).collect();
    let planned = plan(&views, pool_name, &pool);
    Ok((pool_doc, pool, docs, planned))
}

/// The pass over `api`.
///
/// # Errors
/// Only when the pool or the nodes cannot be read; a node's failure is written to it.
pub async fn run_pass(api: &impl Api, config: &MigrationConfig) -> Result<Summary, MigrationError> {
    let pool_name = config.default_pool.as_str();
    let (pool_doc, pool, docs, planned) = read_and_plan(api, pool_name).await?;
    let mut summary = Summary::default();
    let mut moves = Vec::new();
    for entry in planned {
        match &entry.plan {
            NodePlan::Nothing => {}
            NodePlan::Move { cidrs } => moves.push((entry.node.clone(), cidrs.clone())),
            NodePlan::Refuse(_) => {
                let text = entry.error_text().unwrap_or_default();
                warn!(node = %entry.node, error = %text, "CiliumNode not migrated to multi-pool");
                let doc = docs
                    .iter()
                    .find(|d| d["metadata"]["name"] == entry.node.as_str());
                let about = pool_doc.as_ref().or(doc);
                if let Some(about) = about {
                    api.event(about, &format!("CiliumNode {}: {text}", entry.node))
                        .await;
                }
                write_error(api, &entry.node, &text).await;
                summary.refused.push(entry.node);
            }
        }
    }
    let pool = &pool;
    let outcomes: Vec<(String, Result<bool, MigrationError>)> = stream::iter(moves)
        .map(|(node, cidrs)| async move {
            let outcome = move_node(api, &node, &cidrs, pool_name, pool).await;
            (node, outcome)
        })
        .buffer_unordered(config.workers.max(1))
        .collect()
        .await;
    for (node, outcome) in outcomes {
        match outcome {
            Ok(true) => summary.moved.push(node),
            Ok(false) => {}
            Err(error) => {
                let text = format!("{FAILED_PREFIX}{}", chain(&error));
                warn!(node = %node, error = %text, "CiliumNode not migrated to multi-pool");
                write_error(api, &node, &text).await;
                summary.failed.push(node);
            }
        }
    }
    summary.moved.sort();
    summary.failed.sort();
    Ok(summary)
}

/// Writes a node's error, logging a failure (the node manager writes it again later).
async fn write_error(api: &impl Api, node: &str, text: &str) {
    if let Err(error) = api.set_error(node, text).await {
        warn!(%node, error = %chain(&error), "could not write the migration's error to the CiliumNode");
    }
}

/// Moves one node's blocks, re-reading it after a conflict. `Ok(false)`: nothing to move
/// any more (gone, or moved meanwhile).
async fn move_node(
    api: &impl Api,
    node: &str,
    cidrs: &[IpNet],
    pool_name: &str,
    pool: &PoolState,
) -> Result<bool, MigrationError> {
    let mut cidrs = cidrs.to_vec();
    let mut wait = FIRST_WAIT;
    for attempt in 1..=ATTEMPTS {
        let Some(doc) = api.node(node).await? else {
            return Ok(false);
        };
        if attempt > 1 {
            // Re-planned on what the node holds now.
            match plan_node(&NodeView::from_json(&doc), pool_name, pool) {
                NodePlan::Nothing => return Ok(false),
                NodePlan::Move { cidrs: now } => cidrs = now,
                NodePlan::Refuse(_) => {
                    return Err(MigrationError::RefusedNow {
                        node: node.to_owned(),
                    });
                }
            }
        }
        match api.replace(&migrated(&doc, pool_name, &cidrs)).await? {
            Written::Done => {
                info!(%node, cidrs = ?cidrs, pool = %pool_name, "CiliumNode migrated to multi-pool");
                return Ok(true);
            }
            Written::Gone => return Ok(false),
            Written::Conflict if attempt < ATTEMPTS => {
                tokio::time::sleep(wait).await;
                wait = wait.mul_f64(2.5);
            }
            Written::Conflict => {}
        }
    }
    Err(MigrationError::Conflicts {
        node: node.to_owned(),
        attempts: ATTEMPTS,
    })
}

/// The dry run: plans against the cluster as it is and prints one line per node, then a
/// summary, to `out`. Writes nothing.
///
/// # Errors
/// The pool or the nodes cannot be read. `Ok(false)` when a node would be refused.
pub async fn dry_run(
    api: &impl Api,
    config: &MigrationConfig,
    out: &mut impl std::io::Write,
) -> Result<bool, DryRunError> {
    let (_, pool, _, planned) = read_and_plan(api, &config.default_pool).await?;
    let pool_line = match &pool {
        PoolState::Missing => "does not exist".to_owned(),
        PoolState::Unusable(e) => format!("cannot be used: {}", chain(e.as_ref())),
        PoolState::Spec(_) => "exists".to_owned(),
    };
    let mut refused = 0usize;
    let mut moves = 0usize;
    writeln!(out, "CiliumPodIPPool {} {pool_line}", config.default_pool)?;
    for entry in &planned {
        match entry.plan {
            NodePlan::Move { .. } => moves += 1,
            NodePlan::Refuse(_) => refused += 1,
            NodePlan::Nothing => {}
        }
        writeln!(out, "{entry}")?;
    }
    writeln!(
        out,
        "{moves} node(s) would move to pool {}, {refused} refused; nothing was written",
        config.default_pool
    )?;
    Ok(refused == 0)
}

/// `weft-operator migrate cluster-pool-to-multi-pool --dry-run`: the settings of `cli` over
/// the config directory's keys `file`, against the cluster of its kubeconfig; the report goes
/// to `out`.
///
/// # Errors
/// A setting, the connection, a read or the printing failed. `Ok(false)`: a node would be
/// refused.
pub async fn dry_run_cli(
    cli: &crate::cli::Cli,
    file: &std::collections::BTreeMap<String, String>,
    out: &mut impl std::io::Write,
) -> Result<bool, DryRunError> {
    let config = OperatorConfig::resolve(cli, file)?;
    let client = weft_k8s::client::connect(cli.kubeconfig.as_deref(), None, "").await?;
    dry_run(&KubeApi::new(&client, Vec::new()), &config.migration, out).await
}

/// Why the dry run could not finish.
#[derive(Debug, thiserror::Error)]
pub enum DryRunError {
    /// A setting is unusable.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// No Kubernetes client.
    #[error(transparent)]
    Connect(#[from] weft_k8s::client::ConnectError),
    /// The cluster could not be read.
    #[error(transparent)]
    Read(#[from] MigrationError),
    /// The report could not be printed.
    #[error("printing the report")]
    Print(#[from] std::io::Error),
}

#[cfg(test)]
mod tests;

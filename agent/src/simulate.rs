//! `weft-agent ipam simulate`: the offline planner. It runs the agent's own IPAM code over an
//! embedded store directory — router addresses first, then every pod in namespace/name order —
//! and reports each pod's pool and addresses (or Cilium's error text) and the CiliumNode as the
//! agent would write it. Nothing is written; randomness is seeded, so a plan is repeatable.

use std::{collections::BTreeMap, path::Path, time::Instant};

use serde::Serialize;
use serde_json::Value;

use crate::{
    config::AgentConfig,
    crd::nodeconfig::resolve_node_config,
    daemon::ipam_config,
    ipam::manager::IpamManager,
    store::embedded::{load_snapshot, render_node},
};

/// The planner's output.
#[derive(Debug, Serialize)]
pub struct Plan {
    /// IPAM mode used.
    pub ipam: String,
    /// Router addresses (owner `router`).
    pub router: Vec<String>,
    /// Per `namespace/name`: the outcome.
    pub pods: BTreeMap<String, PodPlan>,
    /// The own CiliumNode with the agent's write-back applied.
    #[serde(rename = "ciliumNode")]
    pub cilium_node: Value,
    /// Store documents that could not be read.
    pub problems: BTreeMap<String, String>,
}

/// What one pod would get.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum PodPlan {
    /// Addresses per family.
    Allocated {
        /// `ip` → pool and the rule that chose it.
        ips: BTreeMap<String, String>,
    },
    /// Cilium's error text.
    Failed {
        /// The error.
        error: String,
    },
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The store cannot be read.
    #[error("reading the store")]
    Store(#[from] crate::store::StoreError),
    /// A CiliumNodeConfig for the node is invalid.
    #[error("CiliumNodeConfig for the node")]
    NodeConfig(#[from] crate::crd::nodeconfig::NodeConfigError),
    /// The configuration is invalid.
    #[error("configuration")]
    Config(#[from] crate::config::ConfigError),
    /// IPAM cannot be set up.
    #[error("IPAM")]
    Ipam(#[from] crate::ipam::manager::IpamError),
}

/// Plan allocations for the pods in `store` on node `node_name`.
///
/// # Errors
/// The store cannot be read, the configuration is invalid, or IPAM cannot be set up.
pub fn plan(
    store: &Path,
    node_name: &str,
    file: &BTreeMap<String, String>,
    flags: &BTreeMap<String, String>,
) -> Result<Plan, SimulateError> {
    let snapshot = load_snapshot(store, node_name)?;
    let labels = snapshot
        .own_node()
        .map(|n| n.metadata.labels.clone())
        .unwrap_or_default();
    let configs: Vec<_> = snapshot.node_configs.values().cloned().collect();
    let per_node = resolve_node_config(&configs, &labels)?;
    crate::config::keys::warn_unknown(file, &per_node);
    let config = AgentConfig::resolve([file, &per_node, flags])?;
    let mut ipam = IpamManager::new(ipam_config(&config))?;
    ipam.observe_node(snapshot.own_node());
    ipam.restore_finished();
    let mut rng = fastrand::Rng::with_seed(0x7765_6674);
    let pools: Vec<_> = snapshot.pools.values().cloned().collect();
    let now = Instant::now();
    let router = match ipam.allocate(
        crate::daemon::ROUTER_OWNER,
        &snapshot,
        &pools,
        &mut rng,
        now,
    ) {
        Ok(list) => list.into_iter().map(|a| a.ip.to_string()).collect(),
        Err(e) => vec![format!("error: {e}")],
    };
    let mut pods = BTreeMap::new();
    for (ns, name) in snapshot.pods.keys() {
        let owner = format!("{ns}/{name}");
        let outcome = match ipam.allocate(&owner, &snapshot, &pools, &mut rng, now) {
            Ok(list) => PodPlan::Allocated {
                ips: list
                    .into_iter()
                    .map(|a| (a.ip.to_string(), format!("{} ({})", a.pool, a.rule)))
                    .collect(),
            },
            Err(e) => PodPlan::Failed {
                error: e.to_string(),
            },
        };
        pods.insert(owner, outcome);
    }
    let write = ipam.node_write(snapshot.own_node(), now);
    let cilium_node = render_node(store, node_name, &write).unwrap_or(Value::Null);
    Ok(Plan {
        ipam: config.ipam.to_string(),
        router,
        pods,
        cilium_node,
        problems: snapshot
            .problems
            .iter()
            .map(|(p, e)| (p.display().to_string(), e.clone()))
            .collect(),
    })
}

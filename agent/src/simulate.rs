//! `weft-agent ipam simulate`: the offline planner. It runs the agent's own IPAM code over an
//! embedded store directory — a running agent's endpoint records and router addresses first
//! (`--state-dir`), then the router, then every other pod in namespace/name order — and reports
//! each pod's pool and addresses (or Cilium's error text), how many more addresses the node
//! needs, what in the store cannot be used, and the CiliumNode as the agent would write it.
//! Nothing is written; randomness is seeded, so a plan is repeatable. A store directory or node
//! that does not exist is an error, not an empty plan.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::{Path, PathBuf},
    time::Instant,
};

use serde::Serialize;
use serde_json::Value;

use crate::{
    config::AgentConfig,
    crd::{node::CiliumNode, nodeconfig::resolve_node_config},
    daemon::{RECORDS_DIR, ROUTER_FILE, ROUTER_OWNER, RecordError, Records, ipam_config},
    error::chain,
    ipam::{
        Family,
        input::{NodeInput, PoolInput},
        manager::IpamManager,
        mode::AllocatorKind,
        problems::node_problems,
    },
    store::{
        Snapshot,
        embedded::{load_snapshot, render_node},
    },
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
    /// Per family (`ipv4`, `ipv6`): addresses the node needs beyond what it holds so the router
    /// and every pod get one (and the CRD minimum is met). Single-pool modes only (`crd`,
    /// `azure`, `alibabacloud`, `eni`, host-scope); multi-pool asks per pool in the
    /// CiliumNode's `spec.ipam.pools.requested`.
    pub needed: BTreeMap<String, u64>,
    /// The own CiliumNode with the agent's write-back applied.
    #[serde(rename = "ciliumNode")]
    pub cilium_node: Value,
    /// What cannot work: store documents that could not be read, CiliumNode entries that are
    /// not addresses, pods whose pool does not exist, a deficit of addresses.
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
    /// The store directory does not exist.
    #[error(
        "store directory {path} does not exist; pass the directory weft-agent run --store uses"
    )]
    NoStore {
        /// The directory given.
        path: PathBuf,
    },
    /// The node has no CiliumNode document in the store.
    #[error(
        "node {node} is not in the store: no readable CiliumNode {node} in {dir}{reason}; check \
         --node-name"
    )]
    NoNode {
        /// The node asked for.
        node: String,
        /// The store's CiliumNode directory.
        dir: PathBuf,
        /// Why its document could not be read, if it exists.
        reason: String,
    },
    /// The state directory does not exist.
    #[error(
        "state directory {path} does not exist; pass the directory the running agent uses \
         (weft-agent run --state-dir)"
    )]
    NoStateDir {
        /// The directory given.
        path: PathBuf,
    },
    /// The endpoint records cannot be read.
    #[error("reading the endpoint records")]
    Records(#[from] RecordError),
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

/// Where the plan's input comes from.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// Embedded store directory.
    pub store: &'a Path,
    /// The node to plan for.
    pub node_name: &'a str,
    /// A running agent's state directory: its records and router addresses are kept.
    pub state_dir: Option<&'a Path>,
}

/// Addresses a running agent holds: its router's and its endpoint records' (owner, ip, pool).
struct Held {
    router: Vec<(IpAddr, String)>,
    endpoints: Vec<(String, IpAddr, String)>,
}

fn held(state_dir: Option<&Path>) -> Result<Held, SimulateError> {
    let mut held = Held {
        router: Vec::new(),
        endpoints: Vec::new(),
    };
    let Some(dir) = state_dir else {
        return Ok(held);
    };
    if !dir.is_dir() {
        return Err(SimulateError::NoStateDir {
            path: dir.to_path_buf(),
        });
    }
    held.router = std::fs::read(dir.join(ROUTER_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if dir.join(RECORDS_DIR).is_dir() {
        let (records, _) = Records::open(dir)?.all()?;
        held.endpoints = records
            .into_iter()
            .flat_map(|r| {
                let owner = r.owner;
                r.addrs
                    .into_iter()
                    .map(move |a| (owner.clone(), a.ip, a.pool))
            })
            .collect();
    }
    Ok(held)
}

/// Plan allocations for the pods in the store on the node of `input`.
///
/// # Errors
/// The store, the node or the state directory does not exist or cannot be read, the
/// configuration is invalid, or IPAM cannot be set up.
pub fn plan(
    input: PlanInput<'_>,
    file: &BTreeMap<String, String>,
    flags: &BTreeMap<String, String>,
) -> Result<Plan, SimulateError> {
    let (store, node_name) = (input.store, input.node_name);
    if !store.is_dir() {
        return Err(SimulateError::NoStore {
            path: store.to_path_buf(),
        });
    }
    let snapshot = load_snapshot(store, node_name)?;
    let own = own_node(&snapshot, store, node_name)?;
    let configs: Vec<_> = snapshot.node_configs.values().cloned().collect();
    let per_node = resolve_node_config(&configs, &own.metadata.labels)?;
    // A plan allocates nothing: refused keys are only warned about.
    crate::config::guard::review([("config file", file), ("CiliumNodeConfig", &per_node)])
        .enforce(true)
        .ok();
    let config = AgentConfig::resolve([file, &per_node, flags])?;
    let held = held(input.state_dir)?;
    let mut ipam = IpamManager::new(ipam_config(&config))?;
    ipam.observe_node(Some(own));
    let now = Instant::now();
    let mut problems: BTreeMap<String, String> = snapshot
        .problems
        .iter()
        .map(|(p, e)| (p.display().to_string(), e.clone()))
        .collect();
    let mut pods = restore_held(&mut ipam, &held, now, &mut problems);
    ipam.restore_finished();
    let mut rng = fastrand::Rng::with_seed(0x7765_6674);
    let pools = PoolInput::all(snapshot.pools.values());
    let router = if held.router.is_empty() {
        match ipam.allocate(ROUTER_OWNER, &snapshot, &pools, &mut rng, now) {
            Ok(list) => list.into_iter().map(|a| a.ip.to_string()).collect(),
            Err(e) => vec![format!("error: {}", chain(&e))],
        }
    } else {
        held.router.iter().map(|(ip, _)| ip.to_string()).collect()
    };
    for (ns, name) in snapshot.pods.keys() {
        let owner = format!("{ns}/{name}");
        if pods.contains_key(&owner) {
            continue;
        }
        let outcome = match ipam.allocate(&owner, &snapshot, &pools, &mut rng, now) {
            Ok(list) => PodPlan::Allocated {
                ips: list
                    .into_iter()
                    .map(|a| (a.ip.to_string(), format!("{} ({})", a.pool, a.rule)))
                    .collect(),
            },
            Err(e) => PodPlan::Failed { error: chain(&e) },
        };
        pods.insert(owner, outcome);
    }
    for problem in node_problems(config.ipam, &NodeInput::from(own)) {
        problems.insert(problem.subject(), problem.to_string());
    }
    let owners: Vec<String> = snapshot
        .pods
        .keys()
        .map(|(ns, name)| format!("{ns}/{name}"))
        .collect();
    for problem in ipam.missing_pools(owners.iter().map(String::as_str), &snapshot, &pools) {
        problems.insert(problem.subject(), problem.to_string());
    }
    let wanted = u64::try_from(pods.len()).map_or(u64::MAX, |n| n.saturating_add(1));
    let needed = deficit(&mut ipam, config.ipam.allocator(), wanted, now);
    for (family, n) in needed.iter().filter(|(_, n)| **n > 0) {
        problems.insert(
            format!("node {node_name} {family}"),
            format!(
                "needs {n} more {family} address(es): the router and {} pod(s) want {wanted}",
                pods.len()
            ),
        );
    }
    let write = ipam.node_write(Some(own), now);
    let cilium_node = render_node(store, node_name, &write).unwrap_or(Value::Null);
    Ok(Plan {
        ipam: config.ipam.to_string(),
        router,
        pods,
        needed,
        cilium_node,
        problems,
    })
}

/// The own CiliumNode of `snapshot`, or why there is none (with its document's read error).
fn own_node<'a>(
    snapshot: &'a Snapshot,
    store: &Path,
    node_name: &str,
) -> Result<&'a CiliumNode, SimulateError> {
    snapshot.own_node().ok_or_else(|| {
        let dir = store.join("ciliumnodes");
        let reason = snapshot
            .problems
            .iter()
            .find(|(p, _)| p.starts_with(&dir) && p.file_stem().is_some_and(|s| s == node_name))
            .map(|(p, e)| format!(" ({}: {e})", p.display()))
            .unwrap_or_default();
        SimulateError::NoNode {
            node: node_name.to_owned(),
            dir,
            reason,
        }
    })
}

/// Take the running agent's addresses again (records, then router); per record owner, what it
/// keeps. An address that cannot be taken again is a problem.
fn restore_held(
    ipam: &mut IpamManager,
    held: &Held,
    now: Instant,
    problems: &mut BTreeMap<String, String>,
) -> BTreeMap<String, PodPlan> {
    let mut pods: BTreeMap<String, PodPlan> = BTreeMap::new();
    for (owner, ip, pool) in &held.endpoints {
        let restored = format!("{owner} [restored]");
        let outcome = match ipam.restore(*ip, &restored, pool, now) {
            Ok(()) => format!("{pool} (endpoint record)"),
            Err(e) => {
                let why = chain(&e);
                let text = format!("{pool} (endpoint record, not restorable: {why})");
                problems.insert(format!("endpoint record of {owner} {ip}"), why);
                text
            }
        };
        if let PodPlan::Allocated { ips } =
            pods.entry(owner.clone())
                .or_insert_with(|| PodPlan::Allocated {
                    ips: BTreeMap::new(),
                })
        {
            ips.insert(ip.to_string(), outcome);
        }
    }
    for (ip, pool) in &held.router {
        if let Err(e) = ipam.restore(*ip, ROUTER_OWNER, pool, now) {
            problems.insert(format!("router address {ip}"), chain(&e));
        }
    }
    pods
}

/// Per enabled family, what `wanted` owners (router and pods) need beyond the node's capacity,
/// or the CRD minimum, whichever is more; single-pool modes only.
fn deficit(
    ipam: &mut IpamManager,
    kind: AllocatorKind,
    wanted: u64,
    now: Instant,
) -> BTreeMap<String, u64> {
    if !matches!(
        kind,
        AllocatorKind::Crd | AllocatorKind::MultiPoolLinear | AllocatorKind::HostScope
    ) {
        return BTreeMap::new();
    }
    let usage = ipam.usage(now);
    let mut out = BTreeMap::new();
    for family in [Family::V4, Family::V6] {
        let pools: Vec<_> = usage.pools.iter().filter(|p| p.family == family).collect();
        let enabled = match family {
            Family::V4 => ipam.config().ipv4,
            Family::V6 => ipam.config().ipv6,
        };
        if !enabled {
            continue;
        }
        let capacity: u64 = pools.iter().map(|p| p.capacity).sum();
        let short = wanted.saturating_sub(capacity);
        let minimum = if kind == AllocatorKind::Crd {
            usage.needed
        } else {
            0
        };
        out.insert(family.as_str().to_owned(), short.max(minimum));
    }
    out
}

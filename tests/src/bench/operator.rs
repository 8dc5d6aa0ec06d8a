//! `cargo xtask bench operator` (issues 13 and 29): the release `weft-operator` against the
//! Kubernetes API emulator when N CiliumNodes appear at once (1000 and 10,000 by default, each
//! size in the same run), in cluster-pool mode (a /24 of a /8 each)
//! and in multi-pool mode (two CiliumPodIPPools; each node asks for 8 addresses in each, as an
//! agent with pre-allocation 8 does): how long until every node holds its blocks, how many API
//! writes that took per node, the operator's memory and CPU time; then 100 nodes deleted (their
//! v1 Nodes; the operator deletes the CiliumNodes) and 100 added: how long until the new ones
//! are served. No block may be held by two nodes: every state the watch shows is checked, and the
//! table counts each time it happened. Times are compared with a floor measured in the same run
//! on a fresh emulator with no operator ([`floor`]). After every size, one table per size; at
//! the end, per mode and size, the time to serve against the floor, the operator's CPU time per
//! node and its peak RSS, and the slope of the CPU time per node between the sizes ([`scale`]):
//! an operator whose cost per node grows with the cluster shows it there. Nothing is asserted
//! on time; the issues' targets are printed beside the numbers.
//!
//! The v1 Nodes exist before the timed part starts (a node registers before its agent creates
//! its CiliumNode), and the CiliumNodes are stored through [`Emulator::put`], as fast as the
//! emulator takes them. The emulator runs in this process, on one thread.

pub(super) mod blocks;
mod floor;
mod http;
mod phase;
mod report;
mod scale;

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::PathBuf,
    time::Duration,
};

use anyhow::{Context as _, Result, ensure};
use ipnet::IpNet;
use serde_json::{Value, json};

use self::{
    blocks::{Mode, ProcReading, blocks_of, read_proc},
    floor::Floor,
    phase::{Phase, finish_phase, moved, phase},
};
use crate::{kube::Emulator, operator::Operator, unique};

/// The targets.
const TARGET_SECONDS: f64 = 5.0;
const TARGET_WRITES: f64 = 2.0;
const TARGET_RSS_MIB: f64 = 50.0;
/// Multi-pool: the pools, their CIDRs and block size, and what each node asks for in each.
const POOLS: [(&str, &str, u8); 2] = [("blue", "10.16.0.0/12", 27), ("green", "10.32.0.0/12", 27)];
const POOL_NAMES: [&str; 2] = [POOLS[0].0, POOLS[1].0];
const PRE_ALLOCATE: u64 = 8;
/// Cluster-pool block size.
const CLUSTER_MASK: u8 = 24;
/// Quiet time after the last node is served, so late writes are counted too.
const SETTLE: Duration = Duration::from_secs(3);

/// Options of the operator benchmark.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// CiliumNodes created at once: one run of each mode per size, in this order.
    pub nodes: Vec<usize>,
    /// Nodes deleted, and nodes added, afterwards (at every size).
    pub churn: usize,
    /// The cluster-pool CIDR /24 blocks are carved from.
    pub cluster_cidr: IpNet,
    /// How long a phase may take before the run fails.
    pub timeout: Duration,
}

impl Default for OperatorOptions {
    fn default() -> Self {
        Self {
            nodes: vec![1000, 10_000],
            churn: 100,
            cluster_cidr: "10.0.0.0/8".parse().expect("a CIDR"),
            timeout: Duration::from_mins(2),
        }
    }
}

fn node_name(i: usize) -> String {
    format!("node-{i}")
}

/// The CiliumNode an agent creates for node `i` in `mode`.
fn cilium_node(i: usize, mode: Mode) -> Value {
    let ipam = match mode {
        Mode::ClusterPool => json!({}),
        Mode::MultiPool(pools) => {
            let requested: Vec<Value> = pools
                .iter()
                .map(|p| json!({"pool": p, "needed": {"ipv4-addrs": PRE_ALLOCATE}}))
                .collect();
            json!({"pools": {"requested": requested}})
        }
    };
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": node_name(i)},
        "spec": {"addresses": [{"type": "InternalIP", "ip": format!("172.16.{}.{}", i / 250, i % 250 + 1)}], "ipam": ipam},
    })
}

fn v1_node(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node_name(i), "labels": {"kubernetes.io/hostname": node_name(i)}},
    })
}

/// What a perfect operator writes for node `i` (the floor's writes).
fn ideal_patch(i: usize, mode: Mode, cluster: IpNet) -> Value {
    // The i-th block of `range`: its network plus i blocks.
    let block = |range: IpNet, mask: u8| -> String {
        let offset = u128::try_from(i).unwrap_or(0) << (range.max_prefix_len() - mask);
        let addr = match range.network() {
            IpAddr::V4(a) => u32::try_from(u128::from(u32::from(a)) + offset)
                .map_or(IpAddr::V4(a), |a| IpAddr::V4(Ipv4Addr::from(a))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) + offset)),
        };
        IpNet::new(addr, mask)
            .map(|n| n.to_string())
            .unwrap_or_default()
    };
    match mode {
        Mode::ClusterPool => {
            json!({"spec": {"ipam": {"podCIDRs": [block(cluster, CLUSTER_MASK)]}}})
        }
        Mode::MultiPool(_) => {
            let allocated: Vec<Value> = POOLS
                .iter()
                .map(|(p, range, mask)| {
                    json!({"pool": p, "cidrs": [block(range.parse().expect("a CIDR"), *mask)]})
                })
                .collect();
            json!({"spec": {"ipam": {"pools": {"allocated": allocated}}}})
        }
    }
}

/// Ranges blocks must come from in `mode`: (pool, CIDR, block prefix length).
fn ranges(mode: Mode, cluster: IpNet) -> Vec<(&'static str, IpNet, u8)> {
    match mode {
        Mode::ClusterPool => vec![("cluster-pool", cluster, CLUSTER_MASK)],
        Mode::MultiPool(_) => POOLS
            .iter()
            .map(|(p, c, m)| (*p, c.parse().expect("a CIDR"), *m))
            .collect(),
    }
}

/// What one mode measured at one size.
#[derive(Debug)]
struct ModeResult {
    mode: Mode,
    nodes: usize,
    floor: Floor,
    idle: ProcReading,
    burst: Phase,
    churn: Phase,
    log_warnings: usize,
}

/// The kubeconfig file, removed on drop.
struct Kubeconfig(PathBuf);

impl Drop for Kubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A fresh emulator for `mode` (its pools, `nodes` v1 Nodes), and the operator started on it,
/// done listing.
fn start_cluster(
    opts: &OperatorOptions,
    nodes: usize,
    mode: Mode,
) -> Result<(Emulator, Kubeconfig, Operator, ProcReading)> {
    let emu = Emulator::start();
    let kubeconfig = Kubeconfig(std::env::temp_dir().join(unique("weft-bench-op-kubeconfig-")));
    emu.write_kubeconfig(&kubeconfig.0);
    let cidr = opts.cluster_cidr.to_string();
    let mask = CLUSTER_MASK.to_string();
    let mut flags = vec!["--leader-election=false", "--ipam", mode.name()];
    match mode {
        Mode::ClusterPool => flags.extend([
            "--cluster-pool-ipv4-cidr",
            &cidr,
            "--cluster-pool-ipv4-mask-size",
            &mask,
        ]),
        Mode::MultiPool(_) => {
            for (name, range, mask) in POOLS {
                emu.put(json!({
                    "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
                    "metadata": {"name": name},
                    "spec": {"ipv4": {"cidrs": [range], "maskSize": mask}},
                }));
            }
        }
    }
    for i in 0..nodes {
        emu.put(v1_node(i));
    }
    let mut op = Operator::new(&kubeconfig.0, &flags);
    op.spawn();
    op.wait_log("every CiliumNode listed", Duration::from_secs(30));
    let pid = op.pid().context("the operator exited")?;
    std::thread::sleep(Duration::from_secs(1));
    let idle = read_proc(pid)?;
    Ok((emu, kubeconfig, op, idle))
}

fn run_mode(opts: &OperatorOptions, nodes: usize, mode: Mode) -> Result<ModeResult> {
    let cluster = opts.cluster_cidr;
    let ranges = ranges(mode, cluster);
    let floor = floor::measure(
        nodes,
        |emu, i| {
            emu.put(cilium_node(i, mode));
        },
        |i| ideal_patch(i, mode, cluster),
        |n| blocks::served(&blocks_of(n, mode), mode),
    )?;
    eprintln!("{} at {nodes}: floor {floor:?}", mode.name());
    let (emu, _kubeconfig, mut op, idle) = start_cluster(opts, nodes, mode)?;
    let pid = op.pid().context("the operator exited")?;

    // 1. Every node at once.
    emu.requests().reset();
    let want: BTreeSet<String> = (0..nodes).map(node_name).collect();
    let writes = || {
        for i in 0..nodes {
            emu.put(cilium_node(i, mode));
        }
    };
    let none = BTreeSet::new();
    let progress = phase(
        &emu,
        &mut op,
        (mode, &ranges),
        (&want, &none),
        opts.timeout,
        writes,
    )?;
    let burst = finish_phase(&emu, pid, mode, nodes, progress, idle.cpu_s)?;
    eprintln!(
        "{}: {} CiliumNodes stored in {:.1?}, all served {:.1?} after the first",
        mode.name(),
        nodes,
        burst.progress.stored,
        burst.all_served()
    );

    // 2. Churn: `churn` v1 Nodes deleted (the operator deletes their CiliumNodes), as many
    // new nodes added, one of each after the other.
    emu.requests().reset();
    let gone: BTreeSet<String> = (0..opts.churn).map(node_name).collect();
    let added: Vec<usize> = (nodes..nodes + opts.churn).collect();
    let want: BTreeSet<String> = added.iter().copied().map(node_name).collect();
    let cpu_before = read_proc(pid)?.cpu_s;
    let writes = || {
        for (old, new) in gone.iter().zip(&added) {
            emu.remove("nodes", None, old);
            emu.put(v1_node(*new));
            emu.put(cilium_node(*new, mode));
        }
    };
    let progress = phase(
        &emu,
        &mut op,
        (mode, &ranges),
        (&want, &gone),
        opts.timeout,
        writes,
    )?;
    let mut churn = finish_phase(&emu, pid, mode, opts.churn, progress, cpu_before)?;
    churn.moved += moved(
        burst.progress.holders.nodes(),
        churn.progress.holders.nodes(),
    );

    let log = op.log();
    let log_warnings = log.lines().filter(|l| l.contains("WARN")).count();
    let code = op.stop();
    ensure!(
        code == Some(0),
        "weft-operator exited {code:?} on SIGTERM:\n{log}"
    );
    Ok(ModeResult {
        mode,
        nodes,
        floor,
        idle,
        burst,
        churn,
        log_warnings,
    })
}

/// Measure both modes at every size, print, clean up.
///
/// # Errors
/// The operator is missing or exits, a phase times out, or a block is held by two nodes.
pub fn run(opts: &OperatorOptions) -> Result<()> {
    ensure!(
        !opts.nodes.is_empty() && opts.nodes.iter().all(|n| *n > 0 && opts.churn <= *n),
        "need at least one size, every size > 0 and churn <= every size"
    );
    let _ = crate::bin_path("weft-operator");
    let mut sizes = Vec::new();
    for &nodes in &opts.nodes {
        let mut results = Vec::new();
        for mode in [Mode::ClusterPool, Mode::MultiPool(&POOL_NAMES)] {
            results.push(run_mode(opts, nodes, mode)?);
        }
        report::print(opts, nodes, &results);
        sizes.push(results);
    }
    scale::print(&sizes);
    Ok(())
}

//! `cargo xtask bench azure` (issue 18): the release `weft-operator --ipam azure` against the
//! ARM emulator and the Kubernetes API emulator when 100 and then 1000 VMSS nodes appear at
//! once, each needing `pre-allocate` 8: seconds until every node's `spec.ipam.pool` holds 8,
//! the rate-limited ARM calls per node (and the unlimited LRO polls), the peak request rate in
//! any one-second window against the configured qps and burst, and the operator's peak RSS.
//!
//! The floor is the rate limit itself: a round per node needs a GET and a PUT (Cilium's
//! design), so at `qps` and `burst`, `n` nodes need at least `(2n - burst) / qps` seconds. The
//! ratio to it is printed; nothing is asserted on time. The instances exist before the operator
//! starts (a node's VM exists before its agent writes the CiliumNode), so its first full resync
//! knows them all.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, ensure};
use serde_json::json;

use super::operator::blocks::read_proc;
use crate::{
    azure::{ArmEmulator, Operation, Scenario},
    kube::Emulator,
    operator::Operator,
    unique,
};

/// Options of the Azure benchmark.
#[derive(Debug, Clone)]
pub struct AzureOptions {
    /// Node counts, one run each.
    pub nodes: Vec<usize>,
    /// `--limit-ipam-api-qps`.
    pub qps: f64,
    /// `--limit-ipam-api-burst`.
    pub burst: u32,
    /// How long a run may take before it fails.
    pub timeout: Duration,
}

impl Default for AzureOptions {
    fn default() -> Self {
        Self {
            nodes: vec![100, 1000],
            qps: 4.0,
            burst: 20,
            timeout: Duration::from_mins(30),
        }
    }
}

const PRE_ALLOCATE: usize = 8;

fn scenario(nodes: usize) -> Result<Scenario> {
    let instances: Vec<String> = (0..nodes).map(|i| format!("{{index: {i}}}")).collect();
    Scenario::from_yaml(&format!(
        r"
subscriptionId: 11111111-2222-3333-4444-555555555555
resourceGroup: MC_weft_bench_westeurope
vnets:
  - name: vnet
    subnets: [{{name: nodes, cidr: 10.0.0.0/12}}]
scaleSets:
  - name: pool
    nics: [{{name: pool, subnet: nodes}}]
    instances: [{}]
pageSize: 100
",
        instances.join(", ")
    ))
    .map_err(anyhow::Error::msg)
}

/// What one run measured.
#[derive(Debug)]
struct RunResult {
    nodes: usize,
    seconds: f64,
    limited_calls: u64,
    polls: u64,
    peak_rate: usize,
    hwm_mib: f64,
    floor: f64,
}

struct Kubeconfig(PathBuf);

impl Drop for Kubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run_one(opts: &AzureOptions, nodes: usize) -> Result<RunResult> {
    let arm = ArmEmulator::start(scenario(nodes)?);
    let emu = Emulator::start();
    let kubeconfig = Kubeconfig(std::env::temp_dir().join(unique("weft-bench-az-kubeconfig-")));
    emu.write_kubeconfig(&kubeconfig.0);
    let group = arm.resource_group_id();
    let instance = |i: usize| {
        format!(
            "{group}/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/{i}"
        )
    };
    for i in 0..nodes {
        emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{i}")},
            "spec": {"providerID": format!("azure://{}", instance(i))},
        }));
    }
    let url = arm.url();
    let (qps, burst) = (opts.qps.to_string(), opts.burst.to_string());
    let mut op = Operator::new(
        &kubeconfig.0,
        &[
            "--ipam=azure",
            "--leader-election=false",
            "--azure-arm-endpoint",
            &url,
            "--azure-imds-endpoint",
            &url,
            "--limit-ipam-api-qps",
            &qps,
            "--limit-ipam-api-burst",
            &burst,
        ],
    );
    op.spawn();
    op.wait_log(
        "initial synchronization with instances API done",
        opts.timeout,
    );
    // The first resync's calls are not part of the nodes' rounds.
    let before: Vec<_> = arm.requests();
    let started = Instant::now();
    for i in 0..nodes {
        emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": format!("node-{i}")},
            "spec": {"instance-id": instance(i).to_lowercase(), "ipam": {}},
        }));
    }
    loop {
        let served = emu
            .list("ciliumnodes")
            .iter()
            .filter(|n| {
                n["spec"]["ipam"]["pool"]
                    .as_object()
                    .map_or(0, serde_json::Map::len)
                    >= PRE_ALLOCATE
            })
            .count();
        if served == nodes {
            break;
        }
        ensure!(
            started.elapsed() < opts.timeout,
            "{served} of {nodes} nodes served after {:?}",
            opts.timeout
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let seconds = started.elapsed().as_secs_f64();
    let pid = op.pid().context("the operator exited")?;
    let proc = read_proc(pid)?;
    let (limited, polls, peak_rate) = calls(&arm, before.len());
    #[expect(clippy::cast_precision_loss, reason = "node and call counts")]
    let floor = ((2 * nodes) as f64 - f64::from(opts.burst)).max(0.0) / opts.qps;
    Ok(RunResult {
        nodes,
        seconds,
        limited_calls: limited,
        polls,
        peak_rate,
        #[expect(clippy::cast_precision_loss, reason = "KiB to MiB")]
        hwm_mib: proc.hwm_kib as f64 / 1024.0,
        floor,
    })
}

/// The ARM calls after the first `skip` requests: rate-limited ones, LRO polls, and the most
/// rate-limited ones that arrived in any one second.
fn calls(arm: &ArmEmulator, skip: usize) -> (u64, u64, usize) {
    let during: Vec<_> = arm.requests().into_iter().skip(skip).collect();
    let limited: Vec<_> = during
        .iter()
        .filter(|r| {
            !matches!(
                r.operation,
                Operation::AsyncOperation
                    | Operation::ImdsInstance
                    | Operation::ImdsToken
                    | Operation::AadToken
            )
        })
        .collect();
    let polls = during
        .iter()
        .filter(|r| r.operation == Operation::AsyncOperation)
        .count();
    let mut per_second: BTreeMap<u64, usize> = BTreeMap::new();
    if let Some(first) = limited.first().map(|r| r.at) {
        for r in &limited {
            *per_second
                .entry(r.at.saturating_duration_since(first).as_secs())
                .or_default() += 1;
        }
    }
    (
        limited.len() as u64,
        polls as u64,
        per_second.values().copied().max().unwrap_or(0),
    )
}

/// Run the benchmark and print its table.
///
/// # Errors
/// A run did not finish in time, or a process could not be read.
pub fn run(opts: &AzureOptions) -> Result<()> {
    println!(
        "weft-operator --ipam azure: VMSS nodes created at once, pre-allocate {PRE_ALLOCATE}, \
         qps {} burst {}",
        opts.qps, opts.burst
    );
    println!(
        "| nodes | seconds | floor (2 calls/node) | ratio | ARM calls/node | LRO polls/node | peak req/s | RSS peak |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &nodes in &opts.nodes {
        let r = run_one(opts, nodes)?;
        #[expect(clippy::cast_precision_loss, reason = "call counts")]
        let per_node = |n: u64| n as f64 / r.nodes as f64;
        println!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {} (limit: burst {}, then {}) | {:.1} MiB |",
            r.nodes,
            r.seconds,
            r.floor,
            if r.floor > 0.0 {
                r.seconds / r.floor
            } else {
                0.0
            },
            per_node(r.limited_calls),
            per_node(r.polls),
            r.peak_rate,
            opts.burst,
            opts.qps,
            r.hwm_mib
        );
    }
    Ok(())
}

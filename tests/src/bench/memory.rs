//! `cargo xtask bench memory`: the agent's resident memory (`VmRSS`, and the peak `VmHWM`, from
//! `/proc/<pid>/status`) at idle, with 110 pods, and with 100k remote IPCache entries, against
//! the idle agent of the same run as the baseline and cilium-agent's documented footprint.
//!
//! The release `weft-agent` runs against the Kubernetes API emulator (`crate::kube`) in a
//! private node network namespace, `kubernetes` IPAM from the Node's pod CIDR. Pods are wired
//! by the release `weft-cni` in their own namespaces, with their Pod objects in the API. The
//! IPCache is fed as a cluster feeds it: remote CiliumNodes (an address at `remote-node` and a
//! pod CIDR at `init` each) and their pods' CiliumEndpoints (a /32 at the pod's identity each),
//! created through the API while the agent watches; the agent's `weft_bpf_map_entries` gauge
//! says when they are all in the map. BPF maps live in kernel memory, not in the agent's RSS;
//! the IPCache map's own size is printed beside it. Then the agent is restarted against that
//! cluster (the case of a node joining a large cluster, or an upgrade): how long until it is
//! ready, and its memory, peak included, after one list of everything. Everything is removed
//! on the way out.

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use crate::{NamedNetNs, ThreadNetNs, agent::Agent, bin_path, kube::Emulator, unique};

/// cilium-agent's resident memory as Cilium documents it for a node, MiB.
const CILIUM_AGENT_MIB: (u64, u64) = (330, 570);
const NODE: &str = "node-m";
/// How long the agent is left alone before a reading.
const SETTLE: Duration = Duration::from_secs(3);

/// Options of the memory benchmark.
#[derive(Debug, Clone, Copy)]
pub struct MemoryOptions {
    /// Local pods wired through `weft-cni` (at most 250: one /24).
    pub pods: usize,
    /// Remote IPCache entries fed through the API.
    pub remote_entries: usize,
    /// Remote nodes they are spread over.
    pub remote_nodes: usize,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        Self {
            pods: 110,
            remote_entries: 100_000,
            remote_nodes: 1000,
        }
    }
}

/// One reading of `/proc/<pid>/status`, KiB.
#[derive(Debug, Clone, Copy)]
struct Reading {
    rss: u64,
    hwm: u64,
}

fn read_memory(pid: u32) -> Result<Reading> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let field = |name: &str| -> Result<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in {path}"))
    };
    Ok(Reading {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// The kubeconfig file, removed on drop.
struct Kubeconfig(PathBuf);

impl Drop for Kubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `weft_bpf_map_entries{map="<map>"}` from the agent's `/metrics`.
fn map_entries(agent: &Agent, map: &str) -> Result<u64> {
    let (status, body) = agent.http_get("/metrics");
    ensure!(status == 200, "/metrics answered {status}");
    let prefix = format!("weft_bpf_map_entries{{map=\"{map}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no {prefix} in /metrics"))
}

/// The kernel memory of the pinned map `name` (`bytes_memlock` from bpftool), KiB.
fn map_kib(agent: &Agent, name: &str) -> Result<u64> {
    let out = Command::new("bpftool")
        .args(["-j", "map", "show", "pinned"])
        .arg(agent.pin_dir.join(name))
        .output()
        .context("running bpftool (cargo xtask setup installs it)")?;
    ensure!(out.status.success(), "bpftool map show failed");
    let doc: Value = serde_json::from_slice(&out.stdout).context("bpftool JSON")?;
    doc["bytes_memlock"]
        .as_u64()
        .map(|b| b / 1024)
        .context("no bytes_memlock from bpftool")
}

/// The remote node `i`: its address and pod CIDR.
fn remote_node(i: usize) -> (String, String) {
    (
        format!("172.16.{}.{}", i / 250, i % 250 + 1),
        format!("10.{}.{}.0/24", 128 + i / 256, i % 256),
    )
}

/// The name of remote CiliumEndpoint `n` of `nodes` nodes' pods.
fn endpoint_name(n: usize, nodes: usize) -> String {
    format!("pod-{}-{}", n % nodes, n / nodes)
}

/// How often the IPCache's entry count is read while waiting: a scrape walks the map key by
/// key, so not too often.
const POLL: Duration = Duration::from_secs(1);

/// Wait until the IPCache holds `want` entries (at most 10 minutes); the count.
fn wait_for_ipcache(agent: &mut Agent, want: u64) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_mins(10);
    loop {
        let entries = map_entries(agent, agent_common::maps::IPCACHE)?;
        if entries == want {
            return Ok(entries);
        }
        ensure!(
            Instant::now() < deadline,
            "the IPCache holds {entries} entries, not {want}, after 10 minutes"
        );
        ensure!(agent.running(), "the agent exited:\n{}", agent.log());
        std::thread::sleep(POLL);
    }
}

/// Create `opts.remote_nodes` CiliumNodes and their pods' CiliumEndpoints: exactly
/// `opts.remote_entries` IPCache entries.
fn feed_remote(emu: &Emulator, opts: &MemoryOptions) -> Result<()> {
    let nodes = opts.remote_nodes;
    ensure!(
        nodes > 0 && nodes <= 32_000 && opts.remote_entries >= 2 * nodes,
        "need 1..=32000 remote nodes and at least two entries per node"
    );
    let endpoints = opts.remote_entries - 2 * nodes;
    ensure!(
        endpoints.div_ceil(nodes) <= 250,
        "at most 250 endpoints per remote node: add nodes"
    );
    emu.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "remote"}}));
    for i in 0..nodes {
        let (ip, cidr) = remote_node(i);
        emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": format!("remote-{i}")},
            "spec": {"addresses": [{"type": "InternalIP", "ip": ip}], "ipam": {"podCIDRs": [cidr]}},
        }));
    }
    for n in 0..endpoints {
        let (node, pod) = (n % nodes, n / nodes);
        let (node_ip, cidr) = remote_node(node);
        let base = cidr.trim_end_matches(".0/24");
        emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
            "metadata": {"name": endpoint_name(n, nodes), "namespace": "remote"},
            "status": {
                "identity": {"id": 256 + n % 512},
                "networking": {"addressing": [{"ipv4": format!("{base}.{}", pod + 2)}], "node": node_ip},
            },
        }));
    }
    Ok(())
}

/// `count` pods (Pod objects, then ADD through `weft-cni`), each in its own namespace.
fn wire_pods(emu: &Emulator, agent: &Agent, count: usize) -> Result<Vec<NamedNetNs>> {
    let mut pods = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("pod-{i}");
        emu.put(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "labels": {"app": format!("app-{}", i % 10)}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
        }));
        let netns = NamedNetNs::new();
        let call = agent.cni(
            "ADD",
            &unique("ctr-"),
            &netns.path().display().to_string(),
            ("bench", &name),
        );
        if call.code != 0 {
            bail!("ADD {name} failed: {}", call.stdout);
        }
        pods.push(netns);
    }
    Ok(pods)
}

fn mib(kib: u64) -> f64 {
    // KiB counts of a process fit f64 exactly.
    #[expect(
        clippy::cast_precision_loss,
        reason = "memory sizes are far below 2^52"
    )]
    let kib = kib as f64;
    kib / 1024.0
}

/// What one run measured.
struct Results {
    /// Idle, with pods, with the remote entries, and after a restart against that cluster.
    readings: [Reading; 4],
    /// IPCache entries at each reading.
    ipcache: [u64; 4],
    /// Time to create the remote objects in the API.
    fed: Duration,
    /// Time until they were all in the map.
    converged: Duration,
    /// The IPCache map's kernel memory, KiB.
    ipcache_kib: u64,
    /// Time from starting the agent again, against the full cluster, until it was ready.
    restart_ready: Duration,
    /// CiliumEndpoints deleted, and the time until their entries were all gone.
    churned: (usize, Duration),
}

fn print_results(opts: &MemoryOptions, r: &Results) -> Result<()> {
    let per_1k = mib(r.readings[2].rss.saturating_sub(r.readings[1].rss))
        / (f64::from(u32::try_from(opts.remote_entries)?) / 1000.0);
    println!("weft-agent memory (release, kubernetes IPAM, API emulator)");
    println!(
        "{:<44} {:>10} {:>10} {:>9} {:>9}",
        "state", "RSS MiB", "HWM MiB", "x idle", "IPCache"
    );
    let idle = r.readings[0];
    for (state, reading, ipc) in [
        ("idle (baseline)".to_owned(), r.readings[0], r.ipcache[0]),
        (format!("{} pods", opts.pods), r.readings[1], r.ipcache[1]),
        (
            format!(
                "{} pods + {} remote IPCache entries",
                opts.pods, opts.remote_entries
            ),
            r.readings[2],
            r.ipcache[2],
        ),
        (
            "the same, after a restart (one list)".to_owned(),
            r.readings[3],
            r.ipcache[3],
        ),
    ] {
        println!(
            "{state:<44} {:>10.1} {:>10.1} {:>9.2} {ipc:>9}",
            mib(reading.rss),
            mib(reading.hwm),
            mib(reading.rss) / mib(idle.rss)
        );
    }
    println!(
        "RSS per 1k remote IPCache entries: {per_1k:.2} MiB ({} remote nodes, {} CiliumEndpoints; \
         fed through the API in {:.1?}, all in the map {:.1?} after the first)",
        opts.remote_nodes,
        opts.remote_entries - 2 * opts.remote_nodes,
        r.fed,
        r.converged,
    );
    println!(
        "IPCache map in kernel memory (not in RSS): {:.1} MiB",
        mib(r.ipcache_kib)
    );
    println!(
        "restart against the cluster: ready {:.1?} after start (every watch listed, the pinned \
         IPCache checked against it); HWM is the peak of that start",
        r.restart_ready
    );
    println!(
        "then {} CiliumEndpoints deleted: their entries all gone {:.1?} after the first delete",
        r.churned.0, r.churned.1
    );
    println!("(map counts are polled every {POLL:?}: times are to the poll that saw them)");
    println!(
        "vs cilium-agent's documented {}-{} MiB: weft-agent at {} pods + {}k entries is {:.1} MiB \
         ({:.0}%-{:.0}% of it)",
        CILIUM_AGENT_MIB.0,
        CILIUM_AGENT_MIB.1,
        opts.pods,
        opts.remote_entries / 1000,
        mib(r.readings[2].rss),
        100.0 * mib(r.readings[2].rss) / f64::from(u32::try_from(CILIUM_AGENT_MIB.1)?),
        100.0 * mib(r.readings[2].rss) / f64::from(u32::try_from(CILIUM_AGENT_MIB.0)?),
    );
    Ok(())
}

/// Measure, print, clean up.
///
/// # Errors
/// A missing binary or tool, a failed ADD, or an agent that does not converge.
pub fn run(opts: &MemoryOptions) -> Result<()> {
    ensure!(opts.pods <= 250, "at most 250 pods (one /24)");
    let _ = bin_path("weft-agent");
    let _ = bin_path("weft-cni");
    let _node = ThreadNetNs::new();
    let emu = Emulator::start();
    let kubeconfig = Kubeconfig(std::env::temp_dir().join(unique("weft-bench-kubeconfig-")));
    emu.write_kubeconfig(&kubeconfig.0);
    for ns in ["default", "bench"] {
        emu.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    emu.put(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
        "spec": {"podCIDR": "10.77.0.0/24", "podCIDRs": ["10.77.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.10"}]},
    }));
    let mut agent = Agent::kube(
        &kubeconfig.0,
        NODE,
        &[
            "--ipam",
            "kubernetes",
            "--ipam-cilium-node-update-rate",
            "1s",
        ],
    );
    agent.spawn();
    agent.wait_ready(Duration::from_mins(1));
    let pid = agent.pid().context("the agent exited")?;
    std::thread::sleep(SETTLE);
    let idle = read_memory(pid)?;
    let ipcache_idle = map_entries(&agent, agent_common::maps::IPCACHE)?;
    eprintln!("idle: {idle:?}");

    let started = Instant::now();
    let pods = wire_pods(&emu, &agent, opts.pods)?;
    let wired = started.elapsed();
    std::thread::sleep(SETTLE);
    let with_pods = read_memory(pid)?;
    let ipcache_pods = map_entries(&agent, agent_common::maps::IPCACHE)?;
    eprintln!("{} pods wired in {wired:.1?}: {with_pods:?}", opts.pods);

    let started = Instant::now();
    feed_remote(&emu, opts)?;
    let fed = started.elapsed();
    let want = ipcache_pods + u64::try_from(opts.remote_entries)?;
    let entries = wait_for_ipcache(&mut agent, want)?;
    let converged = started.elapsed();
    std::thread::sleep(SETTLE);
    let with_remote = read_memory(pid)?;
    let ipcache_kib = map_kib(&agent, agent_common::maps::IPCACHE)?;
    eprintln!("{} remote entries: {with_remote:?}", opts.remote_entries);

    // An agent (re)starting in a cluster that already holds all of it lists every watch once
    // and finds the pinned IPCache already right.
    agent.stop();
    let started = Instant::now();
    agent.spawn();
    agent.wait_ready(Duration::from_mins(5));
    let restart_ready = started.elapsed();
    let pid = agent.pid().context("the agent exited after its restart")?;
    std::thread::sleep(SETTLE);
    let restarted = read_memory(pid)?;
    let ipcache_restarted = map_entries(&agent, agent_common::maps::IPCACHE)?;
    ensure!(
        ipcache_restarted == entries,
        "the IPCache holds {ipcache_restarted} entries after the restart, not {entries}"
    );
    eprintln!("restarted in {restart_ready:.1?}: {restarted:?}");

    // Churn: a tenth of the remote pods go, their CiliumEndpoints deleted one by one.
    let gone = (opts.remote_entries - 2 * opts.remote_nodes) / 10;
    let started = Instant::now();
    for n in 0..gone {
        let name = endpoint_name(n, opts.remote_nodes);
        emu.remove("ciliumendpoints", Some("remote"), &name)
            .with_context(|| format!("CiliumEndpoint remote/{name} to delete"))?;
    }
    wait_for_ipcache(&mut agent, entries - u64::try_from(gone)?)?;
    let churned = (gone, started.elapsed());

    print_results(
        opts,
        &Results {
            readings: [idle, with_pods, with_remote, restarted],
            ipcache: [ipcache_idle, ipcache_pods, entries, ipcache_restarted],
            fed,
            converged,
            ipcache_kib,
            restart_ready,
            churned,
        },
    )?;
    drop(agent);
    drop(pods);
    Ok(())
}

//! IPAM benchmarks behind `cargo xtask bench ipam`, each against a baseline measured in the
//! same run and printed as ratios (nothing asserts on time).
//!
//! CNI ADD latency: the wall-clock time of one plugin process (spawn, stdin, exit) for
//! sequential ADDs and for ADDs issued by several threads at once, through weft (`weft-cni`
//! talking to a real `weft-agent` in multi-pool mode) and through Debian's reference `bridge`
//! plugin with `host-local` IPAM. Each setup lives in its own private node namespace on its
//! own thread (processes it spawns inherit that namespace); pods are named namespaces created
//! before the timed part. One untimed ADD per setup warms it up (the bridge plugin creates its
//! bridge, the agent its first veth). Every ADD must succeed and hand out a distinct address.
//!
//! Allocator throughput is in `bench::alloc`.
//!
//! Everything created (namespaces, CNI attachments, the agent, its store, state and bpffs
//! pins, the host-local directory) is removed on the way out, on error and panic too (RAII).

use std::{
    fs,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    sync::{
        Barrier,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use serde_json::{Value, json};

use crate::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, example_store},
    unique,
};

const SETUP_HINT: &str = "run `cargo xtask setup`";
const CNI_DIR: &str = "/usr/lib/cni";

/// `weft-agent run` flags: multi-pool IPAM, IPv4 only, a fast CiliumNode write-back.
const AGENT_FLAGS: [&str; 8] = [
    "--ipam",
    "multi-pool",
    "--ipam-multi-pool-pre-allocation",
    "default=64",
    "--enable-ipv6",
    "false",
    "--ipam-cilium-node-update-rate",
    "1s",
];

/// The example store's default pool has one /27: too small for 50 pods and the router.
const NODE_DOC: &str = "\
apiVersion: cilium.io/v2
kind: CiliumNode
metadata:
  name: node1
  labels:
    kubernetes.io/hostname: node1
spec:
  addresses:
  - type: InternalIP
    ip: 192.0.2.10
  ipam:
    pools:
      allocated:
      - pool: default
        cidrs:
        - 10.200.0.0/24
";

/// Options of the CNI ADD latency benchmark.
#[derive(Debug, Clone, Copy)]
pub struct CniOptions {
    /// ADDs per scenario (sequential, concurrent); at most 200 (one /24 per setup).
    pub pods: usize,
    /// Threads issuing ADDs at once in the concurrent scenario.
    pub concurrency: usize,
}

impl Default for CniOptions {
    fn default() -> Self {
        Self {
            pods: 50,
            concurrency: 10,
        }
    }
}

/// ADD latencies of one setup, per scenario.
#[derive(Debug)]
struct Latencies {
    sequential: Vec<Duration>,
    concurrent: Vec<Duration>,
}

/// Measure CNI ADD latency through the bridge plugin, then through weft, and print the table
/// on stdout; progress goes to stderr.
///
/// # Errors
/// Missing plugins or binaries, a setup step, or any ADD or DEL that fails; everything
/// created so far is cleaned up first.
pub fn run_cni(opts: &CniOptions) -> Result<()> {
    ensure!(
        (1..=200).contains(&opts.pods) && opts.concurrency > 0,
        "--pods must be in 1..=200 and --concurrency positive"
    );
    preflight()?;
    let bridge = on_node_thread("bridge", opts, Bridge::new)?;
    let weft = on_node_thread("weft", opts, Weft::new)?;
    let threads = opts.concurrency.min(opts.pods);
    println!(
        "CNI ADD latency, ms: wall-clock of one plugin process; {} ADDs per scenario, after 1 \
         untimed warm-up ADD",
        opts.pods
    );
    println!(
        "{:<22}{:>12}{:>12}{:>10}{:>10}{:>17}{:>17}",
        "scenario",
        "bridge p50",
        "bridge p99",
        "weft p50",
        "weft p99",
        "weft/bridge p50",
        "weft/bridge p99"
    );
    let rows = [
        (
            format!("sequential x{}", opts.pods),
            &bridge.sequential,
            &weft.sequential,
        ),
        (
            format!("concurrent {threads} thr"),
            &bridge.concurrent,
            &weft.concurrent,
        ),
    ];
    for (scenario, bridge, weft) in rows {
        let [b50, b99, w50, w99] = [(bridge, 50), (bridge, 99), (weft, 50), (weft, 99)]
            .map(|(samples, pct)| ms(percentile(samples, pct)));
        println!(
            "{scenario:<22}{b50:>12.2}{b99:>12.2}{w50:>10.2}{w99:>10.2}{:>16.2}x{:>16.2}x",
            w50 / b50,
            w99 / b99
        );
    }
    let rank = (99 * opts.pods).div_ceil(100);
    println!(
        "ratios: weft / bridge, lower is better; p99 is nearest-rank: sample {rank} of {} \
         sorted{}",
        opts.pods,
        if rank == opts.pods {
            " (the maximum)"
        } else {
            ""
        }
    );
    Ok(())
}

/// Fail early, with the fix, if a plugin or binary is missing.
fn preflight() -> Result<()> {
    for plugin in ["bridge", "host-local"] {
        let path = Path::new(CNI_DIR).join(plugin);
        ensure!(path.exists(), "{} not found: {SETUP_HINT}", path.display());
    }
    for bin in ["weft-agent", "weft-cni"] {
        // Panics with the fix (build it) when missing.
        let _ = crate::bin_path(bin);
    }
    Ok(())
}

/// In a fresh node namespace on a new thread: build a setup with `setup` and measure it.
fn on_node_thread<P: Plugin + 'static>(
    name: &'static str,
    opts: &CniOptions,
    setup: fn(&CniOptions) -> Result<P>,
) -> Result<Latencies> {
    let opts = *opts;
    let thread = thread::Builder::new()
        .name(format!("bench {name}"))
        .spawn(move || {
            let _node = ThreadNetNs::new();
            eprintln!("bench ipam: {name}: setting up ...");
            // Dropped before the node namespace: DELs, agent, directories.
            let plugin = setup(&opts)?;
            measure(name, &plugin, &opts)
        })
        .with_context(|| format!("spawn the {name} thread"))?;
    match thread.join() {
        Ok(result) => result.with_context(|| format!("{name} CNI benchmark")),
        // The panic message itself is already on stderr (default hook).
        Err(_) => bail!("{name} CNI benchmark panicked (see above)"),
    }
}

/// A warm-up ADD, then the sequential and the concurrent scenario, each undone afterwards.
fn measure<P: Plugin>(name: &str, plugin: &P, opts: &CniOptions) -> Result<Latencies> {
    scenario(plugin, "warm", 1, 1).context("warm-up ADD")?;
    eprintln!("bench ipam: {name}: {} sequential ADDs ...", opts.pods);
    let sequential = scenario(plugin, "p", opts.pods, 1).context("sequential ADDs")?;
    let threads = opts.concurrency.min(opts.pods);
    eprintln!(
        "bench ipam: {name}: {} ADDs from {threads} threads ...",
        opts.pods
    );
    let concurrent = scenario(plugin, "p", opts.pods, threads).context("concurrent ADDs")?;
    Ok(Latencies {
        sequential,
        concurrent,
    })
}

/// ADD pods `<prefix>0..` (`count`, namespaces made beforehand) from `threads` threads that
/// start together; their latencies, after checking that every address is distinct. The
/// pods are DELeted before returning.
fn scenario<P: Plugin>(
    plugin: &P,
    prefix: &str,
    count: usize,
    threads: usize,
) -> Result<Vec<Duration>> {
    let batch = Batch::new(plugin, prefix, count);
    let node_netns = current_netns()?;
    let barrier = Barrier::new(threads);
    let results: Vec<Result<Vec<(Duration, Ipv4Addr)>>> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (batch, barrier, node_netns) = (&batch, &barrier, &node_netns);
                s.spawn(move || {
                    barrier.wait();
                    // Threads inherit the creating thread's namespace; the bridge needs it.
                    ensure!(
                        current_netns()? == *node_netns,
                        "worker thread is not in the node namespace"
                    );
                    let mine = batch.pods.iter().skip(t).step_by(threads);
                    mine.map(|pod| plugin.add(pod)).collect()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow!("ADD thread panicked")))
            })
            .collect()
    });
    let mut latencies = Vec::with_capacity(count);
    let mut addrs = Vec::with_capacity(count);
    for result in results {
        for (latency, addr) in result? {
            latencies.push(latency);
            addrs.push(addr);
        }
    }
    addrs.sort_unstable();
    addrs.dedup();
    ensure!(
        addrs.len() == count,
        "{count} ADDs handed out only {} distinct addresses",
        addrs.len()
    );
    batch.del_all()?;
    Ok(latencies)
}

/// The calling thread's network namespace (`net:[inode]`).
fn current_netns() -> Result<PathBuf> {
    fs::read_link("/proc/thread-self/ns/net").context("readlink /proc/thread-self/ns/net")
}

/// A CNI plugin as the benchmark drives it, from the node namespace.
trait Plugin: Sync {
    /// `CNI_COMMAND=ADD` for `pod`: the wall-clock time of the plugin process, and the IPv4
    /// address handed out. Marks the pod added before calling (a half-done ADD gets a DEL).
    fn add(&self, pod: &PodNs) -> Result<(Duration, Ipv4Addr)>;
    /// `CNI_COMMAND=DEL` for `pod`.
    fn del(&self, pod: &PodNs) -> Result<()>;
}

/// One pod: its namespace, container id and pod name.
#[derive(Debug)]
struct PodNs {
    netns: NamedNetNs,
    id: String,
    name: String,
    added: AtomicBool,
}

impl PodNs {
    fn netns_path(&self) -> String {
        self.netns.path().display().to_string()
    }
}

/// Pods of one scenario. On drop (or [`Batch::del_all`]) every pod an ADD was tried for is
/// DELeted, and then the namespaces are removed.
struct Batch<'a, P: Plugin> {
    plugin: &'a P,
    pods: Vec<PodNs>,
}

impl<'a, P: Plugin> Batch<'a, P> {
    /// `count` pods `<prefix>0..`, each with a fresh namespace and container id.
    fn new(plugin: &'a P, prefix: &str, count: usize) -> Self {
        let mut batch = Self {
            plugin,
            pods: Vec::with_capacity(count),
        };
        for i in 0..count {
            batch.pods.push(PodNs {
                netns: NamedNetNs::new(),
                id: unique("benchipam"),
                name: format!("{prefix}{i}"),
                added: AtomicBool::new(false),
            });
        }
        batch
    }

    /// DEL every added pod (all are tried); the first failure.
    fn del_all(mut self) -> Result<()> {
        self.del_added()
    }

    fn del_added(&mut self) -> Result<()> {
        let mut first_error = None;
        for pod in self.pods.drain(..).rev() {
            if pod.added.load(Ordering::Relaxed)
                && let Err(e) = self.plugin.del(&pod)
            {
                first_error.get_or_insert(e.context(format!("DEL {}", pod.name)));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl<P: Plugin> Drop for Batch<'_, P> {
    fn drop(&mut self) {
        if let Err(e) = self.del_added() {
            eprintln!("bench ipam: cleaning up: {e:#}");
        }
    }
}

/// weft: a `weft-agent` in multi-pool mode (one /24 in the default pool), driven by
/// `weft-cni`. Dropping it stops the agent and removes its directories and pins.
struct Weft {
    agent: Agent,
}

impl Weft {
    /// Start the agent with the bigger node document and a Pod document for every pod name
    /// the scenarios use (in the store before start-up, so no watcher delay is involved).
    #[expect(
        clippy::unnecessary_wraps,
        reason = "a setup function; the agent harness panics instead of returning errors"
    )]
    fn new(opts: &CniOptions) -> Result<Self> {
        let mut agent = Agent::new(&example_store(), &AGENT_FLAGS);
        agent.put_doc("ciliumnodes/node1.yaml", NODE_DOC);
        let names = (0..opts.pods).map(|i| format!("p{i}"));
        for name in names.chain(["warm0".to_owned()]) {
            let doc = format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
                 spec:\n  nodeName: node1\n"
            );
            agent.put_doc(&format!("pods/default/{name}.yaml"), &doc);
        }
        agent.start();
        Ok(Self { agent })
    }
}

impl Plugin for Weft {
    fn add(&self, pod: &PodNs) -> Result<(Duration, Ipv4Addr)> {
        let netns = pod.netns_path();
        pod.added.store(true, Ordering::Relaxed);
        let start = Instant::now();
        let call = self
            .agent
            .cni("ADD", &pod.id, &netns, ("default", &pod.name));
        let elapsed = start.elapsed();
        if call.code != 0 {
            bail!(
                "weft ADD default/{} failed (exit {}): {}",
                pod.name,
                call.code,
                call.stdout
            );
        }
        Ok((elapsed, first_ipv4(&call.stdout)?))
    }

    fn del(&self, pod: &PodNs) -> Result<()> {
        let call = self
            .agent
            .cni("DEL", &pod.id, &pod.netns_path(), ("default", &pod.name));
        ensure!(
            call.code == 0,
            "weft DEL default/{} failed (exit {}): {}",
            pod.name,
            call.code,
            call.stdout
        );
        Ok(())
    }
}

/// Debian's `bridge` plugin with `host-local` IPAM (10.78.0.0/24) on a bridge of its own.
/// Dropping it removes the host-local directory; the bridge goes with the node namespace.
struct Bridge {
    config: String,
    ipam: PathBuf,
}

impl Bridge {
    fn new(_opts: &CniOptions) -> Result<Self> {
        let ipam = std::env::temp_dir().join(unique("weft-bench-ipam-"));
        fs::create_dir_all(&ipam).with_context(|| format!("create {}", ipam.display()))?;
        let config = json!({
            "cniVersion": "1.0.0", "name": "benchbr", "type": "bridge",
            "bridge": unique("wbr"), "isGateway": true, "ipMasq": false,
            "ipam": {
                "type": "host-local", "ranges": [[{ "subnet": "10.78.0.0/24" }]],
                "dataDir": ipam,
            },
        })
        .to_string();
        Ok(Self { config, ipam })
    }

    /// Run the plugin as a runtime does; its stdout, and the time from spawn to exit.
    fn call(&self, command: &str, pod: &PodNs) -> Result<(Duration, Vec<u8>)> {
        let (stdout, elapsed) =
            super::bridge_cni(&self.config, command, &pod.netns.path(), &pod.id)
                .with_context(|| format!("pod {}", pod.name))?;
        Ok((elapsed, stdout))
    }
}

impl Plugin for Bridge {
    fn add(&self, pod: &PodNs) -> Result<(Duration, Ipv4Addr)> {
        pod.added.store(true, Ordering::Relaxed);
        let (elapsed, stdout) = self.call("ADD", pod)?;
        let result: Value = serde_json::from_slice(&stdout).context("bridge ADD: no JSON")?;
        Ok((elapsed, first_ipv4(&result)?))
    }

    fn del(&self, pod: &PodNs) -> Result<()> {
        self.call("DEL", pod).map(drop)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.ipam);
    }
}

/// The first IPv4 `ips[].address` of a CNI result.
fn first_ipv4(result: &Value) -> Result<Ipv4Addr> {
    result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|ip| ip["address"].as_str()?.split('/').next()?.parse().ok())
        .with_context(|| format!("no IPv4 address in the CNI result: {result}"))
}

/// Nearest-rank percentile `pct` (1..=100) of non-empty `samples`.
fn percentile(samples: &[Duration], pct: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

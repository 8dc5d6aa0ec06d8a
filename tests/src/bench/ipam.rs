//! IPAM benchmarks behind `cargo xtask bench ipam`, each against a baseline measured in the
//! same run and printed as ratios (nothing asserts on time).
//!
//! CNI latency: the wall-clock time of one plugin process (spawn, stdin, exit) through weft
//! (`weft-cni` talking to a real `weft-agent` in multi-pool mode) and through Debian's
//! reference `bridge` plugin with `host-local` IPAM, in these scenarios: sequential ADDs,
//! ADDs issued by several threads at once (and the wall time of that batch), sequential DELs,
//! and sequential ADDs on a node that already holds `--crowd` pods (per-ADD work that grows
//! with the pods on the node shows as a ratio to the empty node). weft runs twice: as installed
//! (`--attach-mode auto`, netlink tc filters on pod veths) and with `--attach-mode tcx`; the
//! agent's log gives the p50 of each ADD phase. Each setup lives in its own private node namespace on its own thread
//! (processes it spawns inherit that namespace); pods are named namespaces created before the
//! timed part. One untimed ADD per setup warms it up (the bridge plugin creates its bridge,
//! the agent its first veth). Every ADD must succeed and hand out a distinct address.
//!
//! Allocator throughput is in `bench::alloc`.
//!
//! Everything created (namespaces, CNI attachments, the agent, its store, state and bpffs
//! pins, the host-local directory) is removed on the way out, on error and panic too (RAII).

mod plugins;
mod report;

use std::{
    collections::BTreeMap,
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
use serde_json::Value;

use self::plugins::{Bridge, Weft};
use crate::{NamedNetNs, ThreadNetNs, unique};

const SETUP_HINT: &str = "run `cargo xtask setup`";
const CNI_DIR: &str = "/usr/lib/cni";

/// Options of the CNI latency benchmark.
#[derive(Debug, Clone, Copy)]
pub struct CniOptions {
    /// ADDs per scenario (sequential, concurrent, crowded).
    pub pods: usize,
    /// Threads issuing ADDs at once in the concurrent scenario.
    pub concurrency: usize,
    /// Pods already on the node in the crowded scenario.
    pub crowd: usize,
}

impl Default for CniOptions {
    fn default() -> Self {
        Self {
            pods: 50,
            concurrency: 10,
            crowd: 100,
        }
    }
}

/// What one setup measured.
#[derive(Debug)]
struct Latencies {
    /// ADDs one after another.
    sequential: Vec<Duration>,
    /// ADDs from several threads at once.
    concurrent: Vec<Duration>,
    /// From the first concurrent ADD's start to the last one's end.
    concurrent_wall: Duration,
    /// DELs one after another (of the sequential scenario's pods).
    del: Vec<Duration>,
    /// ADDs one after another with `crowd` pods on the node.
    crowded: Vec<Duration>,
    /// Per ADD phase, its durations in the sequential scenario (weft's log; empty for the
    /// bridge plugin).
    phases: BTreeMap<String, Vec<Duration>>,
}

/// Measure CNI latency through the bridge plugin, then through weft (as installed, then with
/// TCX attachment), and print the tables on stdout; progress goes to stderr.
///
/// # Errors
/// Missing plugins or binaries, a setup step, or any ADD or DEL that fails; everything
/// created so far is cleaned up first.
pub fn run_cni(opts: &CniOptions) -> Result<()> {
    ensure!(
        opts.pods > 0 && opts.pods + opts.crowd <= 200 && opts.concurrency > 0,
        "--pods must be positive, --pods plus --crowd at most 200 (one /24 per setup), and \
         --concurrency positive"
    );
    preflight()?;
    let bridge = on_node_thread("bridge", opts, Bridge::new)?;
    let weft = on_node_thread("weft", opts, Weft::auto)?;
    let tcx = on_node_thread("weft tcx-attach", opts, Weft::tcx)?;
    report::print(opts, &bridge, &weft, &tcx);
    Ok(())
}

/// Every pod name the scenarios use (the agent gets a Pod document for each).
fn pod_names(opts: &CniOptions) -> impl Iterator<Item = String> {
    let timed = (0..opts.pods).map(|i| format!("p{i}"));
    let crowd = (0..opts.crowd).map(|i| format!("c{i}"));
    timed.chain(crowd).chain(["warm0".to_owned()])
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

/// A warm-up ADD, then each scenario, each undone afterwards.
fn measure<P: Plugin>(name: &str, plugin: &P, opts: &CniOptions) -> Result<Latencies> {
    let warm = Batch::new(plugin, "warm", 1);
    warm.add(1).context("warm-up ADD")?;
    warm.del_all()?;
    plugin.settle()?;
    eprintln!(
        "bench ipam: {name}: {} sequential ADDs and DELs ...",
        opts.pods
    );
    let log_from = plugin.log().map_or(0, |log| log.len());
    let batch = Batch::new(plugin, "p", opts.pods);
    let sequential = batch.add(1).context("sequential ADDs")?;
    let phases = plugin
        .log()
        .map(|log| phases_of(&log[log_from.min(log.len())..]))
        .unwrap_or_default();
    let del = batch.del_all().context("sequential DELs")?;
    plugin.settle()?;
    let threads = opts.concurrency.min(opts.pods);
    eprintln!(
        "bench ipam: {name}: {} ADDs from {threads} threads ...",
        opts.pods
    );
    let batch = Batch::new(plugin, "p", opts.pods);
    let started = Instant::now();
    let concurrent = batch.add(threads).context("concurrent ADDs")?;
    let concurrent_wall = started.elapsed();
    batch.del_all()?;
    plugin.settle()?;
    eprintln!(
        "bench ipam: {name}: {} sequential ADDs beside {} pods ...",
        opts.pods, opts.crowd
    );
    let crowd = Batch::new(plugin, "c", opts.crowd);
    crowd.add(threads).context("ADDs of the crowd")?;
    let batch = Batch::new(plugin, "p", opts.pods);
    let crowded = batch.add(1).context("ADDs beside the crowd")?;
    batch.del_all()?;
    crowd.del_all()?;
    Ok(Latencies {
        sequential: sequential.into_iter().map(|(d, _)| d).collect(),
        concurrent: concurrent.into_iter().map(|(d, _)| d).collect(),
        concurrent_wall,
        del,
        crowded: crowded.into_iter().map(|(d, _)| d).collect(),
        phases,
    })
}

/// The ADD phases the agent logged (`phases=allocate=0.02ms record=0.05ms ...` on each
/// `ADD` line; a phase named twice in one ADD is summed).
fn phases_of(log: &str) -> BTreeMap<String, Vec<Duration>> {
    let mut out: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains(" ADD ")) {
        let Some((_, rest)) = line.split_once("phases=") else {
            continue;
        };
        let mut this: BTreeMap<&str, f64> = BTreeMap::new();
        for part in rest.split_whitespace() {
            let Some((phase, ms)) = part.split_once('=') else {
                continue;
            };
            let Some(ms) = ms.strip_suffix("ms").and_then(|m| m.parse::<f64>().ok()) else {
                continue;
            };
            *this.entry(phase).or_default() += ms;
        }
        for (phase, ms) in this {
            out.entry(phase.to_owned())
                .or_default()
                .push(Duration::from_secs_f64(ms / 1e3));
        }
    }
    out
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
    /// `CNI_COMMAND=DEL` for `pod`: the wall-clock time of the plugin process.
    fn del(&self, pod: &PodNs) -> Result<Duration>;
    /// The agent's log, for the phases of each ADD (`None`: the plugin has none).
    fn log(&self) -> Option<String> {
        None
    }
    /// Wait until the work of the DELs answered so far is done, so the next scenario times
    /// its own operations only (weft deletes a live sandbox's veth after it answers).
    fn settle(&self) -> Result<()> {
        Ok(())
    }
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

    /// ADD every pod from `threads` threads that start together; their latencies and
    /// addresses, after checking that every address is distinct.
    fn add(&self, threads: usize) -> Result<Vec<(Duration, Ipv4Addr)>> {
        let node_netns = current_netns()?;
        let barrier = Barrier::new(threads);
        let results: Vec<Result<Vec<(Duration, Ipv4Addr)>>> = thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let (barrier, node_netns) = (&barrier, &node_netns);
                    s.spawn(move || {
                        barrier.wait();
                        // Threads inherit the creating thread's namespace; the bridge needs it.
                        ensure!(
                            current_netns()? == *node_netns,
                            "worker thread is not in the node namespace"
                        );
                        let mine = self.pods.iter().skip(t).step_by(threads);
                        mine.map(|pod| self.plugin.add(pod)).collect()
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
        let mut added = Vec::with_capacity(self.pods.len());
        for result in results {
            added.extend(result?);
        }
        let mut addrs: Vec<Ipv4Addr> = added.iter().map(|(_, addr)| *addr).collect();
        addrs.sort_unstable();
        addrs.dedup();
        ensure!(
            addrs.len() == self.pods.len(),
            "{} ADDs handed out only {} distinct addresses",
            self.pods.len(),
            addrs.len()
        );
        Ok(added)
    }

    /// DEL every added pod, one after another, last first; their latencies.
    fn del_all(mut self) -> Result<Vec<Duration>> {
        let (timed, first_error) = self.del_added();
        first_error.map_or(Ok(timed), Err)
    }

    /// DEL every added pod (all are tried): the latencies and the first failure.
    fn del_added(&mut self) -> (Vec<Duration>, Option<anyhow::Error>) {
        let (mut timed, mut first_error) = (Vec::new(), None);
        for pod in self.pods.drain(..).rev() {
            if !pod.added.load(Ordering::Relaxed) {
                continue;
            }
            match self.plugin.del(&pod) {
                Ok(took) => timed.push(took),
                Err(e) => {
                    first_error.get_or_insert(e.context(format!("DEL {}", pod.name)));
                }
            }
        }
        (timed, first_error)
    }
}

impl<P: Plugin> Drop for Batch<'_, P> {
    fn drop(&mut self) {
        if let (_, Some(e)) = self.del_added() {
            eprintln!("bench ipam: cleaning up: {e:#}");
        }
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

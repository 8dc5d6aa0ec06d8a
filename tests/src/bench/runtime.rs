//! `cargo xtask bench runtime`: what a container runtime pays for weft. The wall-clock time of
//! `ctr run --cni --rm IMAGE ID true` (create the task, CNI ADD, start, exit, delete the task,
//! CNI DEL, remove the container) on Debian's containerd, through weft (`weft-cni` and a real
//! `weft-agent` in multi-pool mode) and through Debian's reference `bridge` plugin with
//! `host-local` IPAM, in the same run; plus the same `ctr run` without `--cni`, the floor that
//! no network plugin can beat. Both plugins hand out IPv4 only.
//!
//! The harness is `crate::containerd` (private daemon, its own mount namespace; nothing of the
//! host is touched). `ctr` runs, and so executes the plugins, in a private node network
//! namespace on its own thread, where the agent runs too. Runs are sequential and interleaved
//! (weft, bridge, floor, then rotated) after one untimed warm-up per setup, so slow drift hits
//! all three alike. Every run must succeed; afterwards every DEL must have left nothing behind.
//! Everything is removed on the way out, on a panic too (RAII), containerd stopped by PID.

use std::{fs, path::Path, process::Command, thread, time::Duration};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use crate::{
    ThreadNetNs,
    agent::{Agent, example_store},
    bin_path,
    containerd::{Containerd, pinned_endpoints},
};

const CTR_NAMESPACE: &str = "bench";
const SETUPS: [&str; 3] = ["weft", "bridge + host-local", "no network (floor)"];
const CNI_DIR: &str = "/usr/lib/cni";

/// `weft-agent run` flags: multi-pool IPAM, IPv4 only like the bridge baseline.
const AGENT_FLAGS: [&str; 6] = [
    "--ipam",
    "multi-pool",
    "--ipam-multi-pool-pre-allocation",
    "default=8",
    "--enable-ipv6",
    "false",
];

/// Options of the runtime benchmark.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeOptions {
    /// Timed `ctr run` round trips per setup.
    pub runs: usize,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self { runs: 20 }
    }
}

/// Measure, print the table on stdout (progress on stderr), clean up.
///
/// # Errors
/// A missing tool or plugin, a failed round trip, or state a DEL left behind.
pub fn run(opts: &RuntimeOptions) -> Result<()> {
    ensure!(opts.runs > 0, "--runs must be positive");
    for plugin in ["bridge", "host-local"] {
        let path = Path::new(CNI_DIR).join(plugin);
        ensure!(
            path.is_file(),
            "{} not found: run `cargo xtask setup` (containernetworking-plugins)",
            path.display()
        );
    }
    // Fail now, with the fix, if the agent binaries are not built.
    let _ = bin_path("weft-agent");
    let cni = bin_path("weft-cni");
    let versions = [("containerd", "--version"), ("runc", "--version")]
        .map(|(tool, flag)| first_line(Command::new(tool).arg(flag)));
    // containerd stays in the host's network namespace; the node is a thread's.
    let ctrd = Containerd::start();
    ctrd.import_image(CTR_NAMESPACE);
    let samples = thread::scope(|scope| {
        scope
            .spawn(|| {
                let _node = ThreadNetNs::new();
                measure(&ctrd, &cni, opts.runs)
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the node thread panicked (see above)")))
    })?;
    ctrd.shutdown();

    println!(
        "container round trip: `ctr run --cni --rm IMAGE ID true`, wall clock of ctr; {} runs \
         per setup, sequential, interleaved, after 1 warm-up each",
        opts.runs
    );
    println!("({}; {})", versions[0], versions[1]);
    println!(
        "{:<22}{:>9}{:>9}{:>9}{:>9}",
        "setup", "p50 ms", "p99 ms", "min ms", "max ms"
    );
    let stats: Vec<[f64; 4]> = samples
        .iter()
        .map(|s| [percentile(s, 50), percentile(s, 99), s[0], s[s.len() - 1]].map(ms))
        .collect();
    for (name, [p50, p99, min, max]) in SETUPS.iter().zip(&stats) {
        println!("{name:<22}{p50:>9.1}{p99:>9.1}{min:>9.1}{max:>9.1}");
    }
    let (weft, bridge, floor) = (stats[0], stats[1], stats[2]);
    println!(
        "weft/bridge: p50 {:.2}x, p99 {:.2}x; above the floor (p50): weft +{:.1} ms, bridge +{:.1} ms",
        weft[0] / bridge[0],
        weft[1] / bridge[1],
        weft[0] - floor[0],
        bridge[0] - floor[0],
    );
    let rank = (99 * opts.runs).div_ceil(100);
    println!(
        "p99 is nearest-rank: sample {rank} of {} sorted{}",
        opts.runs,
        if rank == opts.runs {
            " (the maximum)"
        } else {
            ""
        }
    );
    Ok(())
}

/// On the node thread: start the agent, then the warm-ups and the timed runs. Sorted samples
/// per setup, in [`SETUPS`] order.
fn measure(ctrd: &Containerd, cni_bin: &Path, runs: usize) -> Result<[Vec<Duration>; 3]> {
    eprintln!("bench runtime: starting weft-agent ...");
    let mut agent = Agent::new(&example_store(), &AGENT_FLAGS);
    agent.start();
    ctrd.install_plugin(cni_bin);
    let host_local = ctrd.base.join("host-local");
    let conflists = [
        Some(json!({
            "cniVersion": "1.0.0", "name": "weft",
            "plugins": [{"type": "weft-cni", "agent-socket": agent.socket,
                         "delete-queue-dir": agent.delete_queue}],
        })),
        Some(json!({
            "cniVersion": "1.0.0", "name": "bridge",
            "plugins": [{"type": "bridge", "bridge": "wbench0", "isGateway": true,
                         "ipam": {"type": "host-local", "subnet": "10.231.0.0/24",
                                  "dataDir": host_local}}],
        })),
        None,
    ];
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for round in 0..=runs {
        if round == 0 {
            eprintln!("bench runtime: warm-up ...");
        } else if round == 1 {
            eprintln!("bench runtime: {runs} rounds ...");
        }
        for k in 0..SETUPS.len() {
            let s = (round + k) % SETUPS.len();
            let took = round_trip(ctrd, conflists[s].as_ref(), &format!("r{round}s{s}"))
                .with_context(|| format!("{} round {round}", SETUPS[s]))?;
            if round > 0 {
                samples[s].push(took);
            }
        }
    }
    // Every DEL arrived and undid its ADD.
    let records = fs::read_dir(agent.state.join("endpoints")).map_or(0, Iterator::count);
    ensure!(
        records == 0,
        "weft: {records} endpoint records left after the DELs"
    );
    let endpoints = pinned_endpoints(&agent.pin_dir);
    ensure!(endpoints.is_empty(), "weft: endpoints left: {endpoints:?}");
    let reserved: Vec<String> = fs::read_dir(host_local.join("bridge"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.parse::<std::net::IpAddr>().is_ok())
        .collect();
    ensure!(
        reserved.is_empty(),
        "host-local: addresses left: {reserved:?}"
    );
    for s in &mut samples {
        s.sort();
    }
    Ok(samples)
}

/// One `ctr run --cni --rm IMAGE id true` with `conflist` installed (`None`: without `--cni`).
fn round_trip(ctrd: &Containerd, conflist: Option<&Value>, id: &str) -> Result<Duration> {
    if let Some(conflist) = conflist {
        ctrd.install_conflist(conflist);
    }
    let (out, took) = ctrd.run_once(CTR_NAMESPACE, id, conflist.is_some(), &["true"]);
    if !out.status.success() {
        bail!(
            "ctr run {id} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(took)
}

fn first_line(cmd: &mut Command) -> String {
    cmd.output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default()
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], pct: usize) -> Duration {
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

//! Network benchmarks: TCP and UDP round-trip latency (`qperf tcp_lat udp_lat`) and
//! single-stream TCP throughput (`iperf3`). [`run`]: between two pods on one node, for a bare
//! veth pair (the floor nothing same-host can beat), Debian's reference `bridge` CNI plugin and
//! weft (eBPF `bpf_redirect_peer`). [`run_masq`]: from a pod to an external host behind the
//! node, masqueraded by the bridge plugin's iptables rule and by weft's `to_netdev`, with weft
//! unmasqueraded as the floor. Each setup is built once, in its own private node namespace on
//! its own thread, with pods in named namespaces; each round then runs every test on every
//! setup (rotating which goes first), and the table shows medians across rounds and min-max.
//! The root network namespace is never touched; every namespace, server process, CNI
//! attachment and IPAM directory is removed on the way out, on error and panic too (RAII).

use std::{
    fs,
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::mpsc::{self, Receiver, Sender},
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use agent_common::endpoint::ENDPOINT_F_NO_SNAT_V4;
use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};
use weft_agent::datapath::{NetdevConfig, PoolIdPerFamily};

use crate::{
    NamedNetNs, Node, ThreadNetNs,
    external::{EXT_IP, External, NODE_DEV, NODE_IP},
    unique,
};

const SETUP_HINT: &str = "run `cargo xtask setup`";
const CNI_DIR: &str = "/usr/lib/cni";
/// qperf's synchronisation port (its default) and the port its socket tests run on.
pub(super) const QPERF_PORT: &str = "19765";
pub(super) const QPERF_DATA_PORT: &str = "19766";
pub(super) const IPERF_PORT: &str = "5201";
/// Where the masquerade setups check which address the external host sees.
const CHECK_PORT: u16 = 7300;
const METRICS: [&str; 3] = ["tcp_lat (us)", "udp_lat (us)", "tcp stream (Gb/s)"];

/// Options of the pod-to-pod benchmark.
#[derive(Debug, Clone)]
pub struct NetOptions {
    /// Duration of each test (`qperf -t`, `iperf3 -t`), in seconds.
    pub seconds: u32,
    /// Measurement rounds; each runs every test once on every setup.
    pub rounds: u32,
}

impl Default for NetOptions {
    fn default() -> Self {
        let (seconds, rounds) = (3, 3);
        Self { seconds, rounds }
    }
}

/// Build the veth floor, the bridge CNI and weft, measure them in rounds, and print the
/// table (and weft's `redirect_local` counter delta) on stdout; progress goes to stderr.
///
/// # Errors
/// A missing tool (`qperf`, `iperf3`, the CNI plugins), a setup step or a measurement
/// that fails; everything created so far is cleaned up first.
pub fn run(opts: &NetOptions) -> Result<()> {
    compare(
        opts,
        "pod-to-pod (same node)",
        [
            ("veth floor", veth_floor),
            ("bridge CNI", bridge_cni),
            ("weft", weft),
        ],
        "weft redirect_local counter",
    )
}

/// Pod to an external host behind the node's native device, masqueraded to the node IP:
/// Debian's `bridge` plugin with `ipMasq: true` (iptables MASQUERADE), weft's datapath with
/// an endpoint that is not masqueraded (the routing floor of the same datapath), and weft's
/// `to_netdev` SNAT. Each setup first checks what address the external host sees.
///
/// # Errors
/// As [`run`].
pub fn run_masq(opts: &NetOptions) -> Result<()> {
    compare(
        opts,
        "pod to external host through the node (SNAT to the node IP)",
        [
            ("bridge ipMasq", bridge_masq),
            ("weft, no SNAT", weft_routed),
            ("weft SNAT", weft_snat),
        ],
        "weft snat counter",
    )
}

/// Build the three setups, measure them in rounds and print the table, with the last setup's
/// ratios against the two others.
pub(super) fn compare(
    opts: &NetOptions,
    title: &str,
    builds: [(&'static str, Build); 3],
    counter: &str,
) -> Result<()> {
    preflight()?;
    let (seconds, rounds) = (opts.seconds.max(1), opts.rounds.max(1));
    let names = builds.map(|(name, _)| name);
    // On an early return these are dropped: each thread kills its servers, tears down.
    let setups = [
        Setup::start(builds[0].0, builds[0].1)?,
        Setup::start(builds[1].0, builds[1].1)?,
        Setup::start(builds[2].0, builds[2].1)?,
    ];
    let secs = seconds.to_string();
    // samples[setup][metric], one value per round.
    let mut samples: [[Vec<f64>; 3]; 3] = Default::default();
    for (round, first) in (1..=rounds).zip((0..names.len()).cycle()) {
        eprintln!("bench net: round {round}/{rounds}, {} first", names[first]);
        for s in [0, 1, 2].map(|k| (first + k) % names.len()) {
            let values = setups[s].measure(&secs).context(names[s])?;
            for (m, value) in values.into_iter().enumerate() {
                samples[s][m].push(value);
            }
        }
    }
    let [first, second, ours] = setups.map(|mut setup| setup.stop());
    let delta = (first?, second?, ours?).2;
    println!("{title}, {rounds} rounds x {seconds} s per test, medians (min-max)");
    let header = names.map(|name| format!("{name:<21}")).concat();
    let ratio = |k: usize| format!("{}/{}", names[2], names[k]);
    let width = ratio(0).len().max(22) + 2;
    println!("{:<19}{header}{:<width$}{}", "metric", ratio(0), ratio(1));
    for (m, name) in METRICS.iter().enumerate() {
        let [one, two, ours] = [0, 1, 2].map(|s| spread(&samples[s][m]));
        let cell = |(med, min, max)| format!("{:<21}", format!("{med:.1} ({min:.1}-{max:.1})"));
        let cells = [one, two, ours].map(cell).concat();
        let vs_first = format!("{:.2}x", ours.0 / one.0);
        println!("{name:<19}{cells}{vs_first:<width$}{:.2}x", ours.0 / two.0);
    }
    println!("ratios: medians; for latency lower is better, for throughput higher");
    println!("{counter}: +{delta} packets over the {} runs", names[2]);
    Ok(())
}

/// `(median, min, max)` of a non-empty list.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (f64::midpoint(v[(n - 1) / 2], v[n / 2]), v[0], v[n - 1])
}

/// Fail early, with the fix, if a tool is missing.
fn preflight() -> Result<()> {
    for tool in ["qperf", "iperf3", "ss"] {
        Command::new(tool)
            .arg("--version")
            .output()
            .with_context(|| format!("{tool} not found: {SETUP_HINT}"))?;
    }
    for plugin in ["bridge", "host-local"] {
        let path = Path::new(CNI_DIR).join(plugin);
        if !path.exists() {
            bail!("{} not found: {SETUP_HINT}", path.display());
        }
    }
    Ok(())
}

/// Where a setup's two pods are: their namespace names, the server pod's IPv4, and the address
/// the client measures against (the server pod's, or a Service address in front of it).
pub(super) struct Pods {
    pub(super) client: String,
    pub(super) server: String,
    pub(super) ip: Ipv4Addr,
    pub(super) target: Ipv4Addr,
}

/// The client measures the server pod directly.
pub(super) fn pods(client: &NamedNetNs, server: &NamedNetNs, ip: Ipv4Addr) -> Pods {
    let (client, server) = (client.name.clone(), server.name.clone());
    Pods {
        client,
        server,
        ip,
        target: ip,
    }
}

/// What a setup thread runs: build the setup, hand its pods to `serve` (which returns when
/// the measurements are over), tear down; returns a counter delta for the report, or 0.
pub(super) type Build = fn(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64>;

/// One setup, built and held by its own thread. Dropping it (or [`Setup::stop`]) tells the
/// thread to tear the setup down and waits until it has.
struct Setup {
    name: &'static str,
    pods: Pods,
    /// The thread's wait ends when the sender is dropped.
    owner: Option<(Sender<()>, JoinHandle<Result<u64>>)>,
}

impl Setup {
    /// Run `build` on a fresh thread (whose network namespace it may change) and wait until
    /// its pods are wired and serving.
    fn start(name: &'static str, build: Build) -> Result<Self> {
        eprintln!("bench net: setting up {name} ...");
        let (ready, pods) = mpsc::channel();
        let (done, wait) = mpsc::channel();
        let thread = thread::Builder::new()
            .name(format!("bench {name}"))
            .spawn(move || build(&|pods| serve(pods, &ready, &wait)))
            .with_context(|| format!("spawn the {name} thread"))?;
        let Ok(pods) = pods.recv() else {
            // The thread ended without handing its pods over: report why.
            join(name, thread)?;
            bail!("{name} setup ended early");
        };
        let owner = Some((done, thread));
        Ok(Self { name, pods, owner })
    }

    /// `[tcp_lat (µs), udp_lat (µs), TCP stream (Gbit/s)]`, each test `t` seconds long.
    fn measure(&self, t: &str) -> Result<[f64; 3]> {
        let (client, ip) = (&self.pods.client, self.pods.target.to_string());
        let qperf = ["-t", t, "-ip", QPERF_DATA_PORT, &ip, "tcp_lat", "udp_lat"];
        let out = checked(in_netns(client, "qperf").args(qperf))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let [tcp, udp] = parse_qperf(&text).with_context(|| format!("qperf said:\n{text}"))?;
        let out = checked(in_netns(client, "iperf3").args(["-c", &ip, "-t", t, "-J"]))?;
        let report: Value = serde_json::from_slice(&out.stdout).context("iperf3 -J: no JSON")?;
        let bps = report["end"]["sum_received"]["bits_per_second"].as_f64();
        let bps = bps.with_context(|| format!("no end.sum_received.bits_per_second: {report}"))?;
        Ok([tcp, udp, bps / 1e9])
    }

    /// Tell the thread to tear the setup down, and wait for it; what the thread returned.
    fn stop(&mut self) -> Result<u64> {
        let (done, thread) = self.owner.take().unzip();
        drop(done);
        thread.map_or(Ok(0), |thread| join(self.name, thread))
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        // Once serving, a setup thread can only fail by panicking: already on stderr.
        let _ = self.stop();
    }
}

/// On a setup thread: check that `pods` are wired, start the servers in the server pod, hand
/// the pods over on `ready` and hold on until `done` (a message, or its sender dropped).
fn serve(pods: Pods, ready: &Sender<Pods>, done: &Receiver<()>) -> Result<()> {
    let (ip, client) = (pods.ip.to_string(), pods.client.clone());
    checked(in_netns(&client, "ping").args(["-nq", "-c3", "-i0.1", "-W1", &ip]))
        .with_context(|| format!("{client} cannot ping {ip}: the setup is not wired"))?;
    let _qperf = Server::start(&pods.server, "qperf", &[], QPERF_PORT)?;
    let _iperf = Server::start(&pods.server, "iperf3", &["-s"], IPERF_PORT)?;
    if ready.send(pods).is_ok() {
        let _ = done.recv();
    }
    Ok(())
}

/// Wait for a setup thread; its result, or an error if it panicked.
fn join(name: &str, thread: JoinHandle<Result<u64>>) -> Result<u64> {
    match thread.join() {
        Ok(result) => result.with_context(|| format!("{name} setup")),
        // The panic message itself is already on stderr (default hook).
        Err(_) => bail!("{name} setup panicked (see above)"),
    }
}

/// Two namespaces joined by one veth pair, 10.79.0.1/24 and 10.79.0.2/24.
fn veth_floor(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    let _node = ThreadNetNs::new();
    let (client, server) = (NamedNetNs::new(), NamedNetNs::new());
    let (c, s) = (client.name.as_str(), server.name.as_str());
    checked(Command::new("ip").args([
        "link", "add", "eth0", "netns", c, "type", "veth", "peer", "name", "eth0", "netns", s,
    ]))?;
    for (ns, addr) in [(c, "10.79.0.1/24"), (s, "10.79.0.2/24")] {
        checked(Command::new("ip").args(["-n", ns, "addr", "add", addr, "dev", "eth0"]))?;
        checked(Command::new("ip").args(["-n", ns, "link", "set", "eth0", "up"]))?;
    }
    serve(pods(&client, &server, Ipv4Addr::new(10, 79, 0, 2)))?;
    Ok(0)
}

/// Two pods attached by `/usr/lib/cni/bridge` with host-local IPAM, as a runtime would.
fn bridge_cni(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    let _node = ThreadNetNs::new();
    let (client, server) = (NamedNetNs::new(), NamedNetNs::new());
    // Declared after the namespaces so that its DELs run while they still exist.
    let mut net = BridgeNet::new(false, false)?;
    net.add(&client)?;
    let server_ip = net.add(&server)?;
    serve(pods(&client, &server, server_ip))?;
    Ok(0)
}

/// Two pods wired by the weft datapath; returns the `redirect_local` delta while served.
pub(super) fn weft(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    let mut node = Node::new();
    let client = node.add_pod(1);
    let server = node.add_pod(2);
    let before = node.counters().get("redirect_local").copied().unwrap_or(0);
    serve(pods(&client.netns, &server.netns, server.v4))?;
    let after = node.counters().get("redirect_local").copied().unwrap_or(0);
    Ok(after.saturating_sub(before))
}

/// A pod behind the bridge plugin with `ipMasq: true`; the server is an external host behind
/// the node's `wnode`.
fn bridge_masq(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    let _node = ThreadNetNs::new();
    let ext = External::new(&[]);
    let client = NamedNetNs::new();
    let mut net = BridgeNet::new(true, true)?;
    net.add(&client)?;
    let seen = ext.tcp_peer(&client.path(), CHECK_PORT);
    ensure!(
        seen == NODE_IP,
        "the external host saw {seen}, not the node IP {NODE_IP}"
    );
    serve(external_pods(&client, &ext))?;
    Ok(0)
}

/// A weft pod whose endpoint is not masqueraded (the external host routes the pod CIDR back):
/// the same datapath without the SNAT step.
fn weft_routed(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    weft_to_external(serve, ENDPOINT_F_NO_SNAT_V4)
}

/// A weft pod masqueraded to the node IP by `to_netdev`; returns the `snat` counter delta.
fn weft_snat(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    weft_to_external(serve, 0)
}

fn weft_to_external(serve: &dyn Fn(Pods) -> Result<()>, flags: u32) -> Result<u64> {
    let mut node = Node::new();
    let pod = node.add_pod_with(1, flags, PoolIdPerFamily::default());
    let ext = External::new(&["10.77.0.0/24"]);
    let config = NetdevConfig {
        masq_v4: Some(NODE_IP),
        masq_v6: None,
    };
    node.datapath.attach_netdev(NODE_DEV, &config)?;
    node.datapath.ensure_world_ipcache()?;
    node.datapath.sync_host_ips(&[IpAddr::V4(NODE_IP)])?;
    let seen = ext.tcp_peer(&pod.netns.path(), CHECK_PORT);
    let expected = if flags == 0 {
        IpAddr::V4(NODE_IP)
    } else {
        IpAddr::V4(pod.v4)
    };
    ensure!(
        seen == expected,
        "the external host saw {seen}, expected {expected}"
    );
    let before = node.counters().get("snat").copied().unwrap_or(0);
    serve(external_pods(&pod.netns, &ext))?;
    let after = node.counters().get("snat").copied().unwrap_or(0);
    Ok(after.saturating_sub(before))
}

fn external_pods(client: &NamedNetNs, ext: &External) -> Pods {
    Pods {
        client: client.name.clone(),
        server: ext.netns.name.clone(),
        ip: EXT_IP,
        target: EXT_IP,
    }
}

/// A command that runs `program` in the named network namespace `netns`.
fn in_netns(netns: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns, program]);
    cmd
}

/// `[tcp_lat, udp_lat]` in µs from qperf's `latency = 12.3 us` lines, in the order asked.
fn parse_qperf(text: &str) -> Result<[f64; 2]> {
    let mut latencies = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ["latency", "=", value, unit] = words[..] else {
            continue;
        };
        let value: f64 = value
            .parse()
            .with_context(|| format!("latency in {line:?}"))?;
        let scale = match unit {
            "ns" => 1e-3,
            "us" => 1.0,
            "ms" => 1e3,
            "s" | "sec" => 1e6,
            other => bail!("unknown latency unit {other:?} in {line:?}"),
        };
        latencies.push(value * scale);
    }
    let [tcp, udp] = latencies[..] else {
        bail!("expected 2 latencies, got {latencies:?}")
    };
    Ok([tcp, udp])
}

/// Run `cmd`; an error (with its output) unless it exits successfully.
fn checked(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {cmd:?}: {SETUP_HINT}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}) (is the tool installed? {SETUP_HINT}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// A server process in a pod; killed and reaped on drop.
struct Server(Child);

impl Server {
    /// Start `program args` in `netns` and wait until it listens on TCP `port`.
    fn start(netns: &str, program: &str, args: &[&str], port: &str) -> Result<Self> {
        let child = in_netns(netns, program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {program} in {netns}: {SETUP_HINT}"))?;
        let mut server = Self(child);
        let (deadline, port) = (Instant::now() + Duration::from_secs(5), format!(":{port} "));
        loop {
            let out = checked(in_netns(netns, "ss").args(["-Hltn"]))?;
            if String::from_utf8_lossy(&out.stdout).contains(&port) {
                return Ok(server);
            }
            if let Some(status) = server.0.try_wait()? {
                bail!("{program} server in {netns} exited: {status}");
            }
            if Instant::now() > deadline {
                bail!("{program} server in {netns} not listening on {port} after 5 s");
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One node's bridge CNI network: its IPAM directory and the pods attached so far. On drop:
/// `CNI_COMMAND=DEL` for each pod, newest first, then the IPAM directory is removed.
pub(super) struct BridgeNet {
    config: String,
    ipam: PathBuf,
    attached: Vec<(PathBuf, String)>,
}

impl BridgeNet {
    /// Pods in 10.78.0.0/24 on a fresh bridge; with `masq`, iptables MASQUERADE for traffic
    /// leaving the subnet (`ipMasq`); with `default_route`, a default route via the bridge in
    /// each pod (to leave the subnet, or reach a Service address).
    pub(super) fn new(masq: bool, default_route: bool) -> Result<Self> {
        let ipam = std::env::temp_dir().join(unique("weft-bench-ipam-"));
        fs::create_dir_all(&ipam).with_context(|| format!("create {}", ipam.display()))?;
        let routes = if default_route {
            json!([{ "dst": "0.0.0.0/0" }])
        } else {
            json!([])
        };
        let config = json!({
            "cniVersion": "1.0.0", "name": "benchbr", "type": "bridge",
            "bridge": unique("wbr"), "isGateway": true, "ipMasq": masq,
            "ipam": {
                "type": "host-local", "ranges": [[{ "subnet": "10.78.0.0/24" }]],
                "routes": routes, "dataDir": ipam,
            },
        })
        .to_string();
        Ok(Self {
            config,
            ipam,
            attached: Vec::new(),
        })
    }

    /// `CNI_COMMAND=ADD` for `netns`, from this thread's (the node's) namespace; its IPv4.
    pub(super) fn add(&mut self, netns: &NamedNetNs) -> Result<Ipv4Addr> {
        let id = unique("benchcni");
        // Recorded first: DEL is idempotent, so a half-done ADD is undone too.
        self.attached.push((netns.path(), id.clone()));
        let out = self.cni("ADD", &netns.path(), &id)?;
        let result: Value = serde_json::from_slice(&out).context("bridge CNI ADD: no JSON")?;
        result["ips"][0]["address"]
            .as_str()
            .and_then(|a| a.split('/').next()?.parse().ok())
            .with_context(|| format!("no IPv4 ips[0].address in the bridge CNI result: {result}"))
    }

    /// Run `/usr/lib/cni/bridge` as a runtime does; its stdout (the result JSON).
    fn cni(&self, command: &str, netns: &Path, id: &str) -> Result<Vec<u8>> {
        super::bridge_cni(&self.config, command, netns, id).map(|(stdout, _)| stdout)
    }
}

impl Drop for BridgeNet {
    fn drop(&mut self) {
        for (netns, id) in self.attached.iter().rev() {
            if let Err(e) = self.cni("DEL", netns, id) {
                eprintln!("bridge CNI DEL for {}: {e:#}", netns.display());
            }
        }
        let _ = fs::remove_dir_all(&self.ipam);
    }
}

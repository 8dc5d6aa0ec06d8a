//! Pod-to-pod network benchmark: TCP and UDP round-trip latency (`qperf tcp_lat udp_lat`)
//! and single-stream TCP throughput (`iperf3`) between two pods on one node, for three
//! setups measured in the same run with the same tools: a bare veth pair between the two
//! namespaces (the floor nothing same-host can beat), Debian's reference `bridge` CNI
//! plugin, and weft (eBPF `bpf_redirect_peer`). Each setup lives in its own private node
//! namespace on its own thread, with pods in named namespaces; the root network namespace
//! is never touched, and every namespace, server process, CNI attachment and IPAM directory
//! is removed on the way out, on error and on panic too (RAII guards). Prints a table of
//! numbers and ratios; asserts nothing about them.

use std::{
    fs,
    io::Write as _,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::{Value, json};

use crate::{NamedNetNs, Node, ThreadNetNs, unique};

const SETUP_HINT: &str = "run `cargo xtask setup`";
const CNI_DIR: &str = "/usr/lib/cni";
const QPERF_PORT: &str = "19765";
const IPERF_PORT: &str = "5201";

/// Options of the pod-to-pod benchmark.
#[derive(Debug, Clone)]
pub struct NetOptions {
    /// Duration of each test (`qperf -t`, `iperf3 -t`), in seconds.
    pub seconds: u32,
}

impl Default for NetOptions {
    fn default() -> Self {
        Self { seconds: 5 }
    }
}

/// What one setup measured: `tcp_lat` (µs), `udp_lat` (µs), TCP stream (Gbit/s).
type Results = [f64; 3];

/// Measure the veth floor, the bridge CNI and weft, one after the other, and print the
/// table (and weft's `redirect_local` counter delta) on stdout; progress goes to stderr.
///
/// # Errors
/// A missing tool (`qperf`, `iperf3`, the CNI plugins), a setup step or a measurement
/// that fails; everything created so far is cleaned up first.
pub fn run(opts: &NetOptions) -> Result<()> {
    preflight()?;
    let seconds = opts.seconds.max(1);
    eprintln!("bench net: veth floor ...");
    let floor = on_own_thread("veth floor", move || veth_floor(seconds))?;
    eprintln!("bench net: bridge CNI ...");
    let bridge = on_own_thread("bridge CNI", move || bridge_cni(seconds))?;
    eprintln!("bench net: weft ...");
    let (weft, redirects) = on_own_thread("weft", move || weft(seconds))?;

    println!("pod-to-pod (same node), {seconds} s per test, 1 stream");
    println!(
        "{:<18}{:>11}{:>15}{:>15}{:>13}{:>13}",
        "metric", "veth floor", "bridge CNI", "weft", "weft/floor", "weft/bridge"
    );
    let all = [floor, bridge, weft];
    for (i, name) in ["tcp_lat (us)", "udp_lat (us)", "tcp stream (Gb/s)"]
        .iter()
        .enumerate()
    {
        let [f, b, w] = all.map(|r| r[i]);
        let (vs_floor, vs_bridge) = (w / f, w / b);
        println!("{name:<18}{f:>11.1}{b:>15.1}{w:>15.1}{vs_floor:>12.2}x{vs_bridge:>12.2}x");
    }
    println!("ratios are weft / baseline: for latency lower is better, for throughput higher");
    println!("weft redirect_local counter: +{redirects} packets over the weft run");
    Ok(())
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

/// Run `f` on a fresh thread (whose network namespace it may change) and turn a panic
/// there (the harness panics on failure) into an error.
fn on_own_thread<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let handle = thread::Builder::new()
        .name(format!("bench {what}"))
        .spawn(f)
        .with_context(|| format!("spawn the {what} thread"))?;
    // The panic message itself is already on stderr (default hook).
    let result = handle
        .join()
        .map_err(|_| anyhow!("{what} setup panicked (see above)"))?;
    result.with_context(|| format!("{what} benchmark"))
}

/// Two namespaces joined by one veth pair, 10.79.0.1/24 and 10.79.0.2/24.
fn veth_floor(seconds: u32) -> Result<Results> {
    let _node = ThreadNetNs::new();
    let client = NamedNetNs::new();
    let server = NamedNetNs::new();
    let (c, s) = (client.name.as_str(), server.name.as_str());
    checked(Command::new("ip").args([
        "link", "add", "eth0", "netns", c, "type", "veth", "peer", "name", "eth0", "netns", s,
    ]))?;
    for (ns, addr) in [(c, "10.79.0.1/24"), (s, "10.79.0.2/24")] {
        checked(Command::new("ip").args(["-n", ns, "addr", "add", addr, "dev", "eth0"]))?;
        checked(Command::new("ip").args(["-n", ns, "link", "set", "eth0", "up"]))?;
    }
    measure(&client, &server, Ipv4Addr::new(10, 79, 0, 2), seconds)
}

/// Two pods attached by `/usr/lib/cni/bridge` with host-local IPAM, as a runtime would.
fn bridge_cni(seconds: u32) -> Result<Results> {
    let _node = ThreadNetNs::new();
    let client = NamedNetNs::new();
    let server = NamedNetNs::new();
    // Declared after the namespaces so that its DELs run while they still exist.
    let mut net = BridgeNet::new()?;
    net.add(&client)?;
    let server_ip = net.add(&server)?;
    measure(&client, &server, server_ip, seconds)
}

/// Two pods wired by the weft datapath; also returns the `redirect_local` delta.
fn weft(seconds: u32) -> Result<(Results, u64)> {
    let mut node = Node::new();
    let client = node.add_pod(1);
    let server = node.add_pod(2);
    let before = node.counters().get("redirect_local").copied().unwrap_or(0);
    let results = measure(&client.netns, &server.netns, server.v4, seconds)?;
    let after = node.counters().get("redirect_local").copied().unwrap_or(0);
    Ok((results, after.saturating_sub(before)))
}

/// Start the servers in `server`, then run qperf and iperf3 from `client` against `ip`.
fn measure(client: &NamedNetNs, server: &NamedNetNs, ip: Ipv4Addr, t: u32) -> Result<Results> {
    let (ip, t) = (ip.to_string(), t.to_string());
    checked(
        client
            .command("ping")
            .args(["-n", "-q", "-c", "3", "-i", "0.1", "-W", "1", &ip]),
    )
    .with_context(|| format!("{} cannot ping {ip}: the setup is not wired", client.name))?;
    let _qperf = Server::start(server, "qperf", &[], QPERF_PORT)?;
    let _iperf = Server::start(server, "iperf3", &["-s"], IPERF_PORT)?;

    let out = checked(
        client
            .command("qperf")
            .args(["-t", &t, &ip, "tcp_lat", "udp_lat"]),
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (tcp_lat, udp_lat) = parse_qperf(&text).with_context(|| format!("qperf said:\n{text}"))?;

    let out = checked(client.command("iperf3").args(["-c", &ip, "-t", &t, "-J"]))?;
    let report: Value = serde_json::from_slice(&out.stdout).context("iperf3 -J printed no JSON")?;
    let bps = report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .with_context(|| format!("no end.sum_received.bits_per_second in iperf3 -J: {report}"))?;
    Ok([tcp_lat, udp_lat, bps / 1e9])
}

/// `(tcp_lat, udp_lat)` in µs from qperf's `latency = 12.3 us` lines, in the order asked.
fn parse_qperf(text: &str) -> Result<(f64, f64)> {
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
    Ok((tcp, udp))
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
    fn start(netns: &NamedNetNs, program: &str, args: &[&str], port: &str) -> Result<Self> {
        let child = netns
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {program} in {}: {SETUP_HINT}", netns.name))?;
        let mut server = Self(child);
        let (deadline, port) = (Instant::now() + Duration::from_secs(5), format!(":{port} "));
        loop {
            let out = checked(netns.command("ss").args(["-Hltn"]))?;
            if String::from_utf8_lossy(&out.stdout).contains(&port) {
                return Ok(server);
            }
            if let Some(status) = server.0.try_wait()? {
                bail!("{program} server in {} exited: {status}", netns.name);
            }
            if Instant::now() > deadline {
                bail!(
                    "{program} server in {} not listening on {port} after 5 s",
                    netns.name
                );
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
struct BridgeNet {
    config: String,
    ipam: PathBuf,
    attached: Vec<(PathBuf, String)>,
}

impl BridgeNet {
    fn new() -> Result<Self> {
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
        Ok(Self {
            config,
            ipam,
            attached: Vec::new(),
        })
    }

    /// `CNI_COMMAND=ADD` for `netns`, from this thread's (the node's) namespace; its IPv4.
    fn add(&mut self, netns: &NamedNetNs) -> Result<Ipv4Addr> {
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
        let plugin = Path::new(CNI_DIR).join("bridge");
        let mut child = Command::new(&plugin)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", id)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", CNI_DIR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}: {SETUP_HINT}", plugin.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(self.config.as_bytes())
                .context("write the CNI config")?;
        }
        let out = child
            .wait_with_output()
            .context("wait for the bridge CNI plugin")?;
        if !out.status.success() {
            bail!(
                "bridge CNI {command} failed ({}): {} {}",
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out.stdout)
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

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

/// What one setup measured.
#[derive(Debug, Clone, Copy)]
struct Results {
    tcp_lat_us: f64,
    udp_lat_us: f64,
    gbps: f64,
}

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
    let rows: [(&str, fn(&Results) -> f64); 3] = [
        ("tcp_lat (us)", |r| r.tcp_lat_us),
        ("udp_lat (us)", |r| r.udp_lat_us),
        ("tcp stream (Gb/s)", |r| r.gbps),
    ];
    for (name, get) in rows {
        let (f, b, w) = (get(&floor), get(&bridge), get(&weft));
        println!(
            "{name:<18}{f:>11.1}{b:>15.1}{w:>15.1}{:>12.2}x{:>12.2}x",
            w / f,
            w / b
        );
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
            bail!(
                "{} not found (containernetworking-plugins): {SETUP_HINT}",
                path.display()
            );
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
    let result = handle.join().map_err(|payload| {
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        anyhow!("{what} setup panicked: {msg}")
    })?;
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
    let ipam = TempDir::new("weft-bench-ipam-")?;
    let config = json!({
        "cniVersion": "1.0.0", "name": "benchbr", "type": "bridge",
        "bridge": unique("wbr"), "isGateway": true, "ipMasq": false,
        "ipam": {
            "type": "host-local", "ranges": [[{ "subnet": "10.78.0.0/24" }]],
            "dataDir": ipam.0,
        },
    })
    .to_string();
    let client = NamedNetNs::new();
    let server = NamedNetNs::new();
    let _client_cni = CniAttachment::add(&config, &client)?;
    let server_cni = CniAttachment::add(&config, &server)?;
    measure(&client, &server, server_cni.ip, seconds)
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
fn measure(
    client: &NamedNetNs,
    server: &NamedNetNs,
    ip: Ipv4Addr,
    seconds: u32,
) -> Result<Results> {
    let ip = ip.to_string();
    let secs = seconds.to_string();
    let ping = client
        .command("ping")
        .args(["-n", "-q", "-c", "3", "-i", "0.1", "-W", "1", &ip])
        .output();
    if !ping.as_ref().is_ok_and(|o| o.status.success()) {
        bail!("{} cannot ping {ip}: the setup is not wired", client.name);
    }
    let _qperf = Server::start(server, "qperf", &[], QPERF_PORT)?;
    let _iperf = Server::start(server, "iperf3", &["-s"], IPERF_PORT)?;

    let out = checked(
        client
            .command("qperf")
            .args(["-t", &secs, &ip, "tcp_lat", "udp_lat"]),
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (tcp_lat_us, udp_lat_us) =
        parse_qperf(&text).with_context(|| format!("qperf output:\n{text}"))?;

    let out = checked(
        client
            .command("iperf3")
            .args(["-c", &ip, "-t", &secs, "-J"]),
    )?;
    let report: Value = serde_json::from_slice(&out.stdout).context("iperf3 -J printed no JSON")?;
    let bps = report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .with_context(|| {
            format!("no end.sum_received.bits_per_second in iperf3 -J output: {report}")
        })?;
    Ok(Results {
        tcp_lat_us,
        udp_lat_us,
        gbps: bps / 1e9,
    })
}

/// `(tcp_lat, udp_lat)` in µs from qperf's `latency = 12.3 us` lines.
fn parse_qperf(text: &str) -> Result<(f64, f64)> {
    let (mut test, mut tcp, mut udp) = ("", None, None);
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            test = line.trim().trim_end_matches(':');
            continue;
        }
        let Some(rest) = line.trim().strip_prefix("latency") else {
            continue;
        };
        let mut words = rest.trim_start().trim_start_matches('=').split_whitespace();
        let (Some(value), Some(unit)) = (words.next(), words.next()) else {
            bail!("unreadable latency line {line:?}");
        };
        let value: f64 = value
            .parse()
            .with_context(|| format!("latency value in {line:?}"))?;
        let us = value
            * match unit {
                "ns" => 1e-3,
                "us" => 1.0,
                "ms" => 1e3,
                "s" | "sec" => 1e6,
                other => bail!("unknown latency unit {other:?} in {line:?}"),
            };
        match test {
            "tcp_lat" => tcp = Some(us),
            "udp_lat" => udp = Some(us),
            _ => {}
        }
    }
    Ok((
        tcp.context("no tcp_lat latency")?,
        udp.context("no udp_lat latency")?,
    ))
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
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let out = checked(netns.command("ss").args(["-Hltn"]))?;
            let listening = String::from_utf8_lossy(&out.stdout).lines().any(|l| {
                l.split_whitespace()
                    .nth(3)
                    .is_some_and(|local| local.ends_with(&format!(":{port}")))
            });
            if listening {
                return Ok(server);
            }
            if let Some(status) = server.0.try_wait()? {
                bail!(
                    "{program} server in {} exited ({status}): {SETUP_HINT}",
                    netns.name
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "{program} server in {} not listening on port {port} after 5 s",
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

/// A pod attached by a CNI plugin (ADD done); DEL on drop.
struct CniAttachment<'a> {
    config: &'a str,
    netns: &'a NamedNetNs,
    id: String,
    ip: Ipv4Addr,
}

impl<'a> CniAttachment<'a> {
    /// `CNI_COMMAND=ADD` for `netns`, from this thread's (the node's) namespace.
    fn add(config: &'a str, netns: &'a NamedNetNs) -> Result<Self> {
        let id = unique("benchcni");
        let out = cni("ADD", config, netns, &id)?;
        // From here on, a failure still runs DEL (drop).
        let mut attachment = Self {
            config,
            netns,
            id,
            ip: Ipv4Addr::UNSPECIFIED,
        };
        let result: Value =
            serde_json::from_slice(&out).context("bridge CNI ADD printed no JSON")?;
        attachment.ip = result["ips"][0]["address"]
            .as_str()
            .and_then(|a| a.split('/').next())
            .and_then(|a| a.parse().ok())
            .with_context(|| {
                format!("no IPv4 ips[0].address in the bridge CNI result: {result}")
            })?;
        Ok(attachment)
    }
}

impl Drop for CniAttachment<'_> {
    fn drop(&mut self) {
        if let Err(e) = cni("DEL", self.config, self.netns, &self.id) {
            eprintln!("bridge CNI DEL for {}: {e:#}", self.netns.name);
        }
    }
}

/// Call `/usr/lib/cni/bridge` with `command`; its stdout.
fn cni(command: &str, config: &str, netns: &NamedNetNs, id: &str) -> Result<Vec<u8>> {
    use std::io::Write as _;
    let plugin = Path::new(CNI_DIR).join("bridge");
    let mut child = Command::new(&plugin)
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", id)
        .env("CNI_NETNS", netns.path())
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", CNI_DIR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}: {SETUP_HINT}", plugin.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(config.as_bytes())
            .context("write the CNI config to the plugin")?;
    }
    let out = child
        .wait_with_output()
        .context("wait for the bridge CNI plugin")?;
    if !out.status.success() {
        bail!(
            "bridge CNI {command} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(prefix: &str) -> Result<Self> {
        let path = std::env::temp_dir().join(unique(prefix));
        fs::create_dir_all(&path).with_context(|| format!("create {}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

//! weft's integration harness: a private "node" network namespace per test thread, pods in
//! named namespaces wired by the real datapath module, a private bpffs pin directory, and
//! helpers to run commands inside pods; a Kubernetes API server emulator (`kube`) for the
//! agent's Kubernetes side; and the generator of the checked-in CRDs (`crds`). Used by the
//! integration tests, the benchmarks and `gen-crds`, nothing in production. Every failure
//! panics with the reason (tests must fail loudly).

#![allow(
    clippy::missing_panics_doc,
    reason = "a test harness: every helper panics with the reason instead of returning errors"
)]

pub mod agent;
pub mod azure;
pub mod bench;
pub mod cloud;
pub mod cluster;
pub mod containerd;
pub mod crds;
pub mod docs;
pub mod ec2;
pub mod emulator;
pub mod external;
pub mod frames;
pub mod fresh;
pub mod kube;
pub mod kube_proxy;
pub mod operator;

use std::{
    collections::BTreeMap,
    fs,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    os::fd::AsFd as _,
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::atomic::{AtomicU32, Ordering},
};

use nix::sched::{CloneFlags, setns, unshare};
use weft_agent::datapath::{AttachMode, Datapath, DatapathConfig, PodSpec, PoolIdPerFamily};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A name unique to this process and call: `<prefix><pid>x<n>`.
#[must_use]
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Panic unless running as root: the datapath tests load eBPF and create namespaces.
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test loads eBPF programs and creates network namespaces: run it as root \
         (`sudo -E cargo xtask test`); refusing to skip silently"
    );
}

/// Run `cmd` and panic with its output if it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Puts the calling thread into a fresh network namespace; restores the old one on drop.
#[derive(Debug)]
pub struct ThreadNetNs {
    original: fs::File,
}

impl ThreadNetNs {
    /// Unshare the calling thread's network namespace and bring `lo` up in the new one.
    #[must_use]
    pub fn new() -> Self {
        let original = fs::File::open("/proc/thread-self/ns/net")
            .unwrap_or_else(|e| panic!("open /proc/thread-self/ns/net: {e}"));
        unshare(CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("unshare(CLONE_NEWNET): {e}"));
        run(Command::new("ip").args(["link", "set", "lo", "up"]));
        Self { original }
    }
}

impl ThreadNetNs {
    /// Put the calling thread into the existing namespace at `path` (a named namespace, so a
    /// child process spawned now runs there); restores the old one on drop.
    #[must_use]
    pub fn enter(path: &Path) -> Self {
        let original = fs::File::open("/proc/thread-self/ns/net")
            .unwrap_or_else(|e| panic!("open /proc/thread-self/ns/net: {e}"));
        let target =
            fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        setns(target.as_fd(), CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("setns into {}: {e}", path.display()));
        Self { original }
    }
}

impl Default for ThreadNetNs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ThreadNetNs {
    fn drop(&mut self) {
        if let Err(e) = setns(self.original.as_fd(), CloneFlags::CLONE_NEWNET) {
            eprintln!("cannot restore the test thread's network namespace: {e}");
        }
    }
}

/// A named network namespace (`ip netns add`), deleted on drop.
#[derive(Debug)]
pub struct NamedNetNs {
    /// Its name under /var/run/netns.
    pub name: String,
}

impl NamedNetNs {
    /// Create `weft<pid>x<n>`.
    #[must_use]
    pub fn new() -> Self {
        let name = unique("weft");
        run(Command::new("ip").args(["netns", "add", &name]));
        Self { name }
    }

    /// Its file, for `CNI_NETNS` and `setns`.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        Path::new("/var/run/netns").join(&self.name)
    }

    /// A command that runs inside this namespace (`ip netns exec`).
    #[must_use]
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }
}

impl Default for NamedNetNs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NamedNetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A pod wired by the datapath.
#[derive(Debug)]
pub struct Pod {
    /// Its network namespace.
    pub netns: NamedNetNs,
    /// Container id given to the datapath.
    pub id: String,
    /// IPv4 address.
    pub v4: Ipv4Addr,
    /// IPv6 address.
    pub v6: Ipv6Addr,
}

impl Pod {
    /// Send `count` pings to `dst` every `interval` seconds; true if all were answered.
    #[must_use]
    pub fn ping(&self, dst: IpAddr, count: u32, interval: &str) -> bool {
        self.netns
            .command("ping")
            .args([
                "-n",
                "-q",
                "-c",
                &count.to_string(),
                "-i",
                interval,
                "-W",
                "1",
            ])
            .arg(dst.to_string())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("cannot run ping: {e}"))
            .success()
    }
}

/// Gateway (router IP) of the test pods.
pub const GATEWAY_V4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// IPv6 gateway of the test pods.
pub const GATEWAY_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1);

/// A node: private netns for the calling thread, private bpffs pin dir, loaded datapath.
/// Must stay on the thread that created it (the namespace is per thread).
#[derive(Debug)]
pub struct Node {
    /// The datapath under test.
    pub datapath: Datapath,
    /// Runtime for the datapath's async (netlink) operations, on this thread.
    pub runtime: tokio::runtime::Runtime,
    config: DatapathConfig,
    // Dropped last: the namespace the veths live in.
    _netns: ThreadNetNs,
}

impl Node {
    /// Enter a fresh node namespace and load the datapath with a private pin dir.
    #[must_use]
    pub fn new() -> Self {
        Self::with_attach_mode(AttachMode::Auto)
    }

    /// As [`Node::new`], attaching programs with `attach_mode`.
    #[must_use]
    pub fn with_attach_mode(attach_mode: AttachMode) -> Self {
        require_root();
        let netns = ThreadNetNs::new();
        let config = DatapathConfig {
            pin_dir: Path::new("/sys/fs/bpf").join(unique("weft-test-")),
            attach_mode,
        };
        let datapath = Datapath::load(&config).unwrap_or_else(|e| panic!("{}", report(&e)));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
        Self {
            datapath,
            config,
            runtime,
            _netns: netns,
        }
    }

    /// The datapath's configuration (its pin dir).
    #[must_use]
    pub fn config(&self) -> &DatapathConfig {
        &self.config
    }

    /// Wire pod number `n` (1..=200): `10.77.0.(10+n)` and `fd00:77::(10+n)`.
    pub fn add_pod(&mut self, n: u8) -> Pod {
        self.add_pod_with(n, 0, PoolIdPerFamily::default())
    }

    /// As [`Node::add_pod`], with endpoint flags (`ENDPOINT_F_*`) and each family's pool id.
    pub fn add_pod_with(&mut self, n: u8, flags: u32, pool_id: PoolIdPerFamily) -> Pod {
        let netns = NamedNetNs::new();
        let v4 = Ipv4Addr::new(10, 77, 0, 10 + n);
        let v6 = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 10 + u16::from(n));
        let id = unique("pod");
        let path = netns.path();
        let addrs = [IpAddr::V4(v4), IpAddr::V6(v6)];
        let spec = PodSpec {
            container_id: &id,
            netns: &path,
            ifname: "eth0",
            addrs: &addrs,
            gateway_v4: Some(GATEWAY_V4),
            gateway_v6: Some(GATEWAY_V6),
            identity: agent_common::identity::MIN_ALLOCATED + u32::from(n),
            pool_id,
            flags,
            mtu: None,
        };
        self.runtime
            .block_on(self.datapath.add_pod(&spec))
            .unwrap_or_else(|e| panic!("add_pod {id}: {}", report(&e)));
        Pod { netns, id, v4, v6 }
    }

    /// Drop the loaded datapath and load it again from the pins (an agent restart).
    pub fn restart_datapath(&mut self) {
        let fresh = Datapath::load(&self.config).unwrap_or_else(|e| panic!("{}", report(&e)));
        // The old object goes away only after the new one re-adopted every link.
        let old = std::mem::replace(&mut self.datapath, fresh);
        drop(old);
    }

    /// Packets per counter reason.
    #[must_use]
    pub fn counters(&mut self) -> BTreeMap<&'static str, u64> {
        self.datapath
            .counters()
            .unwrap_or_else(|e| panic!("{}", report(&e)))
            .into_iter()
            .map(|row| (row.reason, row.packets))
            .collect()
    }

    /// Names of links in the node namespace that start with `prefix`.
    #[must_use]
    pub fn links_named(&self, prefix: &str) -> Vec<String> {
        let out = run(Command::new("ip").args(["-j", "link", "show"]));
        let links: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("ip -j link: {e}"));
        links
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["ifname"].as_str())
            .filter(|n| n.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }
}

impl Default for Node {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.config.pin_dir);
    }
}

/// Path of a workspace binary (`weft-agent`, `weft-cni`) built next to the test executable;
/// panics when it is missing or older than its sources ([`fresh`]), naming the build command.
#[must_use]
pub fn bin_path(name: &str) -> PathBuf {
    // Test executables live in target/<profile>/deps, benchmark binaries in target/<profile>.
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let path = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not built next to {}: run `{}` (cargo xtask test does)",
                exe.display(),
                fresh::BUILD_COMMAND
            )
        });
    fresh::refuse_stale(&path);
    path
}

/// An error and its whole source chain on one line.
#[must_use]
pub fn report(error: &dyn std::error::Error) -> String {
    weft_agent::error::chain(error)
}

/// Run program `name` once on `frame` with `BPF_PROG_TEST_RUN` (skb on `lo` of the node
/// namespace, ifindex 1); returns the verdict and the frame as the program left it.
pub fn test_run(datapath: &mut Datapath, name: &'static str, frame: &[u8]) -> (u32, Vec<u8>) {
    let (verdict, out, _) = test_run_repeat(datapath, name, frame, 1);
    (verdict, out)
}

/// As [`test_run`], `repeat` times; also returns the kernel's average time per run.
pub fn test_run_repeat(
    datapath: &mut Datapath,
    name: &'static str,
    frame: &[u8],
    repeat: u32,
) -> (u32, Vec<u8>, std::time::Duration) {
    use aya::programs::{TestRun as _, TestRunOptions};
    let program = datapath
        .program(name)
        .unwrap_or_else(|e| panic!("{}", report(&e)));
    let mut out = vec![0u8; frame.len() + 256];
    let mut opts = TestRunOptions::new();
    opts.data_in = Some(frame);
    opts.data_out = Some(&mut out);
    opts.repeat = repeat;
    let result = program
        .test_run(opts)
        .unwrap_or_else(|e| panic!("test_run {name}: {}", report(&e)));
    out.truncate(result.data_size_out as usize);
    (result.return_value, out, result.duration)
}

/// Poll `check` until it holds or `timeout` passes (every 50 ms) and return what it gave; the
/// panic shows `what` and the last state `check` reported (an [`agent::Agent`] dropped by the
/// panic prints its log).
pub fn wait_for<T>(
    what: &str,
    timeout: std::time::Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = std::time::Instant::now() + timeout;
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        match check() {
            Ok(value) => return value,
            Err(state) => last = state,
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("timed out after {timeout:?} waiting for {what}; last state: {last}");
}

/// [`wait_for`] a condition that has no state worth reporting.
pub fn wait_until(what: &str, timeout: std::time::Duration, mut check: impl FnMut() -> bool) {
    wait_for(what, timeout, || {
        check().then_some(()).ok_or_else(|| "not yet".to_owned())
    });
}

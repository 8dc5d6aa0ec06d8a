//! The real `weft-agent run` as a child process inside the calling thread's (node) network
//! namespace, on a private store, state directory, socket and bpffs pin directory; and
//! `weft-cni` invoked exactly as a container runtime invokes it (environment + stdin).

use std::{
    io::Write as _,
    net::IpAddr,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use ipnet::IpNet;
use serde_json::{Value, json};

use crate::{NamedNetNs, bin_path, unique};

/// A running agent and its private directories (removed on drop, after killing it).
#[derive(Debug)]
pub struct Agent {
    /// Store directory (documents).
    pub store: PathBuf,
    /// State directory (records, router addresses).
    pub state: PathBuf,
    /// bpffs pin directory.
    pub pin_dir: PathBuf,
    /// Socket path.
    pub socket: PathBuf,
    /// Queue of DELs made while the agent was down.
    pub delete_queue: PathBuf,
    /// Extra `run` flags (cilium-config keys).
    pub flags: Vec<String>,
    /// Run against the Kubernetes API through this kubeconfig instead of the store.
    pub kubeconfig: Option<PathBuf>,
    /// The node name (`--node-name`).
    pub node_name: String,
    /// Extra environment for the next [`Agent::spawn`] (e.g. `WEFT_TEST_FAULTS`).
    pub env: Vec<(String, String)>,
    /// A command the next [`Agent::spawn`] runs the agent under (e.g. `ip netns exec NODE`).
    pub wrapper: Vec<String>,
    child: Option<Child>,
    base: PathBuf,
}

/// `node1` with a /24 in the multi-pool default pool (the example store's /27 is too small for
/// tens of pods and the router).
pub const NODE1_WITH_A_24: &str = "\
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

/// The result of one `weft-cni` call.
#[derive(Debug)]
pub struct CniCall {
    /// Exit code.
    pub code: i32,
    /// Parsed stdout (`Null` when empty).
    pub stdout: Value,
}

impl Agent {
    /// Directories for an agent whose store is a copy of `store_template`; not started yet.
    #[must_use]
    pub fn new(store_template: &Path, flags: &[&str]) -> Self {
        let base = std::env::temp_dir().join(unique("weft-agent-"));
        let store = base.join("store");
        copy_dir(store_template, &store);
        Self {
            state: base.join("state"),
            socket: base.join("state/weft.sock"),
            delete_queue: base.join("state/delete-queue"),
            pin_dir: Path::new("/sys/fs/bpf").join(unique("weft-test-")),
            store,
            flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            kubeconfig: None,
            node_name: "node1".to_owned(),
            env: Vec::new(),
            wrapper: Vec::new(),
            child: None,
            base,
        }
    }

    /// Directories for an agent that runs against the Kubernetes API (the emulator) through
    /// `kubeconfig`, as node `node_name`; not started yet.
    #[must_use]
    pub fn kube(kubeconfig: &Path, node_name: &str, flags: &[&str]) -> Self {
        let base = std::env::temp_dir().join(unique("weft-agent-"));
        std::fs::create_dir_all(&base).expect("agent dir");
        Self {
            state: base.join("state"),
            socket: base.join("state/weft.sock"),
            delete_queue: base.join("state/delete-queue"),
            pin_dir: Path::new("/sys/fs/bpf").join(unique("weft-test-")),
            store: base.join("no-store"),
            flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            kubeconfig: Some(kubeconfig.to_path_buf()),
            node_name: node_name.to_owned(),
            env: Vec::new(),
            wrapper: Vec::new(),
            child: None,
            base,
        }
    }

    /// Start `weft-agent run` (in the calling thread's netns) and wait until its socket answers.
    pub fn start(&mut self) {
        self.spawn();
        self.wait_ready(Duration::from_secs(20));
    }

    /// Start `weft-agent run` without waiting for it.
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "agent already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.base.join("agent.log"))
            .expect("agent log");
        let mut command = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(bin_path("weft-agent"));
                command
            }
            None => Command::new(bin_path("weft-agent")),
        };
        command
            .arg("--pin-dir")
            .arg(&self.pin_dir)
            .arg("run")
            .args(["--node-name", &self.node_name])
            .args(["--health-addr", "127.0.0.1:0"]);
        match &self.kubeconfig {
            Some(path) => command.arg("--kubeconfig").arg(path),
            None => command.arg("--store").arg(&self.store),
        };
        let child = command
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--delete-queue-dir")
            .arg(&self.delete_queue)
            .args(&self.flags)
            .env("RUST_LOG", "info")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log)
            .env_remove("KUBECONFIG")
            .spawn()
            .expect("spawn weft-agent");
        self.child = Some(child);
    }

    /// Wait until the agent's socket answers (it finished start-up).
    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "weft-agent exited ({status}) during start-up:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "weft-agent did not open its socket in {timeout:?}:\n{}",
            self.log()
        );
    }

    /// Wait for the agent to exit on its own; its exit code (`None`: still running at the
    /// deadline).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// GET `path` from the agent's health endpoint (`--health-addr 127.0.0.1:0`, the bound
    /// port read from its log); the status code.
    #[must_use]
    pub fn probe(&self, path: &str) -> u16 {
        self.http_get(path).0
    }

    /// GET `path` from the agent's health endpoint (which also serves `/metrics`); the status
    /// code and the body.
    #[must_use]
    pub fn http_get(&self, path: &str) -> (u16, String) {
        http_get(&self.logged_addr("serving /healthz and /readyz"), path)
    }

    /// The `addr=` field of the last log line containing `message` (a bound listener of the
    /// running agent: the log is kept across restarts).
    #[must_use]
    pub fn logged_addr(&self, message: &str) -> String {
        let log = self.log();
        let plain: String = strip_ansi(&log);
        plain
            .lines()
            .rev()
            .find_map(|l| {
                l.contains(message)
                    .then(|| l.rsplit("addr=").next())
                    .flatten()
            })
            .unwrap_or_else(|| panic!("no {message:?} with an address in the log:\n{log}"))
            .trim()
            .to_owned()
    }

    /// The agent's process id, while it runs.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Is the agent process alive?
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// SIGKILL the agent (no chance to flush anything) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM the agent and wait for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = child.wait();
        }
    }

    /// The agent's log so far.
    #[must_use]
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.base.join("agent.log")).unwrap_or_default()
    }

    /// Wait until the log has a line containing `message` (a line written after an API call
    /// answered may trail what the test already sees in the store); panics with the log.
    pub fn wait_log(&mut self, message: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().contains(message) {
                return;
            }
            assert!(
                self.running(),
                "weft-agent exited before logging {message:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "weft-agent did not log {message:?} in {timeout:?}:\n{}",
            self.log()
        );
    }

    /// The network configuration a runtime would pass.
    #[must_use]
    pub fn netconf(&self, version: &str) -> String {
        json!({
            "cniVersion": version, "name": "weft", "type": "weft-cni",
            "agent-socket": self.socket, "delete-queue-dir": self.delete_queue,
        })
        .to_string()
    }

    /// Call `weft-cni` with `command` for container `id` in `netns` as pod `ns/name`.
    #[must_use]
    pub fn cni(&self, command: &str, id: &str, netns: &str, pod: (&str, &str)) -> CniCall {
        let args = format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={}",
            pod.0, pod.1
        );
        cni_call(
            &[
                ("CNI_COMMAND", command),
                ("CNI_CONTAINERID", id),
                ("CNI_NETNS", netns),
                ("CNI_IFNAME", "eth0"),
                ("CNI_ARGS", &args),
                ("CNI_PATH", "/opt/cni/bin"),
            ],
            &self.netconf("1.0.0"),
        )
    }

    /// The own CiliumNode document as it is on disk now.
    #[must_use]
    pub fn node_doc(&self) -> Value {
        let text = std::fs::read_to_string(self.store.join("ciliumnodes/node1.yaml"))
            .expect("node document");
        serde_norway::from_str(&text).expect("node document parses")
    }

    /// Write a store document (relative path), as a user or the API would.
    pub fn put_doc(&self, rel: &str, text: &str) {
        let path = self.store.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write document");
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("--- weft-agent log ---\n{}", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.base);
        let _ = std::fs::remove_dir_all(&self.pin_dir);
    }
}

/// GET `path` from `addr` (HTTP/1.1, one request); the status code and the body.
#[must_use]
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::Read as _;
    let mut stream =
        std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_owned());
    (code, body)
}

/// `text` without ANSI colour sequences.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A pod wired through `weft-cni` by [`add`].
#[derive(Debug)]
pub struct Pod {
    /// Its network namespace.
    pub netns: NamedNetNs,
    /// Its container id.
    pub id: String,
    /// Its Kubernetes namespace.
    pub ns: String,
    /// Its name.
    pub name: String,
    /// The addresses ADD returned.
    pub ips: Vec<IpAddr>,
}

/// One ping from `from` to `to` (1 s timeout); whether it was answered.
///
/// # Panics
/// If `ping` cannot be run.
#[must_use]
pub fn ping(from: &Pod, to: IpAddr) -> bool {
    from.netns
        .command("ping")
        .args(["-n", "-q", "-c", "1", "-W", "1"])
        .arg(to.to_string())
        .stdout(Stdio::null())
        .status()
        .expect("ping")
        .success()
}

/// The addresses in an ADD result (`ips[].address`, without the prefix length).
///
/// # Panics
/// If the result has no `ips` list.
#[must_use]
pub fn ips_of(call: &CniCall) -> Vec<IpAddr> {
    call.stdout["ips"]
        .as_array()
        .unwrap_or_else(|| panic!("no ips in result: {}", call.stdout))
        .iter()
        .map(|ip| {
            ip["address"]
                .as_str()
                .expect("address")
                .parse::<IpNet>()
                .expect("cidr")
                .addr()
        })
        .collect()
}

/// ADD `ns/name` in a fresh namespace; panics with the agent's answer when it fails. "Try
/// again later" (11: the pool has not arrived yet) is retried for up to 10 s, as kubelet does.
///
/// # Panics
/// If the ADD fails.
#[must_use]
pub fn add(agent: &Agent, ns: &str, name: &str) -> Pod {
    let netns = NamedNetNs::new();
    let id = unique("ctr-");
    let deadline = Instant::now() + Duration::from_secs(10);
    let call = loop {
        let call = agent.cni("ADD", &id, &netns.path().display().to_string(), (ns, name));
        if call.stdout["code"] != 11 || Instant::now() > deadline {
            break call;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(call.code, 0, "ADD {ns}/{name} failed: {}", call.stdout);
    let ips = ips_of(&call);
    Pod {
        netns,
        id,
        ns: ns.to_owned(),
        name: name.to_owned(),
        ips,
    }
}

/// DEL a pod.
///
/// # Panics
/// If the DEL fails.
pub fn del(agent: &Agent, pod: &Pod) {
    let call = agent.cni(
        "DEL",
        &pod.id,
        &pod.netns.path().display().to_string(),
        (&pod.ns, &pod.name),
    );
    assert_eq!(
        call.code, 0,
        "DEL {}/{} failed: {}",
        pod.ns, pod.name, call.stdout
    );
}

/// Run `weft-cni` with exactly `env` and `stdin`.
#[must_use]
pub fn cni_call(env: &[(&str, &str)], stdin: &str) -> CniCall {
    run_cni(Command::new(bin_path("weft-cni")), env, stdin)
}

/// Run `weft-cni` as user and group `uid` (util-linux `setpriv`), otherwise as [`cni_call`].
/// The plugin runs from a world-readable copy in the temp dir, so the target dir's
/// permissions do not matter.
#[must_use]
pub fn cni_call_as(uid: u32, env: &[(&str, &str)], stdin: &str) -> CniCall {
    let copy = std::env::temp_dir().join(unique("weft-cni-"));
    std::fs::copy(bin_path("weft-cni"), &copy).expect("copy weft-cni");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut cmd = Command::new("setpriv");
    cmd.args([
        format!("--reuid={uid}"),
        format!("--regid={uid}"),
        "--clear-groups".to_owned(),
        "--".to_owned(),
    ])
    .arg(&copy);
    let call = run_cni(cmd, env, stdin);
    let _ = std::fs::remove_file(&copy);
    call
}

/// Run `cmd` (a `weft-cni`, or a command that execs one) with exactly `env` and `stdin`.
#[must_use]
pub fn run_cni(mut cmd: Command, env: &[(&str, &str)], stdin: &str) -> CniCall {
    let mut child = cmd
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn weft-cni");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin");
    let out = child.wait_with_output().expect("weft-cni");
    let text = String::from_utf8_lossy(&out.stdout);
    CniCall {
        code: out.status.code().unwrap_or(-1),
        stdout: if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("weft-cni stdout is not JSON ({e}): {text}"))
        },
    }
}

/// The example store shipped in `examples/store`.
#[must_use]
pub fn example_store() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/store")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

//! containerd from Debian's packages as a container runtime nobody here wrote: a private
//! `containerd` daemon, a one-layer busybox image built on the spot, and `ctr run --cni`, which
//! calls CNI plugins through go-cni and libcni as Kubernetes' CRI does.
//!
//! Nothing of the host is touched. The daemon runs in its own mount namespace (`unshare
//! --mount --propagation private`) in which temporary directories are bind-mounted over the
//! paths `ctr` and the shims hard-code: `/etc/cni/net.d` (the first network configuration there
//! is the one `ctr run --cni` uses), `/opt/cni/bin` (searched before `/usr/lib/cni`),
//! `/var/lib/cni` (libcni's result cache) and `/run/containerd` (shim sockets, FIFOs, runc
//! state). A path that does not exist on the host gets an overlay over its nearest existing
//! parent in that namespace only, so it can be created there. Every `ctr` runs in the same
//! namespace through `nsenter --mount`; it stays in the network namespace of the thread that
//! starts it, which is where `ctr` executes the CNI plugins (the node).
//!
//! [`Containerd::shutdown`] (and, on a panic, `Drop`) removes every task and container, stops
//! the daemon by its PID, ends any shim it left, removes the cgroups the containers used and the
//! temporary directories, and checks that the host's CNI and containerd directories and its
//! forwarding sysctls are as they were (restoring a sysctl that changed).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    fs,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Output, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use agent_common::{
    counters::Counter,
    endpoint::{EndpointInfo, EndpointKey, FAMILY_IPV4, FAMILY_IPV6},
    maps, reason,
};
use aya::maps::{HashMap as BpfHashMap, Map, MapData, PerCpuArray};
use serde_json::{Value, json};

use crate::{require_root, run, unique};

/// The image every container runs: busybox (static) and its applet links, one layer.
pub const IMAGE: &str = "weft.test/busybox:1";

/// Host paths `ctr` and the shims use, each replaced by a temporary directory inside the
/// daemon's mount namespace: (host path, name of the directory under the base directory).
const BOUND: [(&str, &str); 4] = [
    ("/etc/cni/net.d", "net.d"),
    ("/opt/cni/bin", "cni-bin"),
    ("/var/lib/cni", "cni-cache"),
    ("/run/containerd", "run"),
];

/// Forwarding sysctls of the host's network namespace, checked (and restored) on shutdown.
const SYSCTLS: [&str; 2] = ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"];

const SETUP_HINT: &str =
    "run `cargo xtask setup` (it installs containerd, runc and busybox-static)";

/// A private containerd daemon and everything it uses; see the module documentation.
#[derive(Debug)]
pub struct Containerd {
    /// Temporary directory holding config, root, state, socket, log and the bound directories.
    pub base: PathBuf,
    /// The daemon's gRPC socket (`CONTAINERD_ADDRESS` of every `ctr`).
    pub socket: PathBuf,
    /// Seen as `/etc/cni/net.d` by `ctr`.
    pub net_d: PathBuf,
    /// Seen as `/opt/cni/bin` by `ctr`.
    pub cni_bin: PathBuf,
    /// Seen as `/var/lib/cni` by `ctr`: libcni's cached results (`results/<net>-<id>-<if>`).
    pub cni_cache: PathBuf,
    /// The image tarball (docker-archive) imported by [`Containerd::import_image`].
    pub image_tar: PathBuf,
    /// Parent cgroup of every container (`--cgroup /<this>/<namespace>-<id>`).
    pub cgroup: String,
    daemon: Option<Child>,
    pid: u32,
    namespaces: Mutex<BTreeSet<String>>,
    host: HostState,
    done: bool,
}

/// What the host looked like before the daemon started.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostState {
    /// Each bound path and whether it existed.
    dirs: Vec<(&'static str, bool)>,
    /// Each of [`SYSCTLS`] and its value in the host's network namespace.
    sysctls: Vec<(&'static str, String)>,
}

impl HostState {
    fn read() -> Self {
        Self {
            dirs: BOUND
                .iter()
                .map(|(path, _)| (*path, Path::new(path).exists()))
                .collect(),
            sysctls: host_sysctls(),
        }
    }
}

/// `nsenter --net=` the host's network namespace: the one this process's main thread is in
/// (the calling thread may be in a node namespace).
fn in_host_netns() -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/proc/{}/ns/net", std::process::id()));
    cmd
}

/// The host's forwarding sysctls.
fn host_sysctls() -> Vec<(&'static str, String)> {
    let out = run(in_host_netns().args(["sysctl", "-n"]).args(SYSCTLS));
    let text = String::from_utf8_lossy(&out.stdout);
    let values: Vec<&str> = text.lines().collect();
    assert_eq!(values.len(), SYSCTLS.len(), "sysctl -n printed {text:?}");
    SYSCTLS
        .iter()
        .zip(values)
        .map(|(k, v)| (*k, v.trim().to_owned()))
        .collect()
}

/// Panic with the fix unless every tool the runtime tests need is installed.
pub fn preflight() {
    require_root();
    for tool in [
        "containerd",
        "ctr",
        "runc",
        "unshare",
        "nsenter",
        "tar",
        "sha256sum",
        "sysctl",
    ] {
        let found = std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
        assert!(found, "{tool} is not installed: {SETUP_HINT}");
    }
    // The image has no libc: busybox must be the static build (busybox-static), not `busybox`.
    let status = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "busybox-static"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        status.trim() == "install ok installed" && Path::new("/bin/busybox").is_file(),
        "the statically linked /bin/busybox of Debian's busybox-static is missing: {SETUP_HINT}"
    );
}

impl Containerd {
    /// Build the image, start the daemon in its private mount namespace and wait until it
    /// answers. Call it before entering a node namespace: the daemon stays where it starts.
    #[must_use]
    pub fn start() -> Self {
        preflight();
        let host = HostState::read();
        let base = std::env::temp_dir().join(unique("weft-containerd-"));
        let text = base.display().to_string();
        // Under an overlaid directory the snapshots' overlayfs would get an overlayfs upper.
        assert!(
            !text.contains([',', ':', '\''])
                && BOUND.iter().all(|(target, _)| {
                    let covered = Path::new(target).ancestors().find(|p| p.exists());
                    !covered.is_some_and(|c| base.starts_with(c) || fs_path_under(&base, c))
                }),
            "unsuitable temporary directory {text}: set TMPDIR to a plain path such as /tmp"
        );
        fs::create_dir_all(&base).unwrap_or_else(|e| panic!("create {text}: {e}"));
        let dir = |name: &str| {
            let path = base.join(name);
            fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
            path
        };
        for (_, name) in BOUND {
            dir(name);
        }
        let socket = base.join("containerd.sock");
        let config = base.join("config.toml");
        fs::write(&config, config_toml(&base, &socket)).expect("write config.toml");
        let mut ctrd = Self {
            net_d: base.join("net.d"),
            cni_bin: base.join("cni-bin"),
            cni_cache: base.join("cni-cache"),
            image_tar: base.join("image.tar"),
            cgroup: unique("weft-ctr-"),
            socket,
            daemon: None,
            pid: 0,
            namespaces: Mutex::new(BTreeSet::new()),
            host,
            done: false,
            base,
        };
        ctrd.build_image();
        let log = fs::File::create(ctrd.base.join("containerd.log")).expect("containerd log");
        // `unshare` (no --fork) and `sh` both exec: the child's PID is containerd's.
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(mount_script(&ctrd.base))
            .arg("sh")
            .arg("containerd")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start containerd: {e}; {SETUP_HINT}"));
        ctrd.pid = child.id();
        ctrd.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = ctrd
                .daemon
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "containerd exited ({status}) during start-up:\n{}",
                    ctrd.log()
                );
            }
            let ready = ctrd.socket.exists()
                && ctrd
                    .ctr("default")
                    .arg("version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
            if ready {
                return ctrd;
            }
            assert!(
                Instant::now() < deadline,
                "containerd did not answer on {} in 20 s:\n{}",
                ctrd.socket.display(),
                ctrd.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's PID.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The daemon's log so far.
    #[must_use]
    pub fn log(&self) -> String {
        fs::read_to_string(self.base.join("containerd.log")).unwrap_or_default()
    }

    /// `ctr --namespace <namespace>` in the daemon's mount namespace (and the caller's network
    /// namespace); add the subcommand and its arguments.
    #[must_use]
    pub fn ctr(&self, namespace: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--mount=/proc/{}/ns/mnt", self.pid))
            .args(["ctr", "--namespace", namespace])
            .env("CONTAINERD_ADDRESS", &self.socket)
            .stdin(Stdio::null());
        cmd
    }

    fn note_namespace(&self, namespace: &str) {
        self.namespaces
            .lock()
            .expect("namespaces")
            .insert(namespace.to_owned());
    }

    /// `ctr images import` the busybox image into containerd namespace `namespace`.
    pub fn import_image(&self, namespace: &str) {
        self.note_namespace(namespace);
        run(self
            .ctr(namespace)
            .args(["images", "import"])
            .arg(&self.image_tar));
    }

    /// Make the image: `/bin/busybox` and a link per applet, one layer, docker-archive layout
    /// (`manifest.json`, the config, the layer tarball).
    fn build_image(&self) {
        let dir = self.base.join("image");
        let bin = dir.join("rootfs/bin");
        fs::create_dir_all(&bin).expect("image rootfs");
        for empty in ["proc", "sys", "dev", "etc", "tmp"] {
            fs::create_dir_all(dir.join("rootfs").join(empty)).expect("rootfs dir");
        }
        fs::copy("/bin/busybox", bin.join("busybox")).expect("copy /bin/busybox");
        let list = run(Command::new("/bin/busybox").arg("--list"));
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            if applet != "busybox" {
                symlink("busybox", bin.join(applet)).expect("applet link");
            }
        }
        run(Command::new("tar")
            .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
            .arg(dir.join("rootfs"))
            .arg("-cf")
            .arg(dir.join("layer.tar"))
            .arg("."));
        let sum = run(Command::new("sha256sum").arg(dir.join("layer.tar")));
        let digest = String::from_utf8_lossy(&sum.stdout)
            .split_whitespace()
            .next()
            .expect("sha256sum output")
            .to_owned();
        let config = json!({
            "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
            "os": "linux",
            "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"]},
            "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{digest}")]},
        });
        fs::write(dir.join("config.json"), config.to_string()).expect("image config");
        let manifest =
            json!([{"Config": "config.json", "RepoTags": [IMAGE], "Layers": ["layer.tar"]}]);
        fs::write(dir.join("manifest.json"), manifest.to_string()).expect("manifest");
        run(Command::new("tar")
            .arg("-C")
            .arg(&dir)
            .arg("-cf")
            .arg(&self.image_tar)
            .args(["manifest.json", "config.json", "layer.tar"]));
    }

    /// Copy a CNI plugin binary into the directory `ctr` sees as `/opt/cni/bin`.
    pub fn install_plugin(&self, binary: &Path) {
        let name = binary.file_name().expect("plugin file name");
        fs::copy(binary, self.cni_bin.join(name))
            .unwrap_or_else(|e| panic!("install {}: {e}", binary.display()));
    }

    /// Install `binary` behind a wrapper of the same name that records each call's `CNI_*`
    /// environment and stdin (in [`PluginTrace::dir`]) and then execs it with that stdin.
    #[must_use]
    pub fn install_traced_plugin(&self, binary: &Path) -> PluginTrace {
        let name = binary.file_name().expect("plugin file name");
        let real = self.base.join("traced").join(name);
        let dir = self.base.join("trace");
        fs::create_dir_all(real.parent().expect("parent")).expect("traced dir");
        fs::create_dir_all(&dir).expect("trace dir");
        fs::copy(binary, &real).unwrap_or_else(|e| panic!("copy {}: {e}", binary.display()));
        let (d, r) = (dir.display(), real.display());
        let script = format!(
            "#!/bin/sh\n\
             f={d}/$(date +%s%N)-$$\n\
             env | grep '^CNI_' > \"$f.env\"\n\
             cat > \"$f.stdin\"\n\
             exec {r} < \"$f.stdin\"\n"
        );
        let wrapper = self.cni_bin.join(name);
        fs::write(&wrapper, script).expect("write wrapper");
        fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod wrapper");
        PluginTrace { dir }
    }

    /// Make `conflist` the only network configuration `ctr run --cni` sees.
    pub fn install_conflist(&self, conflist: &Value) {
        for entry in fs::read_dir(&self.net_d).expect("net.d") {
            fs::remove_file(entry.expect("entry").path()).expect("remove old conflist");
        }
        let name = conflist["name"].as_str().expect("conflist name");
        let tmp = self.net_d.join(format!(".{name}.tmp"));
        fs::write(&tmp, conflist.to_string()).expect("write conflist");
        fs::rename(&tmp, self.net_d.join(format!("10-{name}.conflist"))).expect("conflist");
    }

    /// The `ctr run` arguments shared by every way of running a container (before the image).
    fn run_args(&self, namespace: &str, id: &str) -> Vec<String> {
        vec![
            "run".into(),
            "--cni".into(),
            "--cgroup".into(),
            format!("/{}/{namespace}-{id}", self.cgroup),
        ]
    }

    /// `ctr run --cni --rm IMAGE id args…` (without `--cni` unless `network`) to completion;
    /// its output and wall-clock time.
    #[must_use]
    pub fn run_once(
        &self,
        namespace: &str,
        id: &str,
        network: bool,
        args: &[&str],
    ) -> (Output, Duration) {
        self.note_namespace(namespace);
        let mut cmd = self.ctr(namespace);
        let run_args = self.run_args(namespace, id);
        cmd.args(run_args.iter().filter(|a| network || *a != "--cni"))
            .arg("--rm")
            .arg(IMAGE)
            .arg(id)
            .args(args);
        let start = Instant::now();
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        (out, start.elapsed())
    }

    /// `ctr run --cni -d IMAGE id args…`: ADD happens, but no DEL ever will.
    pub fn run_detached(&self, namespace: &str, id: &str, args: &[&str]) {
        self.note_namespace(namespace);
        run(self
            .ctr(namespace)
            .args(self.run_args(namespace, id))
            .arg("-d")
            .arg(IMAGE)
            .arg(id)
            .args(args));
    }

    /// Kill and delete task and container `id` without `ctr run` in the foreground: no DEL.
    pub fn remove(&self, namespace: &str, id: &str) {
        run(self.ctr(namespace).args(["task", "rm", "--force", id]));
        run(self.ctr(namespace).args(["containers", "rm", id]));
    }

    /// `ctr run --cni --rm IMAGE id args…` in the foreground as a child process, returned once
    /// the task runs (ADD is done by then: `ctr` calls it between creating and starting the task).
    #[must_use]
    pub fn spawn(&self, namespace: &str, id: &str, args: &[&str]) -> Container<'_> {
        self.note_namespace(namespace);
        let log = self.base.join(format!("ctr-run-{namespace}-{id}.log"));
        let file = fs::File::create(&log).expect("ctr log");
        let child = self
            .ctr(namespace)
            .args(self.run_args(namespace, id))
            .arg("--rm")
            .arg(IMAGE)
            .arg(id)
            .args(args)
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run ctr: {e}"));
        let mut container = Container {
            ctrd: self,
            namespace: namespace.to_owned(),
            id: id.to_owned(),
            ctr: Some(child),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.task_status(namespace, id).as_deref() != Some("RUNNING") {
            if let Some(status) = container
                .ctr
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                container.ctr = None;
                panic!(
                    "ctr run {namespace}/{id} exited ({status}) before its task ran:\n{}",
                    container.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "task {namespace}/{id} not running after 30 s:\n{}",
                container.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        container
    }

    /// The status column of `ctr task ls` for `id` (`RUNNING`, `STOPPED`, …), if it has a task.
    #[must_use]
    pub fn task_status(&self, namespace: &str, id: &str) -> Option<String> {
        let out = run(self.ctr(namespace).args(["task", "ls"]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                (cols.first() == Some(&id)).then(|| cols.last().copied().unwrap_or("").to_owned())
            })
    }

    /// Ids of the tasks and of the containers in `namespace`.
    #[must_use]
    pub fn leftovers(&self, namespace: &str) -> (Vec<String>, Vec<String>) {
        let ids = |what: &str| {
            let out = run(self.ctr(namespace).args([what, "ls", "-q"]));
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        };
        (ids("tasks"), ids("containers"))
    }

    /// Path of libcni's cached result for an attachment (present between ADD and DEL).
    #[must_use]
    pub fn cached_result(&self, network: &str, container_id: &str, ifname: &str) -> PathBuf {
        self.cni_cache
            .join("results")
            .join(format!("{network}-{container_id}-{ifname}"))
    }

    /// Remove everything, stop the daemon, and panic if anything was left behind.
    pub fn shutdown(mut self) {
        let problems = self.cleanup();
        assert!(
            problems.is_empty(),
            "containerd cleanup: {}",
            problems.join("; ")
        );
    }

    /// Tasks and containers, the daemon (by PID), leftover shims, cgroups, directories; then
    /// compare the host with what it was. Returns what was wrong (and has been fixed).
    fn cleanup(&mut self) -> Vec<String> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let mut problems = Vec::new();
        let namespaces: Vec<String> = self
            .namespaces
            .lock()
            .map(|n| n.iter().cloned().collect())
            .unwrap_or_default();
        for ns in &namespaces {
            let quiet = |cmd: &mut Command| {
                let _ = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
            };
            let (tasks, containers) = self.try_leftovers(ns);
            for id in tasks {
                quiet(self.ctr(ns).args(["task", "rm", "--force", &id]));
            }
            for id in containers {
                quiet(self.ctr(ns).args(["containers", "rm", &id]));
            }
            let (tasks, containers) = self.try_leftovers(ns);
            if !tasks.is_empty() || !containers.is_empty() {
                problems.push(format!(
                    "namespace {ns}: tasks {tasks:?} and containers {containers:?} would not go"
                ));
            }
        }
        if let Some(mut child) = self.daemon.take() {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid).expect("pid"));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    problems.push("containerd ignored SIGTERM for 10 s; killed".into());
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        for pid in self.shims() {
            problems.push(format!("shim {pid} outlived its tasks; killed"));
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        problems.extend(remove_cgroups(&self.cgroup));
        if let Err(e) = fs::remove_dir_all(&self.base) {
            problems.push(format!("remove {}: {e}", self.base.display()));
        }
        let now = HostState::read();
        for ((path, before), (_, after)) in self.host.dirs.iter().zip(&now.dirs) {
            if before != after {
                problems.push(format!("host path {path} existed: {before}, now: {after}"));
            }
        }
        for ((key, before), (_, after)) in self.host.sysctls.iter().zip(&now.sysctls) {
            if before != after {
                problems.push(format!(
                    "host sysctl {key} was {before}, is {after}; restored"
                ));
                let _ = in_host_netns()
                    .args(["sysctl", "-q", "-w", &format!("{key}={before}")])
                    .status();
            }
        }
        problems
    }

    fn try_leftovers(&self, namespace: &str) -> (Vec<String>, Vec<String>) {
        let ids = |what: &str| {
            self.ctr(namespace)
                .args([what, "ls", "-q"])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        (ids("tasks"), ids("containers"))
    }

    /// PIDs of containerd shims started for this daemon (their `-address` is our socket).
    fn shims(&self) -> Vec<i32> {
        let socket = self.socket.display().to_string();
        let Ok(procs) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        procs
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                args.first()
                    .is_some_and(|a| String::from_utf8_lossy(a).contains("containerd-shim"))
                    && args
                        .windows(2)
                        .any(|w| w[0] == b"-address".as_slice() && w[1] == socket.as_bytes())
            })
            .collect()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.done {
            eprintln!("--- containerd log ---\n{}", self.log());
        }
        for problem in self.cleanup() {
            eprintln!("containerd cleanup: {problem}");
        }
    }
}

/// containerd's configuration: everything under `base`, the CRI plugin and the snapshotters
/// that cannot work here disabled.
fn config_toml(base: &Path, socket: &Path) -> String {
    let b = base.display();
    format!(
        "version = 2\n\
         root = \"{b}/root\"\n\
         state = \"{b}/state\"\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.snapshotter.v1.aufs\", \
         \"io.containerd.snapshotter.v1.btrfs\", \"io.containerd.snapshotter.v1.zfs\", \
         \"io.containerd.snapshotter.v1.devmapper\"]\n\
         [grpc]\n  address = \"{}\"\n\
         [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{b}/opt\"\n",
        socket.display()
    )
}

/// The shell script run by `unshare --mount`: bind every [`BOUND`] directory (overlaying the
/// nearest existing parent of a path the host lacks, so it can be made), then exec `"$@"`.
#[must_use]
pub fn mount_script(base: &Path) -> String {
    let mut script = String::from("set -e\n");
    let mut overlaid = Vec::new();
    for (n, (target, name)) in BOUND.iter().enumerate() {
        let target = Path::new(target);
        if !target.exists() {
            let parent = target.ancestors().find(|p| p.exists()).expect("/ exists");
            assert!(
                parent != Path::new("/"),
                "{} has no parent directory to overlay",
                target.display()
            );
            if !overlaid.contains(&parent) {
                overlaid.push(parent);
                let layer = base.join(format!("overlay{n}"));
                let (p, l) = (parent.display(), layer.display());
                let _ = writeln!(
                    script,
                    "mkdir -p {l}/upper {l}/work\n\
                     mount -t overlay overlay -o lowerdir={p},upperdir={l}/upper,workdir={l}/work {p}"
                );
            }
            let _ = writeln!(script, "mkdir -p {}", target.display());
        }
        let _ = writeln!(
            script,
            "mount --bind {} {}",
            base.join(name).display(),
            target.display()
        );
    }
    script.push_str("exec \"$@\"\n");
    script
}

/// Whether `path` resolves (symlinks followed, as far as it exists) to somewhere under `dir`
/// (`/var/run/x` is under `/run` on Debian).
fn fs_path_under(path: &Path, dir: &Path) -> bool {
    let existing = path.ancestors().find(|p| p.exists()).unwrap_or(path);
    fs::canonicalize(existing).is_ok_and(|real| real.starts_with(dir))
}

/// rmdir `/sys/fs/cgroup[/<controller>]/<group>` and the cgroups below it (deepest first).
fn remove_cgroups(group: &str) -> Vec<String> {
    let mut roots = vec![PathBuf::from("/sys/fs/cgroup")];
    if let Ok(entries) = fs::read_dir("/sys/fs/cgroup") {
        roots.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir()),
        );
    }
    let mut problems = Vec::new();
    for root in roots {
        let dir = root.join(group);
        if !dir.is_dir() {
            continue;
        }
        let mut dirs = vec![dir.clone()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(entries) = fs::read_dir(&dirs[i]) {
                dirs.extend(
                    entries
                        .filter_map(Result::ok)
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
            i += 1;
        }
        for d in dirs.iter().rev() {
            if let Err(e) = fs::remove_dir(d) {
                problems.push(format!("rmdir {}: {e}", d.display()));
            }
        }
    }
    problems
}

/// A container run by a foreground `ctr run --cni --rm` child process. `kill` (or drop) kills
/// its task; `ctr` then deletes the task (and with it the network namespace), calls CNI DEL
/// with an empty `CNI_NETNS`, removes the container and exits.
#[derive(Debug)]
pub struct Container<'a> {
    ctrd: &'a Containerd,
    /// containerd namespace.
    pub namespace: String,
    /// Container id inside it.
    pub id: String,
    ctr: Option<Child>,
    log: PathBuf,
}

impl Container<'_> {
    /// `CNI_CONTAINERID` as `ctr` passes it: `<namespace>-<id>`.
    #[must_use]
    pub fn cni_id(&self) -> String {
        format!("{}-{}", self.namespace, self.id)
    }

    /// What the foreground `ctr run` printed so far.
    #[must_use]
    pub fn output(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `ctr task exec` `args` inside the container; its output (whatever the exit status).
    #[must_use]
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut cmd = self.ctrd.ctr(&self.namespace);
        cmd.args(["task", "exec", "--exec-id", &unique("x"), &self.id])
            .args(args);
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
    }

    /// As [`Container::exec`], panicking unless it succeeds; its stdout.
    #[must_use]
    pub fn sh(&self, script: &str) -> String {
        let out = self.exec(&["sh", "-c", script]);
        assert!(
            out.status.success(),
            "{}: `{script}` failed ({}):\n{}{}",
            self.cni_id(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// eth0's global addresses, IPv4 first (busybox `ip -o addr`).
    #[must_use]
    pub fn addresses(&self) -> Vec<IpAddr> {
        let text = self.sh("ip -o addr show dev eth0");
        let mut addrs: Vec<IpAddr> = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                words.find(|w| *w == "inet" || *w == "inet6")?;
                let ip: IpAddr = words.next()?.split('/').next()?.parse().ok()?;
                (!matches!(ip, IpAddr::V6(v6) if v6.segments()[0] == 0xfe80)).then_some(ip)
            })
            .collect();
        addrs.sort_by_key(IpAddr::is_ipv6);
        addrs
    }

    /// The IPv4 and IPv6 default gateways (`ip route`, `ip -6 route`).
    #[must_use]
    pub fn gateways(&self) -> (Ipv4Addr, Ipv6Addr) {
        let via = |script: &str| {
            let text = self.sh(script);
            text.lines()
                .filter(|l| l.starts_with("default via "))
                .find_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
                .unwrap_or_else(|| panic!("{}: no default route in:\n{text}", self.cni_id()))
        };
        let v4 = via("ip route").parse().expect("IPv4 gateway");
        let v6 = via("ip -6 route").parse().expect("IPv6 gateway");
        (v4, v6)
    }

    /// Kill the task and wait until the foreground `ctr run` has exited (after its DEL).
    pub fn kill(&mut self) -> ExitStatus {
        let mut child = self.ctr.take().expect("the container is running");
        let _ = self
            .ctrd
            .ctr(&self.namespace)
            .args(["task", "kill", "--signal", "SIGKILL", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait for ctr") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "ctr run {} did not exit within 30 s of its task's SIGKILL:\n{}",
                    self.cni_id(),
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        if self.ctr.is_some() {
            if std::thread::panicking() {
                eprintln!("--- ctr run {} ---\n{}", self.cni_id(), self.output());
                // No second panic from kill's timeout while unwinding.
                if let Some(mut child) = self.ctr.take() {
                    let _ = self
                        .ctrd
                        .ctr(&self.namespace)
                        .args(["task", "rm", "--force", &self.id])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status();
                    let _ = child.kill();
                    let _ = child.wait();
                }
            } else {
                let _ = self.kill();
            }
        }
    }
}

/// The calls a traced plugin received (see [`Containerd::install_traced_plugin`]).
#[derive(Debug)]
pub struct PluginTrace {
    /// One `<time>-<pid>.env` and `.stdin` per call.
    pub dir: PathBuf,
}

/// One recorded plugin call.
#[derive(Debug, Clone)]
pub struct PluginCall {
    /// Every `CNI_*` variable (set ones, also when empty).
    pub env: BTreeMap<String, String>,
    /// The network configuration on stdin.
    pub stdin: Value,
}

impl PluginCall {
    /// The value of `CNI_<name>`; `None` if it was not set at all.
    #[must_use]
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env.get(&format!("CNI_{name}")).map(String::as_str)
    }
}

impl PluginTrace {
    /// Every call so far, oldest first.
    #[must_use]
    pub fn calls(&self) -> Vec<PluginCall> {
        let mut stems: Vec<PathBuf> = fs::read_dir(&self.dir)
            .expect("trace dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "env"))
            .map(|p| p.with_extension(""))
            .collect();
        stems.sort();
        stems
            .iter()
            .map(|stem| {
                let env = fs::read_to_string(stem.with_extension("env")).expect("trace env");
                let stdin = fs::read(stem.with_extension("stdin")).expect("trace stdin");
                PluginCall {
                    env: env
                        .lines()
                        .filter_map(|l| l.split_once('='))
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .collect(),
                    stdin: serde_json::from_slice(&stdin).unwrap_or(Value::Null),
                }
            })
            .collect()
    }

    /// The calls of `command` for container `container_id`, oldest first.
    #[must_use]
    pub fn calls_for(&self, command: &str, container_id: &str) -> Vec<PluginCall> {
        self.calls()
            .into_iter()
            .filter(|c| {
                c.var("COMMAND") == Some(command) && c.var("CONTAINERID") == Some(container_id)
            })
            .collect()
    }
}

/// Packets per counter reason, read from the pinned counters map under `pin_dir`.
#[must_use]
pub fn pinned_counters(pin_dir: &Path) -> BTreeMap<&'static str, u64> {
    let counters: PerCpuArray<MapData, Counter> =
        PerCpuArray::try_from(pinned(pin_dir, maps::COUNTERS))
            .unwrap_or_else(|e| panic!("{}: {e}", maps::COUNTERS));
    (0..reason::COUNT)
        .map(|why| {
            let per_cpu = counters
                .get(&why, 0)
                .unwrap_or_else(|e| panic!("read counter {why}: {e}"));
            (reason::name(why), per_cpu.iter().map(|c| c.packets).sum())
        })
        .collect()
}

/// Every endpoint (IP → host veth ifindex) in the pinned endpoints map under `pin_dir`.
#[must_use]
pub fn pinned_endpoints(pin_dir: &Path) -> BTreeMap<IpAddr, u32> {
    let endpoints: BpfHashMap<MapData, EndpointKey, EndpointInfo> =
        BpfHashMap::try_from(pinned(pin_dir, maps::ENDPOINTS))
            .unwrap_or_else(|e| panic!("{}: {e}", maps::ENDPOINTS));
    endpoints
        .iter()
        .map(|entry| {
            let (key, info) = entry.unwrap_or_else(|e| panic!("iterate endpoints: {e}"));
            let ip = match key.family {
                FAMILY_IPV4 => IpAddr::from([key.ip[0], key.ip[1], key.ip[2], key.ip[3]]),
                FAMILY_IPV6 => IpAddr::from(key.ip),
                other => panic!("endpoint key with family {other}"),
            };
            (ip, info.ifindex)
        })
        .collect()
}

/// The ifindexes in the pinned interfaces map under `pin_dir`.
#[must_use]
pub fn pinned_ifaces(pin_dir: &Path) -> Vec<u32> {
    let ifaces: BpfHashMap<MapData, u32, agent_common::endpoint::IfaceInfo> =
        BpfHashMap::try_from(pinned(pin_dir, maps::IFACES))
            .unwrap_or_else(|e| panic!("{}: {e}", maps::IFACES));
    ifaces
        .keys()
        .map(|k| k.unwrap_or_else(|e| panic!("iterate ifaces: {e}")))
        .collect()
}

fn pinned(pin_dir: &Path, name: &str) -> Map {
    let path = pin_dir.join(name);
    let data = MapData::from_pin(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Map::from_map_data(data).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

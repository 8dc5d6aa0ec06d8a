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
//!
//! [`Containerd::start_with`] also replaces a manifest's hostPath directories in that namespace
//! (`/sys/fs/bpf` by a bpffs of its own), so weft's own image can run there as its DaemonSet
//! says (`podspec` turns a pod template's container into `ctr run` flags).
//!
//! This file owns the [`Containerd`] guard itself: the tool check, start-up and the `ctr`
//! command every other part builds on. The mount namespace and configuration are in `mounts`,
//! the images in `image`, container runs in `run`, `container` and `podspec`, CNI plugin and
//! network configuration installation in `plugin`, teardown and the host check in `cleanup`,
//! and the readers of the agent's pinned maps in `pinned`.

mod cleanup;
mod container;
mod image;
mod mounts;
mod pinned;
mod plugin;
pub mod podspec;
mod run;

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use self::{
    cleanup::HostState,
    mounts::{bound_paths, config_toml, fs_path_under},
};
pub use self::{
    container::Container,
    image::IMAGE,
    mounts::mount_script,
    pinned::{pinned_counters, pinned_endpoints, pinned_ifaces},
    plugin::{PluginCall, PluginTrace},
};
use crate::{require_root, unique};

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
    /// Host paths replaced inside the daemon's mount namespace, and their directories' names.
    bound: Vec<(String, String)>,
    host: HostState,
    done: bool,
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
        Self::start_with(&[])
    }

    /// As [`Containerd::start`], with each of `host_paths` (a manifest's hostPath volumes)
    /// also replaced by a temporary directory in the daemon's mount namespace (`/sys/fs/bpf`
    /// by a bpffs of its own), so containers can mount them as on a node while the host's
    /// stay untouched. [`Containerd::host_path`] is where each is seen from outside.
    #[must_use]
    pub fn start_with(host_paths: &[&str]) -> Self {
        preflight();
        let bound = bound_paths(host_paths);
        let host = HostState::read(&bound);
        let base = std::env::temp_dir().join(unique("weft-containerd-"));
        let text = base.display().to_string();
        // Under an overlaid directory the snapshots' overlayfs would get an overlayfs upper.
        assert!(
            !text.contains([',', ':', '\''])
                && bound.iter().all(|(target, _)| {
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
        for (_, name) in &bound {
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
            bound,
            host,
            done: false,
            base,
        };
        ctrd.build_image();
        let log = fs::File::create(ctrd.base.join("containerd.log")).expect("containerd log");
        // `unshare` (no --fork) and `sh` both exec: the child's PID is containerd's.
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(mount_script(&ctrd.base, &ctrd.bound))
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

    /// `host_path` (one given to [`Containerd::start_with`]) as seen from outside the daemon's
    /// mount namespace, through its root (`/proc/<pid>/root/…`): bpffs pins included.
    #[must_use]
    pub fn host_path(&self, host_path: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{host_path}", self.pid))
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

    /// Remember `namespace` so that cleanup empties it.
    fn note_namespace(&self, namespace: &str) {
        self.namespaces
            .lock()
            .expect("namespaces")
            .insert(namespace.to_owned());
    }
}

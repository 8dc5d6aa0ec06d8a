//! Teardown of a [`Containerd`] and the check that the host is as it was: the host state
//! recorded before start-up (bound paths, forwarding sysctls), removal of tasks, containers,
//! the daemon, leftover shims, cgroups and the base directory, and the comparison afterwards
//! (restoring a sysctl that changed). It ends only processes and cgroups of this daemon.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::Containerd;
use crate::run;

/// Forwarding sysctls of the host's network namespace, checked (and restored) on shutdown.
const SYSCTLS: [&str; 2] = ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"];

/// What the host looked like before the daemon started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostState {
    /// Each bound path and whether it existed.
    dirs: Vec<(String, bool)>,
    /// Each of [`SYSCTLS`] and its value in the host's network namespace.
    sysctls: Vec<(&'static str, String)>,
}

impl HostState {
    /// Record the host as it is now: whether each bound path exists, and the sysctls.
    pub(super) fn read(bound: &[(String, String)]) -> Self {
        Self {
            dirs: bound
                .iter()
                .map(|(path, _)| (path.clone(), Path::new(path).exists()))
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

impl Containerd {
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
        let now = HostState::read(&self.bound);
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

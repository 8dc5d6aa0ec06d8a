//! The real `weft-operator` binary as tests run it: against the API emulator through a
//! kubeconfig (so its own kube-rs client is what is exercised), with its log in a file the
//! tests read, listeners on free ports, and SIGTERM / SIGKILL on demand.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{agent::http_get, bin_path, unique};

/// A `weft-operator` process and its log (removed on drop, after killing it).
#[derive(Debug)]
pub struct Operator {
    /// Flags after the ones the harness sets (`--kubeconfig`, listener addresses).
    pub flags: Vec<String>,
    /// Extra environment (`POD_NAME`, …).
    pub env: Vec<(String, String)>,
    /// The program and the words before the operator's own arguments: the debug build by
    /// default; another build under a wrapper such as `setpriv` when set.
    pub command: Vec<String>,
    kubeconfig: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Operator {
    /// An operator for the cluster behind `kubeconfig` with `flags`; not started.
    #[must_use]
    pub fn new(kubeconfig: &Path, flags: &[&str]) -> Self {
        Self {
            flags: flags.iter().map(|f| (*f).to_owned()).collect(),
            env: Vec::new(),
            command: vec![bin_path("weft-operator").display().to_string()],
            kubeconfig: kubeconfig.to_path_buf(),
            log: std::env::temp_dir().join(unique("weft-operator-log-")),
            child: None,
        }
    }

    /// Start it (it runs in the calling thread's network namespace).
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "operator already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("operator log");
        let (program, words) = self.command.split_first().expect("an operator command");
        let child = Command::new(program)
            .args(words)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args([
                "--operator-api-serve-addr",
                "127.0.0.1:0",
                "--operator-prometheus-serve-addr",
                "127.0.0.1:0",
                "--enable-metrics",
            ])
            .args(&self.flags)
            .env("RUST_LOG", "info")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn weft-operator");
        self.child = Some(child);
    }

    /// The log so far (kept across restarts).
    #[must_use]
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the log has a line containing `message`; panics with the log otherwise.
    pub fn wait_log(&mut self, message: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().contains(message) {
                return;
            }
            if let Some(code) = self.exited() {
                panic!(
                    "weft-operator exited ({code}) before logging {message:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "weft-operator did not log {message:?} in {timeout:?}:\n{}",
            self.log()
        );
    }

    /// The exit code if the process has exited (`-1` for a signal); `None` while it runs.
    pub fn exited(&mut self) -> Option<i32> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        Some(status.code().unwrap_or(-1))
    }

    /// Wait for the process to exit on its own; its code, or `None` at the deadline.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(code) = self.exited() {
                return Some(code);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// The address the last start logged for the listener of `flag`.
    #[must_use]
    pub fn addr(&self, flag: &str) -> String {
        self.log()
            .lines()
            .rev()
            .find(|l| l.contains("serving HTTP") && l.contains(flag))
            .and_then(|l| l.split("addr=").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no listener for {flag} in the log:\n{}", self.log()))
            .to_owned()
    }

    /// GET `/metrics`: the body.
    #[must_use]
    pub fn metrics(&self) -> String {
        let (code, body) = http_get(&self.addr("--operator-prometheus-serve-addr"), "/metrics");
        assert_eq!(code, 200, "{body}");
        body
    }

    /// The value of the metric line that starts with `series` (name and labels).
    #[must_use]
    pub fn metric(&self, series: &str) -> Option<f64> {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
    }

    /// GET `/healthz` on the API address: the status code.
    #[must_use]
    pub fn healthz(&self) -> u16 {
        http_get(&self.addr("--operator-api-serve-addr"), "/healthz").0
    }

    /// The process id while it runs.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait; the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
            nix::sys::signal::Signal::SIGTERM,
        );
        child.wait().ok().map(|s| s.code().unwrap_or(-1))
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- weft-operator log ---\n{}", self.log());
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

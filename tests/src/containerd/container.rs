//! A container with a foreground `ctr run --cni --rm` as its handle: started by
//! [`Containerd::spawn`], inspected with `ctr task exec` (addresses, gateways, any command) and
//! stopped by killing its task, after which `ctr` itself sends CNI DEL and removes it. It never
//! removes a container it did not start.

use std::{
    fs,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::PathBuf,
    process::{Child, ExitStatus, Output, Stdio},
    time::{Duration, Instant},
};

use super::{Containerd, IMAGE};
use crate::unique;

impl Containerd {
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

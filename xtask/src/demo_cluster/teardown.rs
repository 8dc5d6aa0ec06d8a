//! What `cargo xtask demo-cluster` has created, and how it goes away again: the record of
//! namespaces, background programs (by pid, also written to `<dir>/<name>.pid` so that a later
//! run can remove what a `--keep` run left), pods and directories; the cleanup steps in order,
//! run or (with `--keep`) printed. Nothing here creates anything.

use std::{
    fs,
    path::Path,
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

use super::{
    DIR, NODES, PODS, Pod,
    aws::VPC_NETNS,
    path,
    pods::{cni_line, cni_output},
};
use crate::run;

/// A program the demo runs in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Daemon {
    /// Its name in `/proc/<pid>/stat` (and of its pid and log files).
    pub comm: &'static str,
    /// The file name under the demo directory for its pid and log (`<file>.pid`, `<file>.log`).
    pub file: &'static str,
    /// Its process id.
    pub pid: u32,
}

impl Daemon {
    /// Whether it still runs (a pid reused by another program does not count). Until it has
    /// exec'd, the process is still `nsenter`.
    pub fn running(&self) -> bool {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let state = [self.comm, "nsenter"]
            .iter()
            .find_map(|comm| stat.split_once(&format!(" ({comm}) ")))
            .map(|(_, rest)| rest);
        state.is_some_and(|state| !state.starts_with('Z'))
    }
}

/// What exists so far, so that cleanup undoes exactly that.
#[derive(Debug, Default)]
pub struct Created {
    /// The demo directory.
    pub dir: bool,
    /// Node namespaces (by index into `NODES`).
    pub nodes: Vec<usize>,
    /// The VPC's fabric namespace (demo-aws).
    pub vpc: bool,
    /// Pin directories the agents were given (created by them).
    pub pin_dirs: Vec<usize>,
    /// Background programs, in start order.
    pub daemons: Vec<Daemon>,
    /// Pod namespaces made.
    pub pod_netns: Vec<&'static Pod>,
    /// Pods ADDed through weft-cni.
    pub added: Vec<&'static Pod>,
}

/// One cleanup action.
#[derive(Debug)]
enum Step {
    CniDel(&'static Pod),
    NetnsDel(String),
    Stop(Daemon),
    Remove(String),
}

/// Cleanup for `created`: DEL while the node's agent runs, the pod namespaces, the programs
/// (agents, operator, API server: last started, first stopped), the node namespaces (the veth
/// goes with them), the pin directories, the demo directory.
fn steps(created: &Created) -> Vec<Step> {
    let agent_runs = |node: &str| {
        created
            .daemons
            .iter()
            .any(|d| d.file == format!("agent-{node}") && d.running())
    };
    let mut steps: Vec<Step> = created
        .added
        .iter()
        .rev()
        .filter(|pod| agent_runs(pod.node))
        .map(|&pod| Step::CniDel(pod))
        .collect();
    steps.extend(
        created
            .pod_netns
            .iter()
            .rev()
            .filter(|pod| Path::new(&pod.netns_path()).exists())
            .map(|pod| Step::NetnsDel(pod.netns())),
    );
    steps.extend(
        created
            .daemons
            .iter()
            .rev()
            .filter(|d| d.running())
            .map(|&d| Step::Stop(d)),
    );
    steps.extend(
        created
            .nodes
            .iter()
            .rev()
            .map(|&i| NODES[i].netns)
            .filter(|ns| Path::new("/var/run/netns").join(ns).exists())
            .map(|ns| Step::NetnsDel(ns.to_owned())),
    );
    steps.extend(
        (created.vpc && Path::new("/var/run/netns").join(VPC_NETNS).exists())
            .then(|| Step::NetnsDel(VPC_NETNS.to_owned())),
    );
    steps.extend(
        created
            .pin_dirs
            .iter()
            .map(|&i| NODES[i].pin_dir())
            .filter(|dir| Path::new(dir).exists())
            .map(Step::Remove),
    );
    steps.extend(created.dir.then(|| Step::Remove(DIR.to_owned())));
    steps
}

fn command(step: &Step) -> Command {
    let mut cmd;
    match step {
        Step::CniDel(_) => unreachable!("DEL is run through cni_output"),
        Step::NetnsDel(ns) => {
            cmd = Command::new("ip");
            cmd.args(["netns", "del", ns]);
        }
        Step::Stop(daemon) => {
            cmd = Command::new("kill");
            cmd.arg(daemon.pid.to_string());
        }
        Step::Remove(path) => {
            cmd = Command::new("rm");
            cmd.args(["-r", path]);
        }
    }
    cmd
}

/// The cleanup as shell lines, for `--keep`.
pub fn print_steps(created: &Created) {
    for step in steps(created) {
        let line = match &step {
            Step::CniDel(pod) => cni_line("DEL", pod).replace('\n', "\n  "),
            Step::Stop(daemon) => format!("{}    # {}", run::display(&command(&step)), daemon.comm),
            _ => run::display(&command(&step)),
        };
        println!("  {line}");
    }
}

/// Wait for `daemon` to exit after SIGTERM (10 s, then SIGKILL and an error).
fn stop(daemon: Daemon) -> Result<()> {
    run::echo_run(&mut command(&Step::Stop(daemon)))?;
    let start = Instant::now();
    while daemon.running() {
        if start.elapsed() > Duration::from_secs(10) {
            run::echo_run(Command::new("kill").args(["-KILL", &daemon.pid.to_string()]))?;
            bail!("{} ignored SIGTERM for 10 s; killed", daemon.comm);
        }
        sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Runs every cleanup step even if one fails; returns the first failure.
pub fn cleanup(created: &Created) -> Result<()> {
    let mut first_err = None;
    for step in steps(created) {
        let result = match step {
            Step::CniDel(pod) => cni_output("DEL", pod).map(drop),
            Step::Stop(daemon) => stop(daemon),
            _ => run::echo_run(&mut command(&step)),
        };
        if let Err(err) = result {
            eprintln!("warning: {err:#}");
            first_err.get_or_insert(err);
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// The background programs a run records, as (comm, file).
pub const DAEMONS: [(&str, &str); 6] = [
    ("kube-emulator", "kube-emulator"),
    ("arm-emulator", "arm-emulator"),
    ("ec2-emulator", "ec2-emulator"),
    ("weft-operator", "operator"),
    ("weft-agent", "agent-node-a"),
    ("weft-agent", "agent-node-b"),
];

/// Removes what an earlier `--keep` (or interrupted) run left: its programs by their pid
/// files, the namespaces, the pin directories and the directory. Pods are not DELeted one by
/// one: their namespaces, the node namespaces and the pins go as a whole.
pub fn remove_stale() -> Result<()> {
    let nodes: Vec<usize> = (0..NODES.len())
        .filter(|&i| Path::new("/var/run/netns").join(NODES[i].netns).exists())
        .collect();
    let pod_netns: Vec<&'static Pod> = PODS
        .iter()
        .filter(|p| Path::new(&p.netns_path()).exists())
        .collect();
    let pin_dirs: Vec<usize> = (0..NODES.len())
        .filter(|&i| Path::new(&NODES[i].pin_dir()).exists())
        .collect();
    let dir = Path::new(DIR).exists();
    let vpc = Path::new("/var/run/netns").join(VPC_NETNS).exists();
    if nodes.is_empty() && pod_netns.is_empty() && pin_dirs.is_empty() && !dir && !vpc {
        return Ok(());
    }
    super::section("remove the leftovers of an earlier demo-cluster");
    let daemons = DAEMONS
        .iter()
        .filter_map(|&(comm, file)| {
            let pid = fs::read_to_string(path(&format!("{file}.pid"))).ok()?;
            Some(Daemon {
                comm,
                file,
                pid: pid.trim().parse().ok()?,
            })
        })
        .collect();
    cleanup(&Created {
        dir,
        nodes,
        vpc,
        pin_dirs,
        daemons,
        pod_netns,
        added: Vec::new(),
    })
}

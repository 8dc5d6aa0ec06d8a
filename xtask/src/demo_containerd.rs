//! `cargo xtask demo-containerd`: weft under a container runtime nobody here wrote. A private
//! containerd (Debian's 1.6) runs busybox containers with `ctr run --cni`, which reaches
//! `weft-cni` through go-cni and libcni as Kubernetes' CRI does, while `weft-agent` serves the
//! node from a copy of `examples/store/`. The containers show their addresses and routes, ping
//! each other, and are stopped; the endpoints are gone afterwards because containerd's DEL
//! (sent after the sandbox is gone, with an empty `CNI_NETNS`) undid them. A small wrapper
//! logs what containerd passed to the plugin.
//!
//! Nothing of the host is changed: containerd and `ctr` share a private mount namespace in
//! which directories under the demo's own directory are bind-mounted over `/etc/cni/net.d`,
//! `/opt/cni/bin`, `/var/lib/cni` and `/run/containerd` (a path the host lacks is made in an
//! overlay of its parent, in that namespace only); the node is a network namespace of its own.
//! Every command is echoed (`+ cmd`) before it runs; everything is torn down at the end, also
//! when a step fails.
//!
//! This file owns the demo's flow, the agent and the teardown; containerd itself (its mount
//! namespace, the image, `ctr`) is in `containerd`.

mod containerd;

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

use self::containerd::{BOUND, address, build_image, ctr, exec, spawn_container, start_containerd};
use crate::{run, setup, target_dir, workspace_root};

/// Everything the demo writes lives here: not under `/run`, `/etc`, `/opt` or `/var/lib`,
/// which may get an overlay in containerd's mount namespace (snapshots need a real upper fs).
const DIR: &str = "/var/tmp/weft-demo-containerd";
/// The agent's bpffs directory.
const PIN_DIR: &str = "/sys/fs/bpf/weft-demo-containerd";
/// The node's network namespace (`ip netns`).
const NODE: &str = "weft-demo-node";
/// Parent cgroup of the containers.
const CGROUP: &str = "weft-demo-containerd";
/// The containers: (containerd namespace = pod namespace, container id = pod name).
const PODS: [(&str, &str); 3] = [("default", "web"), ("default", "db"), ("mars", "rover")];

/// What exists so far, so that cleanup undoes exactly that.
#[derive(Debug, Default)]
struct Created {
    dir: bool,
    containerd: Option<Child>,
    node: bool,
    agent: Option<Child>,
    pin_dir: bool,
    /// Foreground `ctr run` processes: (namespace, id, process).
    containers: Vec<(&'static str, &'static str, Child)>,
}

/// Runs setup, builds the release binaries, runs the demo and cleans up.
pub fn demo_containerd() -> Result<()> {
    run::require_root("the demo runs containerd, loads eBPF and creates namespaces")?;
    setup::setup()?;
    section("build the release agent and CNI plugin");
    let build = ["build", "--release", "-p", "weft-agent", "--bins"];
    run::echo_run(
        Command::new("cargo")
            .args(build)
            .current_dir(workspace_root()),
    )?;
    ensure!(
        !Path::new(DIR).exists() && !Path::new(&netns_path()).exists(),
        "{DIR} or network namespace {NODE} exists: an earlier demo is running or was \
         interrupted; stop its containerd and weft-agent, then `ip netns del {NODE}; rm -r {DIR}`"
    );
    let mut created = Created::default();
    let result = run_demo(&mut created);
    if result.is_err() {
        for log in ["containerd.log", "agent.log"] {
            let text = fs::read_to_string(path(log)).unwrap_or_default();
            eprintln!("\n--- {DIR}/{log} ---\n{text}--- end of {log} ---");
        }
    }
    section("clean up");
    let cleanup = cleanup(&mut created);
    if let (Err(_), Err(err)) = (&result, &cleanup) {
        eprintln!("warning: cleanup after the failure also failed: {err:#}");
    }
    result.and(cleanup)
}

fn run_demo(created: &mut Created) -> Result<()> {
    created.dir = true;
    for (_, name) in BOUND {
        fs::create_dir_all(path(name)).with_context(|| format!("creating {DIR}/{name}"))?;
    }
    build_image()?;
    section("the node: a network namespace where ctr (and so the CNI plugin) and the agent run");
    run::echo_run(Command::new("ip").args(["netns", "add", NODE]))?;
    created.node = true;
    start_containerd(created)?;
    for ns in ["default", "mars"] {
        run::echo_run(ctr(ns).args(["images", "import"]).arg(path("image.tar")))?;
    }

    section("weft-agent serves a copy of examples/store on the node");
    let store = path("store");
    run::echo_run(
        Command::new("cp")
            .arg("-r")
            .arg(workspace_root().join("examples/store"))
            .arg(&store),
    )?;
    created.pin_dir = !Path::new(PIN_DIR).exists();
    start_agent(created, &store)?;

    section("install weft-cni (behind a wrapper that logs each call) and its network config");
    let real = target_dir().join("release/weft-cni");
    let wrapper = path("cni-bin/weft-cni");
    let log = path("cni-calls.log");
    let script = format!(
        "#!/bin/sh\n\
         echo \"$CNI_COMMAND CNI_CONTAINERID=$CNI_CONTAINERID CNI_NETNS=$CNI_NETNS \
         CNI_IFNAME=$CNI_IFNAME CNI_ARGS='$CNI_ARGS'\" >> {}\n\
         exec {} \"$@\"\n",
        log.display(),
        real.display()
    );
    fs::write(&wrapper, &script)?;
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755))?;
    println!(
        "{} (seen as /opt/cni/bin/weft-cni):\n{script}",
        wrapper.display()
    );
    let conflist = json!({
        "cniVersion": "1.0.0", "name": "weft",
        "plugins": [{"type": "weft-cni", "agent-socket": path("weft.sock"),
                     "delete-queue-dir": path("delete-queue")}],
    });
    let conf = path("net.d/10-weft.conflist");
    fs::write(&conf, serde_json::to_string_pretty(&conflist)?)?;
    println!(
        "{} (seen as /etc/cni/net.d/10-weft.conflist):\n{}",
        conf.display(),
        serde_json::to_string_pretty(&conflist)?
    );

    section("run the pods: `ctr -n <pod namespace> run --cni … <pod name>` is Pod <ns>/<name>");
    println!("(ctr passes no CNI_ARGS; weft maps CNI_CONTAINERID `<namespace>-<id>` to the Pod)");
    for (ns, id) in PODS {
        spawn_container(created, ns, id)?;
    }
    for (ns, id) in PODS {
        exec(ns, id, &["ip", "-o", "-4", "addr", "show", "dev", "eth0"])?;
        exec(ns, id, &["ip", "route"])?;
    }
    println!("\nwhy rover got pool mars:");
    run::echo_run(
        Command::new(target_dir().join("release/weft-agent"))
            .args(["ipam", "explain", "mars/rover", "--socket"])
            .arg(path("weft.sock")),
    )?;

    section("the pods ping each other through the datapath, also across pools");
    let db = address("default", "db")?;
    let web = address("default", "web")?;
    exec("default", "web", &["ping", "-c", "2", &db])?;
    exec("mars", "rover", &["ping", "-c", "2", &web])?;
    run::echo_run(weft_agent().args(["bpf", "counters"]))?;
    run::echo_run(weft_agent().args(["bpf", "endpoint", "list"]))?;

    section("stop the pods: ctr deletes the task, then sends DEL with an empty CNI_NETNS");
    for (ns, id, mut child) in std::mem::take(&mut created.containers) {
        run::echo_run(ctr(ns).args(["task", "kill", "--signal", "SIGKILL", id]))?;
        let status = child.wait()?;
        println!("ctr run {ns}/{id} exited ({status}) after its DEL");
    }
    run::echo_run(weft_agent().args(["bpf", "endpoint", "list"]))?;
    println!("\nwhat containerd passed to weft-cni ({}):", log.display());
    print!("{}", fs::read_to_string(&log).unwrap_or_default());
    Ok(())
}

fn section(title: &str) {
    println!("\n==> {title}");
}

fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

fn netns_path() -> String {
    format!("/var/run/netns/{NODE}")
}

/// `weft-agent --pin-dir …` in the node's network namespace.
fn weft_agent() -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={}", netns_path()))
        .arg(target_dir().join("release/weft-agent"))
        .args(["--pin-dir", PIN_DIR]);
    cmd
}

fn start_agent(created: &mut Created, store: &Path) -> Result<()> {
    let mut agent = weft_agent();
    agent
        .args(["run", "--node-name", "node1", "--store"])
        .arg(store)
        .arg("--state-dir")
        .arg(path("state-agent"))
        .arg("--socket")
        .arg(path("weft.sock"))
        .arg("--delete-queue-dir")
        .arg(path("delete-queue"))
        .args(["--ipam", "multi-pool", "--enable-ipv6", "true"])
        .args(["--ipam-multi-pool-pre-allocation", "default=8,mars=4"]);
    println!("+ {} 2>{DIR}/agent.log &", run::display(&agent));
    let log = fs::File::create(path("agent.log"))?;
    let child = agent.stdin(Stdio::null()).stderr(log).spawn()?;
    created.agent = Some(child);
    wait(20, "the agent's socket", || {
        let agent = created.agent.as_mut().context("agent")?;
        ensure!(
            agent.try_wait()?.is_none(),
            "weft-agent exited during start-up"
        );
        Ok(std::os::unix::net::UnixStream::connect(path("weft.sock")).is_ok())
    })?;
    Ok(())
}

/// Polls `done` every 50 ms until it holds; fails after `secs` seconds or when `done` fails.
fn wait(secs: u64, what: &str, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
    let start = Instant::now();
    while !done()? {
        ensure!(
            start.elapsed().as_secs() < secs,
            "gave up after {secs} s waiting for {what}"
        );
        sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Stop by PID with SIGTERM and wait (SIGKILL after 10 s).
fn stop(name: &str, child: &mut Child) -> Result<()> {
    run::echo_run(Command::new("kill").arg(child.id().to_string()))?;
    let start = Instant::now();
    while child.try_wait()?.is_none() {
        if start.elapsed() > Duration::from_secs(10) {
            child.kill()?;
            child.wait()?;
            bail!("{name} ignored SIGTERM for 10 s; killed");
        }
        sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Undo `created` in reverse order; every step runs even if one fails, the first error wins.
fn cleanup(created: &mut Created) -> Result<()> {
    let mut errors = Vec::new();
    let mut note = |result: Result<()>| {
        if let Err(err) = result {
            eprintln!("warning: {err:#}");
            errors.push(err);
        }
    };
    for (ns, id, mut child) in std::mem::take(&mut created.containers) {
        if matches!(child.try_wait(), Ok(None)) {
            note(run::echo_run(ctr(ns).args(["task", "rm", "--force", id])));
        }
        note(child.wait().map(drop).map_err(Into::into));
    }
    if let Some(mut agent) = created.agent.take() {
        note(stop("weft-agent", &mut agent));
    }
    if let Some(mut containerd) = created.containerd.take() {
        note(stop("containerd", &mut containerd));
    }
    if std::mem::take(&mut created.node) {
        note(run::echo_run(
            Command::new("ip").args(["netns", "del", NODE]),
        ));
    }
    if std::mem::take(&mut created.pin_dir) && Path::new(PIN_DIR).exists() {
        note(run::echo_run(Command::new("rm").args(["-r", PIN_DIR])));
    }
    let cgroups = run::output(Command::new("find").args([
        "/sys/fs/cgroup",
        "-maxdepth",
        "3",
        "-type",
        "d",
        "-name",
        CGROUP,
    ]))
    .unwrap_or_default();
    for dir in cgroups.lines() {
        note(run::echo_run(Command::new("rmdir").arg(dir)));
    }
    if std::mem::take(&mut created.dir) {
        note(run::echo_run(Command::new("rm").args(["-r", DIR])));
    }
    errors.into_iter().next().map_or(Ok(()), Err)
}

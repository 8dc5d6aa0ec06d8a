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

use std::{
    fmt::Write as _,
    fs,
    os::unix::fs::{PermissionsExt as _, symlink},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

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
/// The image `ctr` runs.
const IMAGE: &str = "weft.test/busybox:1";
/// (host path, directory under [`DIR`]) bound over it in containerd's mount namespace.
const BOUND: [(&str, &str); 4] = [
    ("/etc/cni/net.d", "net.d"),
    ("/opt/cni/bin", "cni-bin"),
    ("/var/lib/cni", "cni-cache"),
    ("/run/containerd", "run"),
];
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

/// Build the image: busybox and its applet links in one layer, docker-archive layout.
fn build_image() -> Result<()> {
    section("build a one-layer busybox image (there is no registry)");
    let image = path("image");
    let bin = image.join("rootfs/bin");
    fs::create_dir_all(&bin)?;
    run::echo_run(Command::new("cp").arg("/bin/busybox").arg(&bin))?;
    let applets = run::output(Command::new("/bin/busybox").arg("--list"))?;
    let applets: Vec<&str> = applets.lines().filter(|a| *a != "busybox").collect();
    println!(
        "+ ln -s busybox {}/<applet>   # for each of {} applets",
        bin.display(),
        applets.len()
    );
    for applet in applets {
        symlink("busybox", bin.join(applet))?;
    }
    let layer = image.join("layer.tar");
    run::echo_run(
        Command::new("tar")
            .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
            .arg(image.join("rootfs"))
            .arg("-cf")
            .arg(&layer)
            .arg("."),
    )?;
    println!("+ sha256sum {}", layer.display());
    let sum = run::output(Command::new("sha256sum").arg(&layer))?;
    let digest = sum.split_whitespace().next().context("sha256sum output")?;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let config = json!({
        "architecture": arch, "os": "linux",
        "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{digest}")]},
    });
    let manifest = json!([{"Config": "config.json", "RepoTags": [IMAGE], "Layers": ["layer.tar"]}]);
    fs::write(image.join("config.json"), config.to_string())?;
    fs::write(image.join("manifest.json"), manifest.to_string())?;
    println!("config.json: {config}\nmanifest.json: {manifest}");
    run::echo_run(
        Command::new("tar")
            .arg("-C")
            .arg(&image)
            .arg("-cf")
            .arg(path("image.tar"))
            .args(["manifest.json", "config.json", "layer.tar"]),
    )
}

/// The script `unshare --mount` runs before exec'ing containerd: the bind mounts.
fn mount_script() -> String {
    let mut script = String::from("set -e\n");
    let mut overlaid: Vec<&Path> = Vec::new();
    for (n, (target, name)) in BOUND.iter().enumerate() {
        let target = Path::new(target);
        if !target.exists() {
            let parent = target.ancestors().find(|p| p.exists()).unwrap_or(target);
            if !overlaid.contains(&parent) {
                overlaid.push(parent);
                let (p, l) = (parent.display(), path(&format!("overlay{n}")));
                let l = l.display();
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
            path(name).display(),
            target.display()
        );
    }
    script.push_str("exec \"$@\"\n");
    script
}

fn start_containerd(created: &mut Created) -> Result<()> {
    section("containerd in a mount namespace of its own, everything under the demo directory");
    let config = format!(
        "version = 2\nroot = \"{DIR}/root\"\nstate = \"{DIR}/state\"\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
         [grpc]\n  address = \"{DIR}/containerd.sock\"\n\
         [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{DIR}/opt\"\n"
    );
    fs::write(path("config.toml"), &config)?;
    println!("{DIR}/config.toml:\n{config}");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(mount_script())
        .args(["sh", "containerd", "--config"])
        .arg(path("config.toml"));
    println!("+ {} 2>{DIR}/containerd.log &", run::display(&cmd));
    let log = fs::File::create(path("containerd.log"))?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot run `{}`", run::display(&cmd)))?;
    let pid = child.id();
    created.containerd = Some(child);
    fs::write(path("containerd.pid"), format!("{pid}\n"))?;
    wait(20, "containerd's socket", || {
        let ctrd = created.containerd.as_mut().context("containerd")?;
        ensure!(
            ctrd.try_wait()?.is_none(),
            "containerd exited during start-up"
        );
        Ok(ctr("default")
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success()))
    })?;
    println!("containerd runs as pid {pid}; every ctr below joins its mount namespace");
    Ok(())
}

fn containerd_pid() -> String {
    fs::read_to_string(format!("{DIR}/containerd.pid")).unwrap_or_default()
}

/// `ctr -n <ns>` in containerd's mount namespace and the node's network namespace.
fn ctr(ns: &str) -> Command {
    let pid = containerd_pid();
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={}", netns_path()))
        .arg(format!("--mount=/proc/{}/ns/mnt", pid.trim()))
        .args(["ctr", "-n", ns])
        .env("CONTAINERD_ADDRESS", path("containerd.sock"))
        .stdin(Stdio::null());
    cmd
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

/// `ctr run --cni --rm IMAGE id sleep 3600` in the background; returns once the task runs.
fn spawn_container(created: &mut Created, ns: &'static str, id: &'static str) -> Result<()> {
    let mut cmd = ctr(ns);
    cmd.args(["run", "--cni", "--rm", "--cgroup"])
        .arg(format!("/{CGROUP}/{ns}-{id}"))
        .args([IMAGE, id, "sleep", "3600"]);
    let log = path(&format!("ctr-{ns}-{id}.log"));
    println!("+ {} >{} 2>&1 &", run::display(&cmd), log.display());
    let file = fs::File::create(&log)?;
    let child = cmd.stdout(file.try_clone()?).stderr(file).spawn()?;
    created.containers.push((ns, id, child));
    let child = &mut created.containers.last_mut().context("container")?.2;
    wait(30, "the task to run", || {
        if let Some(status) = child.try_wait()? {
            bail!(
                "ctr run {ns}/{id} exited ({status}): {}",
                fs::read_to_string(&log)?
            );
        }
        let tasks = run::output(ctr(ns).args(["task", "ls"]))?;
        Ok(tasks.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.first() == Some(&id) && cols.last() == Some(&"RUNNING")
        }))
    })?;
    Ok(())
}

/// `ctr task exec` inside a container, output streamed.
fn exec(ns: &str, id: &str, args: &[&str]) -> Result<()> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let exec_id = format!("demo-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    run::echo_run(
        ctr(ns)
            .args(["task", "exec", "--exec-id", &exec_id, id])
            .args(args),
    )
}

/// The container's IPv4 address on eth0.
fn address(ns: &str, id: &str) -> Result<String> {
    let out = run::output(ctr(ns).args([
        "task",
        "exec",
        "--exec-id",
        "demo-addr",
        id,
        "ip",
        "-o",
        "-4",
        "addr",
        "show",
        "dev",
        "eth0",
    ]))?;
    out.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .map(str::to_owned)
        .with_context(|| format!("no IPv4 address on {ns}/{id}: {out}"))
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

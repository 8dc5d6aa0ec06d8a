//! containerd for `cargo xtask demo-containerd`: the one-layer busybox image, the daemon in a
//! mount namespace of its own with the demo's directories bound over the paths `ctr` uses,
//! and the `ctr` commands that run, inspect and address the containers, each echoed before it
//! runs. Everything it writes is under the demo's directory; stopping and removing is the
//! parent module's cleanup.

use std::{
    fmt::Write as _,
    fs,
    os::unix::fs::symlink,
    path::Path,
    process::{Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;

use super::{CGROUP, Created, DIR, netns_path, path, section, wait};
use crate::run;

/// The image `ctr` runs.
const IMAGE: &str = "weft.test/busybox:1";
/// (host path, directory under [`DIR`]) bound over it in containerd's mount namespace.
pub(super) const BOUND: [(&str, &str); 4] = [
    ("/etc/cni/net.d", "net.d"),
    ("/opt/cni/bin", "cni-bin"),
    ("/var/lib/cni", "cni-cache"),
    ("/run/containerd", "run"),
];

/// Build the image: busybox and its applet links in one layer, docker-archive layout.
pub(super) fn build_image() -> Result<()> {
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

pub(super) fn start_containerd(created: &mut Created) -> Result<()> {
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
pub(super) fn ctr(ns: &str) -> Command {
    let pid = containerd_pid();
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={}", netns_path()))
        .arg(format!("--mount=/proc/{}/ns/mnt", pid.trim()))
        .args(["ctr", "-n", ns])
        .env("CONTAINERD_ADDRESS", path("containerd.sock"))
        .stdin(Stdio::null());
    cmd
}

/// `ctr run --cni --rm IMAGE id sleep 3600` in the background; returns once the task runs.
pub(super) fn spawn_container(
    created: &mut Created,
    ns: &'static str,
    id: &'static str,
) -> Result<()> {
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
pub(super) fn exec(ns: &str, id: &str, args: &[&str]) -> Result<()> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let exec_id = format!("demo-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    run::echo_run(
        ctr(ns)
            .args(["task", "exec", "--exec-id", &exec_id, id])
            .args(args),
    )
}

/// The container's IPv4 address on eth0.
pub(super) fn address(ns: &str, id: &str) -> Result<String> {
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

//! `weft-agent cleanup` on a node (a private network namespace) where the real agent ran with
//! a native device (`to_netdev`/`from_netdev` attached) and pods added by the real `weft-cni`,
//! in both attach modes: while the agent serves it refuses and removes nothing; after the
//! agent stopped (with a DEL queued meanwhile) nothing of weft is left: no pin, no TCX link
//! (`bpftool link show id`), no program on a device (TCX query, `bpftool net show`), no clsact
//! qdisc, no weft veth, no state directory, socket or DEL queue, no conflist, no plugin; and a
//! second cleanup has nothing to do. Every item is first shown to be there, so skipping any one
//! fails the test. A step that fails (the CNI configuration directory mounted read-only) stops
//! nothing else: cleanup removes the rest, says what each step did and which one failed with
//! its error, exits non-zero, and a run after the fix removes what was left. Runs as root.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use aya::programs::{SchedClassifier, TcAttachType};
use serde_json::Value;
use weft_agent::cni::install::{CONFLIST_NAME, PLUGIN};
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, Pod, add, del, example_store},
    bin_path,
    external::{External, NODE_DEV},
    require_root, run, unique,
};

/// The CNI directories of the node, removed on drop.
struct CniDirs {
    base: PathBuf,
}

impl CniDirs {
    fn new() -> Self {
        let base = std::env::temp_dir().join(unique("weft-cleanup-cni-"));
        fs::create_dir_all(&base).expect("mkdir");
        Self { base }
    }

    fn bin(&self) -> PathBuf {
        self.base.join("bin")
    }

    fn conf(&self) -> PathBuf {
        self.base.join("conf")
    }
}

impl Drop for CniDirs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

/// `weft-agent cleanup` with the agent's and the CNI directories' paths.
fn cleanup(agent: &Agent, cni: &CniDirs) -> Output {
    Command::new(bin_path("weft-agent"))
        .arg("--pin-dir")
        .arg(&agent.pin_dir)
        .arg("cleanup")
        .arg("--state-dir")
        .arg(&agent.state)
        .arg("--socket")
        .arg(&agent.socket)
        .arg("--delete-queue-dir")
        .arg(&agent.delete_queue)
        .arg("--bin-dir")
        .arg(cni.bin())
        .arg("--conf-dir")
        .arg(cni.conf())
        .output()
        .expect("run weft-agent cleanup")
}

fn json(cmd: &mut Command) -> Value {
    let out = run(cmd);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{cmd:?}: not JSON ({e})"))
}

/// Every file under `dir` (none when it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// What of weft is on the node, by kind; each list empty means none of it is left.
#[derive(Debug)]
struct Leftovers {
    pins: Vec<PathBuf>,
    /// Links (by id) still known to the kernel, of those pinned before cleanup.
    links: Vec<u64>,
    /// Programs attached with TCX, as `<device> <direction> <program>`.
    tcx: Vec<String>,
    /// `bpftool net show`'s tc entries (netlink filters) in the node.
    filters: Vec<Value>,
    /// Devices with a clsact qdisc.
    clsact: Vec<String>,
    /// Veths other than the native device.
    veths: Vec<String>,
    /// State directory, socket, DEL queue, conflist, plugin: those that exist.
    files: Vec<PathBuf>,
}

impl Leftovers {
    fn find(agent: &Agent, cni: &CniDirs, link_ids: &[u64]) -> Self {
        let links = link_ids
            .iter()
            .copied()
            .filter(|id| {
                Command::new("bpftool")
                    .args(["link", "show", "id", &id.to_string()])
                    .output()
                    .expect("bpftool")
                    .status
                    .success()
            })
            .collect();
        let devices: Vec<String> = json(Command::new("ip").args(["-j", "link", "show"]))
            .as_array()
            .expect("links")
            .iter()
            .map(|l| l["ifname"].as_str().expect("ifname").to_owned())
            .collect();
        let mut tcx = Vec::new();
        for device in &devices {
            for (direction, attach) in [
                ("ingress", TcAttachType::Ingress),
                ("egress", TcAttachType::Egress),
            ] {
                let (_, programs) = SchedClassifier::query_tcx(device, attach)
                    .unwrap_or_else(|e| panic!("TCX query of {device}: {e}"));
                for program in programs {
                    let name = program.name_as_str().unwrap_or("?").to_owned();
                    tcx.push(format!("{device} {direction} {name}"));
                }
            }
        }
        let net = json(Command::new("bpftool").args(["-j", "net", "show"]));
        let filters = net
            .as_array()
            .expect("bpftool net show")
            .iter()
            .flat_map(|n| n["tc"].as_array().cloned().unwrap_or_default())
            .collect();
        let clsact = json(Command::new("tc").args(["-j", "qdisc", "show"]))
            .as_array()
            .expect("qdiscs")
            .iter()
            .filter(|q| q["kind"] == "clsact")
            .map(|q| q["dev"].as_str().unwrap_or("?").to_owned())
            .collect();
        let veths = json(Command::new("ip").args(["-j", "link", "show", "type", "veth"]))
            .as_array()
            .expect("veths")
            .iter()
            .map(|l| l["ifname"].as_str().expect("ifname").to_owned())
            .filter(|name| name != NODE_DEV)
            .collect();
        let present: Vec<PathBuf> = [
            agent.state.clone(),
            agent.socket.clone(),
            agent.delete_queue.clone(),
            cni.conf().join(CONFLIST_NAME),
            cni.bin().join(PLUGIN),
        ]
        .into_iter()
        .filter(|p| p.exists())
        .collect();
        Self {
            pins: files(&agent.pin_dir),
            links,
            tcx,
            filters,
            clsact,
            veths,
            files: present,
        }
    }
}

/// The ids of the TCX links pinned under `pin_dir`.
fn pinned_links(pin_dir: &Path) -> Vec<u64> {
    files(&pin_dir.join("links"))
        .iter()
        .map(|pin| {
            json(
                Command::new("bpftool")
                    .args(["-j", "link", "show", "pinned"])
                    .arg(pin),
            )["id"]
                .as_u64()
                .expect("link id")
        })
        .collect()
}

/// Every kind of thing cleanup must remove is on the node (so its absence afterwards means
/// cleanup removed it).
fn assert_weft_is_there(before: &Leftovers, agent: &Agent, attach_mode: &str) {
    assert!(!before.pins.is_empty(), "{before:?}");
    assert_eq!(before.veths.len(), 2, "a veth per pod: {before:?}");
    assert_eq!(
        before.files.len(),
        5,
        "state, socket, queue, conflist, plugin: {before:?}"
    );
    assert!(
        !files(&agent.delete_queue).is_empty(),
        "the DEL was not queued: {before:?}"
    );
    let attached: BTreeSet<String> = if attach_mode == "tcx" {
        assert_eq!(
            before.links.len(),
            4,
            "two pods, two device hooks: {before:?}"
        );
        assert!(
            before.filters.is_empty() && before.clsact.is_empty(),
            "{before:?}"
        );
        before.tcx.iter().cloned().collect()
    } else {
        assert!(
            before.links.is_empty() && before.tcx.is_empty(),
            "{before:?}"
        );
        assert!(before.clsact.contains(&NODE_DEV.to_owned()), "{before:?}");
        before
            .filters
            .iter()
            .map(|f| format!("{} {}", f["devname"].as_str().unwrap_or("?"), f["name"]))
            .collect()
    };
    for program in ["to_netdev", "from_netdev", "from_container"] {
        assert!(
            attached.iter().any(|a| a.contains(program)),
            "{program} is attached nowhere: {attached:?}"
        );
    }
    assert!(
        attached.iter().any(|a| a.starts_with(NODE_DEV)),
        "the native device has weft's programs: {attached:?}"
    );
}

fn leaves_nothing(attach_mode: &str) {
    require_root();
    let _node = ThreadNetNs::new();
    let _external = External::new(&["10.200.0.0/16"]);
    let cni = CniDirs::new();
    run(Command::new(bin_path("weft-agent"))
        .args(["cni", "install", "--bin-dir"])
        .arg(cni.bin())
        .arg("--conf-dir")
        .arg(cni.conf()));
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--attach-mode",
            attach_mode,
            "--ipam",
            "multi-pool",
            "--enable-bpf-masquerade",
            "true",
            "--devices",
            NODE_DEV,
        ],
    );
    agent.start();
    let pods = [add(&agent, "default", "web"), add(&agent, "default", "db")];

    // While the agent serves, cleanup refuses and leaves everything.
    let refused = cleanup(&agent, &cni);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("weft-agent is running"),
        "cleanup beside a running agent: {}\n{stderr}",
        refused.status
    );

    // Killed, as a crashed agent is: it leaves its socket (a SIGTERMed one removes it).
    agent.kill();
    // A DEL while the agent is down is queued on disk.
    del(&agent, &pods[1]);
    let links = pinned_links(&agent.pin_dir);
    let before = Leftovers::find(&agent, &cni, &links);
    assert_weft_is_there(&before, &agent, attach_mode);

    let out = cleanup(&agent, &cni);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cleanup failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let after = Leftovers::find(&agent, &cni, &links);
    assert!(
        after.pins.is_empty()
            && !agent.pin_dir.exists()
            && after.links.is_empty()
            && after.tcx.is_empty()
            && after.filters.is_empty()
            && after.clsact.is_empty()
            && after.veths.is_empty()
            && after.files.is_empty(),
        "weft is left on the node after cleanup: {after:?}\ncleanup said:\n{stdout}"
    );
    for veth in &before.veths {
        assert!(
            stdout.contains(veth),
            "cleanup does not say it removed {veth}:\n{stdout}"
        );
    }
    // The native device itself stays, and is still up.
    let device = json(Command::new("ip").args(["-j", "link", "show", NODE_DEV]));
    assert_eq!(device[0]["operstate"], "UP", "{device}");

    let again = cleanup(&agent, &cni);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success() && stdout.contains("nothing to do") && !stdout.contains("removed"),
        "a second cleanup: {}\n{stdout}",
        again.status
    );
}

/// `dir` bind-mounted read-only on itself while this lives.
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn new(dir: &Path) -> Self {
        run(Command::new("mount").arg("--bind").arg(dir).arg(dir));
        let guard = Self(dir.to_path_buf());
        run(Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(dir));
        guard
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A node where the agent ran (killed) with two pods (kept: their namespaces hold the veths),
/// one DEL queued, and its CNI files.
fn node_left_by_a_killed_agent(cni: &CniDirs) -> (Agent, [Pod; 2]) {
    run(Command::new(bin_path("weft-agent"))
        .args(["cni", "install", "--bin-dir"])
        .arg(cni.bin())
        .arg("--conf-dir")
        .arg(cni.conf()));
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--enable-bpf-masquerade",
            "true",
            "--devices",
            NODE_DEV,
        ],
    );
    agent.start();
    let pods = [add(&agent, "default", "web"), add(&agent, "default", "db")];
    agent.kill();
    del(&agent, &pods[1]);
    (agent, pods)
}

#[test]
fn a_failing_step_stops_no_other_and_is_reported() {
    require_root();
    let _node = ThreadNetNs::new();
    let _external = External::new(&["10.200.0.0/16"]);
    let cni = CniDirs::new();
    let (agent, _pods) = node_left_by_a_killed_agent(&cni);
    let links = pinned_links(&agent.pin_dir);
    let before = Leftovers::find(&agent, &cni, &links);
    assert!(
        !before.pins.is_empty() && before.veths.len() == 2 && before.files.len() == 5,
        "{before:?}"
    );
    let conflist = cni.conf().join(CONFLIST_NAME);

    let read_only = ReadOnly::new(&cni.conf());
    let out = cleanup(&agent, &cni);
    drop(read_only);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "cleanup with a step failing exits 0:\n{stdout}\n{stderr}"
    );
    let after = Leftovers::find(&agent, &cni, &links);
    assert!(
        after.pins.is_empty()
            && !agent.pin_dir.exists()
            && after.links.is_empty()
            && after.tcx.is_empty()
            && after.veths.is_empty()
            && after.files == [conflist.clone()],
        "the steps after the failing one did not run: {after:?}\ncleanup said:\n{stdout}\n{stderr}"
    );
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("failed")).collect();
    assert_eq!(
        failed.len(),
        1,
        "one failed step, named with its error:\n{stdout}"
    );
    assert!(
        failed[0].contains(&conflist.display().to_string())
            && failed[0].contains("Read-only file system"),
        "{stdout}"
    );
    for veth in &before.veths {
        assert!(stdout.contains(veth), "{veth} not reported:\n{stdout}");
    }
    for removed in [
        "removed pin directory",
        "removed CNI plugin",
        "removed DEL queue",
        "removed endpoint records",
        "removed state directory",
    ] {
        assert!(stdout.contains(removed), "no `{removed}`:\n{stdout}");
    }
    assert!(
        stderr.contains("1 of") && stderr.contains("failed"),
        "the error names the failed count:\n{stderr}"
    );

    // Fixed (writable again), a second run removes what was left, and only that.
    let again = cleanup(&agent, &cni);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}");
    let removed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("removed"))
        .collect();
    assert_eq!(
        removed,
        [format!("removed CNI configuration: {}", conflist.display())],
        "{stdout}"
    );
    assert!(!conflist.exists());
}

#[test]
fn cleanup_leaves_nothing_of_weft_with_tcx() {
    leaves_nothing("tcx");
}

#[test]
fn cleanup_leaves_nothing_of_weft_with_netlink_tc() {
    leaves_nothing("netlink");
}

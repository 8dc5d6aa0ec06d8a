//! `weft-agent bpf …` only reads: it opens the maps a `weft-agent run` pinned and nothing else.

use std::{
    collections::BTreeSet,
    fs,
    path::Path,
    process::{Command, Output},
    time::Duration,
};

use serde_json::Value;
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, add, example_store},
    bin_path, require_root, run, unique,
};

/// Every `bpf` subcommand, as a user types it.
const COMMANDS: [&[&str]; 6] = [
    &["bpf", "endpoint", "list"],
    &["bpf", "counters"],
    &["bpf", "ipcache", "list"],
    &["bpf", "masq", "list"],
    &["bpf", "nat", "list"],
    &["bpf", "netdev", "list"],
];

fn bpf(args: &[&str], pin_dir: &Path) -> Output {
    Command::new(bin_path("weft-agent"))
        .args(args)
        .arg("--pin-dir")
        .arg(pin_dir)
        .output()
        .expect("run weft-agent")
}

/// Whether `path` is a mount point (a line of /proc/self/mountinfo names it).
fn is_mount_point(path: &Path) -> bool {
    let wanted = path.display().to_string();
    fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .any(|line| line.split_whitespace().nth(4) == Some(wanted.as_str()))
}

#[test]
fn bpf_commands_on_a_pin_dir_without_an_agent_fail_naming_it_and_create_nothing() {
    require_root();
    let on_bpffs = Path::new("/sys/fs/bpf").join(unique("weft-no-agent-"));
    // Not on a bpffs: the first existing ancestor is a plain directory of the test's.
    let base = std::env::temp_dir().join(unique("weft-not-bpffs-"));
    fs::create_dir_all(&base).expect("test dir");
    let elsewhere = base.join("weft");
    for pin_dir in [&on_bpffs, &elsewhere] {
        for args in COMMANDS {
            let out = bpf(args, pin_dir);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let created = pin_dir.exists();
            let mounted = is_mount_point(&base);
            if mounted {
                let _ = Command::new("umount").arg(&base).status();
            }
            let _ = fs::remove_dir_all(pin_dir);
            assert!(
                !created && !mounted,
                "`weft-agent {}` created {} (mounted a bpffs: {mounted})",
                args.join(" "),
                pin_dir.display()
            );
            assert!(
                !out.status.success(),
                "`weft-agent {}` on {} exited 0",
                args.join(" "),
                pin_dir.display()
            );
            assert!(
                stderr.contains(&format!("--pin-dir {}", pin_dir.display())),
                "`weft-agent {}` must name the --pin-dir to use; it said: {stderr}",
                args.join(" ")
            );
        }
    }
    fs::remove_dir_all(&base).expect("remove test dir");
}

/// (pin, link id, program id) of every link the agent pinned below `pin_dir/links`.
fn links(pin_dir: &Path) -> BTreeSet<(String, u64, u64)> {
    let mut pins = Vec::new();
    let mut dirs = vec![pin_dir.join("links")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let entry = entry.expect("link pin");
            if entry.file_type().expect("file type").is_dir() {
                dirs.push(entry.path());
            } else {
                pins.push(entry.path());
            }
        }
    }
    pins.into_iter()
        .map(|path| {
            let out = run(Command::new("bpftool")
                .args(["-j", "link", "show", "pinned"])
                .arg(&path));
            let link: Value = serde_json::from_slice(&out.stdout).expect("bpftool JSON");
            let id = |key: &str| link[key].as_u64().unwrap_or_else(|| panic!("link {key}"));
            (path.display().to_string(), id("id"), id("prog_id"))
        })
        .collect()
}

#[test]
fn bpf_commands_leave_a_running_agents_programs_and_links_as_they_are() {
    require_root();
    let _node = ThreadNetNs::new();
    // TCX: the pods' links are pinned, so there are links to leave as they are.
    let mut agent = Agent::new(
        &example_store(),
        &["--ipam", "multi-pool", "--attach-mode", "tcx"],
    );
    agent.start();
    agent.wait_ready(Duration::from_secs(20));
    let _pod = add(&agent, "default", "web");
    let before = links(&agent.pin_dir);
    for args in COMMANDS {
        let out = bpf(args, &agent.pin_dir);
        assert!(
            out.status.success(),
            "`weft-agent {}` on the running agent's pins: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let after = links(&agent.pin_dir);
    assert!(!before.is_empty(), "the agent pinned no link");
    assert_eq!(
        before, after,
        "inspecting replaced the running agent's programs in its links"
    );
}

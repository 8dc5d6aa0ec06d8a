//! The README's quick start on one host, run as written (only `target/release/` pointing at
//! the binaries under test) in private mount and network namespaces: a fresh bpffs at
//! `/sys/fs/bpf` and fresh tmpfs at `/run` and `/tmp`, so its default paths are its own. It
//! adds and deletes a pod, stops the agent and ends with `weft-agent cleanup`: afterwards no
//! pin, no state directory and no temporary file of it is left, cleanup said what it removed
//! and nothing failed, and a second cleanup has nothing to do.

use std::{fs, path::Path, process::Command};

use weft_tests::{bin_path, require_root};

/// The first ```sh block after `heading` in `page`.
fn first_shell_block(page: &str, heading: &str) -> String {
    let after = page
        .split_once(heading)
        .unwrap_or_else(|| panic!("no `{heading}`"))
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("a ```sh block")
        .1
        .split_once("```")
        .expect("a closed block")
        .0;
    block.to_owned()
}

#[test]
fn the_readme_quick_start_leaves_nothing_behind() {
    require_root();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = fs::read_to_string(repo.join("README.md")).expect("README.md");
    let bin_dir = bin_path("weft-agent")
        .parent()
        .expect("a directory")
        .display()
        .to_string();
    assert!(bin_path("weft-cni").starts_with(&bin_dir));
    let quick_start = first_shell_block(&readme, "## Quick start on one host")
        .replace("target/release/", &format!("{bin_dir}/"));
    let agent = format!("{bin_dir}/weft-agent");
    let script = format!(
        "ip link set lo up\n\
         mount -t bpf bpf /sys/fs/bpf && mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /tmp \
         || exit 99\n\
         cd {repo}\n\
         ls -A /sys/fs/bpf /run /tmp\n\
         echo '=== walkthrough'\n\
         {quick_start}\n\
         echo '=== left'\n\
         ls -A /sys/fs/bpf /run /tmp\n\
         echo '=== again'\n\
         {agent} cleanup\n",
        repo = repo.display(),
    );
    let out = Command::new("unshare")
        .args(["--mount", "--net", "--propagation", "private", "bash", "-c"])
        .arg(&script)
        .output()
        .expect("run unshare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("script:\n{script}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "{}\n{context}", out.status);
    let (before, rest) = stdout
        .split_once("=== walkthrough\n")
        .expect("=== walkthrough");
    let (walkthrough, rest) = rest.split_once("=== left\n").expect("=== left");
    let (left, again) = rest.split_once("=== again\n").expect("=== again");
    assert!(
        walkthrough.contains("\"ips\":[{\"address\":\"10.200."),
        "ADD gave the pod no address of pool default:\n{context}"
    );
    // `ls -A` of the three directories, before and after: what a fresh bpffs holds
    // (the kernel's maps.debug, progs.debug), `mount`'s /run/mount, and the empty netns
    // directory `ip netns add` made.
    let entries = |listing: &str| -> Vec<String> {
        listing
            .lines()
            .filter(|l| !l.is_empty() && !l.ends_with(':'))
            .map(str::to_owned)
            .collect()
    };
    let mut expected = entries(before);
    expected.push("netns".to_owned());
    expected.sort();
    let mut after = entries(left);
    after.sort();
    assert_eq!(
        after, expected,
        "the quick start left these behind (bpffs, /run, /tmp):\n{context}"
    );
    for removed in [
        "removed pin directory: /sys/fs/bpf/weft",
        "removed endpoint records: /var/run/weft/endpoints",
        "removed state directory: /var/run/weft",
    ] {
        assert!(
            walkthrough.contains(removed),
            "cleanup did not say `{removed}`:\n{context}"
        );
    }
    assert!(!walkthrough.contains("failed:"), "{context}");
    assert!(
        again.contains("nothing of weft on this node: nothing to do") && !again.contains("removed"),
        "a second cleanup:\n{context}"
    );
}

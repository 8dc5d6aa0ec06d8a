//! `weft-agent cni install` as the DaemonSet's init container runs it, into temporary
//! directories standing for the host's `/opt/cni/bin` and `/etc/cni/net.d`: the installed
//! `weft-cni` runs (`CNI_COMMAND=VERSION` with the installed configuration on stdin, as a
//! runtime calls it), a second run writes nothing (same mtime, same inode), and a missing
//! source fails naming the path and the fix. No root needed.

use std::{
    fs,
    io::Write as _,
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use serde_json::Value;
use weft_tests::{bin_path, unique};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("weft-cni-install"));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn install(bin_dir: &Path, conf_dir: &Path, extra: &[&str]) -> Output {
    Command::new(bin_path("weft-agent"))
        .args(["cni", "install", "--bin-dir"])
        .arg(bin_dir)
        .arg("--conf-dir")
        .arg(conf_dir)
        .args(extra)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run weft-agent cni install")
}

fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "weft-agent cni install failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first plugin's configuration as libcni passes it on stdin (list name and version
/// merged in).
fn plugin_stdin(conflist: &Path) -> Vec<u8> {
    let text = fs::read(conflist).unwrap_or_else(|e| panic!("read {}: {e}", conflist.display()));
    let list: Value = serde_json::from_slice(&text).expect("the conflist is JSON");
    let mut plugin = list["plugins"][0].clone();
    plugin["cniVersion"] = list["cniVersion"].clone();
    plugin["name"] = list["name"].clone();
    serde_json::to_vec(&plugin).expect("json")
}

fn stamp(path: &Path) -> (i64, i64, u64) {
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    (meta.mtime(), meta.mtime_nsec(), meta.ino())
}

#[test]
fn install_puts_a_runnable_plugin_and_its_conflist_then_is_a_no_op() {
    let tmp = TempDir::new();
    let bin_dir = tmp.0.join("host/opt/cni/bin");
    let conf_dir = tmp.0.join("host/etc/cni/net.d");

    let first = succeeded(&install(&bin_dir, &conf_dir, &[]));
    let plugin = bin_dir.join("weft-cni");
    let conflist = conf_dir.join("05-weft.conflist");
    assert!(
        first.contains(&format!("installed: {}", plugin.display())),
        "{first}"
    );
    assert!(
        first.contains(&format!("installed: {}", conflist.display())),
        "{first}"
    );
    assert_eq!(
        fs::read(&plugin).expect("read installed"),
        fs::read(bin_path("weft-cni")).expect("read built"),
        "the installed plugin is the weft-cni built beside weft-agent"
    );
    let mode = fs::metadata(&plugin).expect("stat").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755, "plugin mode {mode:o}");

    // The runtime's view: exec the installed binary with the installed configuration.
    let mut child = Command::new(&plugin)
        .env_clear()
        .env("CNI_COMMAND", "VERSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("exec the installed weft-cni");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&plugin_stdin(&conflist))
        .expect("write stdin");
    let out = child.wait_with_output().expect("weft-cni VERSION");
    assert!(out.status.success(), "weft-cni VERSION failed: {out:?}");
    let version: Value = serde_json::from_slice(&out.stdout).expect("VERSION prints JSON");
    assert_eq!(version["cniVersion"], "1.0.0", "{version}");
    assert!(
        version["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.iter().any(|s| s == "1.0.0")),
        "{version}"
    );

    // Second run: nothing written (same mtime and inode: no rename happened).
    let before = (stamp(&plugin), stamp(&conflist));
    let second = succeeded(&install(&bin_dir, &conf_dir, &[]));
    assert!(
        second.contains(&format!("unchanged: {}", plugin.display())),
        "{second}"
    );
    assert!(
        second.contains(&format!("unchanged: {}", conflist.display())),
        "{second}"
    );
    assert_eq!((stamp(&plugin), stamp(&conflist)), before);
}

#[test]
fn a_missing_plugin_source_names_the_path_and_the_flag() {
    let tmp = TempDir::new();
    let missing = tmp.0.join("no-such-weft-cni");
    let out = install(
        &tmp.0.join("bin"),
        &tmp.0.join("conf"),
        &["--bin-src", missing.to_str().expect("utf-8 path")],
    );
    assert!(!out.status.success(), "install without a source succeeded");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&missing.display().to_string()) && stderr.contains("--bin-src"),
        "{stderr}"
    );
    assert!(
        !tmp.0.join("conf/05-weft.conflist").exists(),
        "no configuration without its plugin"
    );
}

//! Benchmarks behind `cargo xtask bench <target>`. Each prints its numbers next to a baseline
//! measured in the same run, as ratios; none asserts on time.

pub mod alloc;
pub mod azure;
pub mod eni;
pub mod ipam;
pub mod masq;
pub mod memory;
pub mod net;
pub mod operator;
pub mod prog;
pub mod runtime;
pub mod service;

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, ensure};

/// Where Debian's reference CNI plugins live.
pub(crate) const CNI_DIR: &str = "/usr/lib/cni";

/// Run Debian's reference `bridge` plugin once as a runtime does (`CNI_*` environment, the
/// network configuration on stdin); its stdout (the result JSON on ADD) and the time from spawn
/// to exit. The baseline every weft benchmark compares against.
pub(crate) fn bridge_cni(
    config: &str,
    command: &str,
    netns: &Path,
    id: &str,
) -> anyhow::Result<(Vec<u8>, Duration)> {
    let plugin = Path::new(CNI_DIR).join("bridge");
    let start = Instant::now();
    let mut child = Command::new(&plugin)
        .env_clear()
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", id)
        .env("CNI_NETNS", netns)
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", CNI_DIR)
        // A runtime passes its own environment along; `ipMasq` runs `iptables` from PATH.
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}: run `cargo xtask setup`", plugin.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(config.as_bytes())
            .context("write the CNI config")?;
    }
    let out = child
        .wait_with_output()
        .context("wait for the bridge CNI plugin")?;
    let elapsed = start.elapsed();
    ensure!(
        out.status.success(),
        "bridge CNI {command} {id} failed ({}): {} {}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok((out.stdout, elapsed))
}

/// A kubeconfig file a benchmark wrote for its operator, removed on drop.
pub(crate) struct Kubeconfig(pub(crate) PathBuf);

impl Drop for Kubeconfig {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

//! kubectl as the demo runs it: on node-a (where the API server emulator listens), echoed as
//! a plain `kubectl …` line that the printed alias makes runnable by hand; the manifests it
//! creates, printed first; and the closing look at the CiliumNodes as a user reads them.

use std::{fs, process::Command, thread::sleep, time::Duration};

use anyhow::Result;

use super::{DIR, Mode, NODES, path, section};
use crate::run;

pub(super) fn kubectl_alias() -> String {
    format!(
        "alias kubectl='nsenter --net={} kubectl --kubeconfig {} --cache-dir {DIR}/kube-cache'",
        NODES[0].netns_path(),
        NODES[0].kubeconfig().display()
    )
}

/// `kubectl ARGS` on node-a; echoed as `kubectl ARGS` (see [`kubectl_alias`]).
pub(super) struct Kubectl(Command);

pub(super) fn kubectl_shown(args: &[&str]) -> Kubectl {
    let mut cmd = NODES[0].enter("kubectl");
    cmd.arg("--kubeconfig")
        .arg(NODES[0].kubeconfig())
        .arg("--cache-dir")
        .arg(path("kube-cache"))
        .args(args);
    Kubectl(cmd)
}

impl Kubectl {
    fn line(&self) -> String {
        let words: Vec<String> = self
            .0
            .get_args()
            .skip(6)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut shown = Command::new("kubectl");
        shown.args(&words);
        run::display(&shown)
    }
}

impl std::ops::Deref for Kubectl {
    type Target = Command;
    fn deref(&self) -> &Command {
        &self.0
    }
}

impl std::ops::DerefMut for Kubectl {
    fn deref_mut(&mut self) -> &mut Command {
        &mut self.0
    }
}

/// `kubectl create -f <file>` of `manifest`, the file printed first.
pub(super) fn kubectl_create(name: &str, manifest: &str) -> Result<()> {
    let file = path(name);
    fs::write(&file, manifest)?;
    println!("{}:\n{}", file.display(), manifest.trim_end());
    let file = file.display().to_string();
    // The emulator serves no OpenAPI documents, so kubectl cannot validate client-side.
    kubectl(&["create", "--validate=false", "-f", &file])
}

/// Echo `kubectl ARGS` and run it with its output on the terminal.
pub(super) fn kubectl(args: &[&str]) -> Result<()> {
    let mut cmd = kubectl_shown(args);
    println!("+ {}", cmd.line());
    run::run(&mut cmd)
}

pub(super) fn show_cilium_nodes(mode: Mode) -> Result<()> {
    section("the CiliumNodes as a user reads them");
    // The agents write the demand their pods raised (spec.ipam.pools.requested) debounced,
    // 1 s here. Multi-pool leaves status.ipam.used empty, as Cilium's does.
    sleep(Duration::from_millis(1500));
    println!(
        "(the emulator serves no server-side tables, so plain `get` shows kubectl's default columns)"
    );
    kubectl(&["get", "ciliumnodes"])?;
    println!();
    let by_node = match mode {
        Mode::MultiPool => {
            "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{range .spec.ipam.pools.allocated[*]}{\"  \"}{.pool}{\": \"}{.cidrs}{\"\\n\"}{end}{end}"
        }
        Mode::Azure | Mode::Aws => {
            "jsonpath={range .items[*]}{.metadata.name}{\"\\n  used: \"}{.status.ipam.used}{\"\\n\"}{end}"
        }
    };
    kubectl(&["get", "ciliumnodes", "-o", by_node])?;
    println!("\nCilium's troubleshooting command (empty: no allocation error on any node):");
    kubectl(&[
        "get",
        "ciliumnodes",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}{\"\\t\"}{.status.ipam.operator-status}{\"\\n\"}{end}",
    ])?;
    println!();
    kubectl(&["get", "ciliumnode", "node-b", "-o", "yaml"])?;
    println!();
    kubectl(&["get", "ciliumpodippools"])
}

//! The node side of the cloud IPAM modes against a cloud in network namespaces
//! (`weft_tests::cloud`): the real `weft-agent` (through the Kubernetes API emulator, with the
//! CiliumNode's cloud status written as the operator would) configures the ENIs it finds by
//! MAC and routes each pod out of the interface owning its address, so the VPC's
//! source/destination check lets it through; DEL, a restart and `cleanup` leave nothing
//! behind; a new ENI is picked up after start; Azure's compat form routes through a secondary
//! NIC. Runs as root.

mod aws;
mod azure;
mod eni;
mod new_eni;

use std::{path::PathBuf, process::Command, time::Duration};

use serde_json::{Value, json};
use weft_tests::{agent::Agent, bin_path, kube::Emulator, run, unique};

pub(crate) use weft_tests::wait_for;

/// An emulator and a kubeconfig pointing at it, with one v1.Node.
pub(crate) struct Cluster {
    pub(crate) emu: Emulator,
    pub(crate) kubeconfig: PathBuf,
}

impl Cluster {
    /// The emulator with node `name` registered with `provider_id`.
    pub(crate) fn start(name: &str, provider_id: &str) -> Self {
        let emu = Emulator::start();
        let kubeconfig = std::env::temp_dir().join(unique("weft-kubeconfig-"));
        emu.write_kubeconfig(&kubeconfig);
        emu.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
        emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"providerID": provider_id},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.6.0.10"}]},
        }));
        Self { emu, kubeconfig }
    }

    /// A pod scheduled to `node`.
    pub(crate) fn add_pod(&self, name: &str, node: &str) {
        self.emu.put(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        }));
    }

    /// An agent for `node` with `flags`, not started.
    pub(crate) fn agent(&self, node: &str, flags: &[&str]) -> Agent {
        let mut all = vec!["--ipam-cilium-node-update-rate", "1s"];
        all.extend_from_slice(flags);
        Agent::kube(&self.kubeconfig, node, &all)
    }

    /// Wait for the agent's CiliumNode, then play the operator: change it with `edit`.
    pub(crate) fn operator_edit(&self, name: &str, edit: impl FnOnce(&mut Value)) {
        let mut node = wait_for("the agent's CiliumNode", Duration::from_secs(20), || {
            self.emu
                .get("ciliumnodes", None, name)
                .ok_or_else(|| "not yet".to_owned())
        });
        edit(&mut node);
        self.emu.put(node);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// `weft-agent status -o json` of the running agent.
pub(crate) fn status(agent: &Agent) -> Value {
    let out = Command::new(bin_path("weft-agent"))
        .args(["status", "-o", "json", "--socket"])
        .arg(&agent.socket)
        .output()
        .expect("weft-agent status");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "status is not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Wait until `weft-agent status` lists interface `eni` in a state starting with `state`;
/// the interface's entry.
pub(crate) fn wait_interface(agent: &Agent, eni: &str, state: &str) -> Value {
    wait_for(
        &format!("{eni} to be {state}"),
        Duration::from_secs(20),
        || {
            let status = status(agent);
            status["interfaces"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|i| {
                    i["id"] == eni && i["state"].as_str().is_some_and(|s| s.starts_with(state))
                })
                .cloned()
                .ok_or_else(|| status["interfaces"].to_string())
        },
    )
}

/// `weft-agent cleanup` of the agent's directories (no CNI files were installed).
pub(crate) fn cleanup(agent: &Agent) -> String {
    let cni = std::env::temp_dir().join(unique("weft-cloud-cni-"));
    let out = run(Command::new(bin_path("weft-agent"))
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
        .arg(cni.join("bin"))
        .arg("--conf-dir")
        .arg(cni.join("conf")));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

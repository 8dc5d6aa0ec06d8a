//! The real `weft-operator` binary against the Kubernetes API emulator (through a kubeconfig,
//! so its own kube-rs client is what runs): cluster-pool and multi-pool allocation, restarts,
//! conflicts, the cluster-pool → multi-pool migration and its dry run, node lifecycle, runtime
//! configuration changes, leader election and faults, a rejected token, a missing permission
//! and an unreachable API server, its logging flags, the CiliumIdentity garbage collection,
//! Azure IPAM against the ARM emulator, and ENI IPAM against the EC2 emulator. The scenarios
//! with agents and pods are in `kube_agent`.

mod azure;
mod cluster_pool;
mod eni;
mod faults;
mod ha;
mod identity_gc;
mod kubectl;
mod migration;
mod multi_pool;
mod reach;

use std::{collections::BTreeMap, path::PathBuf};

use serde_json::{Value, json};
use weft_tests::{kube::Emulator, operator::Operator, unique};

/// An emulator, a kubeconfig for it, and helpers to seed and read objects.
pub(crate) struct Cluster {
    pub(crate) emu: Emulator,
    pub(crate) kubeconfig: PathBuf,
}

impl Cluster {
    pub(crate) fn start() -> Self {
        Self::with(Emulator::start())
    }

    pub(crate) fn with(emu: Emulator) -> Self {
        let kubeconfig = std::env::temp_dir().join(unique("weft-op-kubeconfig-"));
        emu.write_kubeconfig(&kubeconfig);
        emu.put(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}),
        );
        Self { emu, kubeconfig }
    }

    /// An operator for this cluster with `flags`, started.
    pub(crate) fn operator(&self, flags: &[&str]) -> Operator {
        let mut op = Operator::new(&self.kubeconfig, flags);
        op.spawn();
        op
    }

    /// A v1 Node and its CiliumNode (as an agent would create it), with `ipam` as spec.ipam.
    pub(crate) fn add_node(&self, name: &str, ipam: &Value) {
        self.emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }));
        self.add_cilium_node(name, ipam);
    }

    /// A CiliumNode only.
    pub(crate) fn add_cilium_node(&self, name: &str, ipam: &Value) {
        self.emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": name},
            "spec": {"ipam": ipam},
        }));
    }

    pub(crate) fn cilium_node(&self, name: &str) -> Option<Value> {
        self.emu.get("ciliumnodes", None, name)
    }

    /// `spec.ipam.podCIDRs` of every CiliumNode.
    pub(crate) fn pod_cidrs(&self) -> BTreeMap<String, Vec<String>> {
        self.emu
            .list("ciliumnodes")
            .iter()
            .map(|n| {
                let cidrs = n["spec"]["ipam"]["podCIDRs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect();
                (
                    n["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    cidrs,
                )
            })
            .collect()
    }

    pub(crate) fn operator_error(&self, name: &str) -> String {
        self.cilium_node(name)
            .and_then(|n| {
                n["status"]["ipam"]["operator-status"]["error"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

pub(crate) use weft_tests::wait_for;

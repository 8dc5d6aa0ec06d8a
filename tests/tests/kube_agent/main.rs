//! The real `weft-agent` against the Kubernetes API emulator (through a kubeconfig, so the
//! agent's own kube-rs client code is what is exercised), with pods wired by the real
//! `weft-cni` in network namespaces: node discovery, the operator's side of the CRD and
//! multi-pool handshakes, the wait for an operator-assigned static IP (azure), churn under
//! injected faults, a restart while the API server is down, missing permissions, a
//! CiliumNode another writer broke, and the router address named by `CiliumInternalIP`. Runs
//! as root.

mod eni;
mod faults;
mod identity_mark;
mod lifecycle;
mod metrics;
mod operator;
mod partial_view;
mod recreate;
mod reliability;
mod restarts;
mod router;
mod static_ip;
mod taint;
mod tunnel;
mod two_nodes;

use std::{path::PathBuf, time::Duration};

use serde_json::{Value, json};
pub(crate) use weft_tests::agent::{Pod, add, del, ips_of, ping};
use weft_tests::{agent::Agent, kube::Emulator, unique};

/// The debounce the tests run the agent with.
pub(crate) const DEBOUNCE: Duration = Duration::from_secs(1);

/// An emulator and a kubeconfig pointing at it.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) emu: Emulator,
    pub(crate) kubeconfig: PathBuf,
}

impl Cluster {
    pub(crate) fn start() -> Self {
        Self::with(Emulator::start())
    }

    /// A cluster around an emulator built by the caller.
    pub(crate) fn with(emu: Emulator) -> Self {
        let kubeconfig = std::env::temp_dir().join(unique("weft-kubeconfig-"));
        emu.write_kubeconfig(&kubeconfig);
        for ns in ["default", "kube-system", "web"] {
            emu.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        }
        Self { emu, kubeconfig }
    }

    /// A v1.Node as the kubelet registers it.
    pub(crate) fn add_node(&self, name: &str, provider_id: &str, pod_cidr: Option<&str>) -> Value {
        self.add_node_at(name, "192.0.2.10", provider_id, pod_cidr)
    }

    /// A v1.Node with InternalIP `ip`.
    pub(crate) fn add_node_at(
        &self,
        name: &str,
        ip: &str,
        provider_id: &str,
        pod_cidr: Option<&str>,
    ) -> Value {
        let mut spec = json!({"providerID": provider_id});
        if let Some(cidr) = pod_cidr {
            spec["podCIDR"] = json!(cidr);
            spec["podCIDRs"] = json!([cidr]);
        }
        self.emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "z1"}},
            "spec": spec,
            "status": {"addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ]},
        }))
    }

    /// A CiliumPodIPPool (the operator carves node CIDRs out of it).
    pub(crate) fn add_pool(&self, name: &str, cidr: &str, mask: u8) {
        self.emu.put(json!({
            "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
            "metadata": {"name": name},
            "spec": {"ipv4": {"cidrs": [cidr], "maskSize": mask}},
        }));
    }

    /// A pod scheduled to `node`.
    pub(crate) fn add_pod(&self, ns: &str, name: &str, node: &str) {
        self.add_pod_labelled(ns, name, node, &json!({}));
    }

    /// A pod with `labels` scheduled to `node`.
    pub(crate) fn add_pod_labelled(&self, ns: &str, name: &str, node: &str, labels: &Value) {
        self.emu.put(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        }));
    }

    /// The CiliumNode, if it exists.
    pub(crate) fn cilium_node(&self, name: &str) -> Option<Value> {
        self.emu.get("ciliumnodes", None, name)
    }

    /// Play the operator: change the CiliumNode with `edit` and store it.
    pub(crate) fn operator_edit(&self, name: &str, edit: impl FnOnce(&mut Value)) {
        let mut node = self
            .cilium_node(name)
            .unwrap_or_else(|| panic!("CiliumNode {name} does not exist"));
        edit(&mut node);
        self.emu.put(node);
    }

    /// An agent for `node` with `flags`, not started.
    pub(crate) fn agent(&self, node: &str, flags: &[&str]) -> Agent {
        let mut all = vec!["--ipam-cilium-node-update-rate", "1s"];
        all.extend_from_slice(flags);
        Agent::kube(&self.kubeconfig, node, &all)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

pub(crate) use weft_tests::wait_for;

/// `spec.ipam.pool` with `count` addresses from `10.88.0.10` up (what a CRD-mode operator
/// hands a node).
pub(crate) fn crd_pool(count: u8) -> Value {
    let mut pool = serde_json::Map::new();
    for i in 0..count {
        pool.insert(
            format!("10.88.0.{}", 10 + u32::from(i)),
            json!({"resource": "eni-1"}),
        );
    }
    Value::Object(pool)
}

/// Wait until the agent has written `spec.ipam.pools.requested` of `node` asking for at least
/// `needed` IPv4 addresses of `pool`: the agent's write a test waits for before it checks what
/// that write kept (instead of sleeping and hoping one happened).
pub(crate) fn wait_requested(cluster: &Cluster, node: &str, pool: &str, needed: u64) {
    wait_for(
        &format!("{node} to request {needed} addresses of pool {pool}"),
        DEBOUNCE * 10,
        || {
            let node = cluster.cilium_node(node).ok_or("no CiliumNode")?;
            let requested = &node["spec"]["ipam"]["pools"]["requested"];
            requested
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["pool"] == pool && r["needed"]["ipv4-addrs"].as_u64() >= Some(needed))
                .then_some(())
                .ok_or_else(|| requested.to_string())
        },
    );
}

/// Wire pods `pad-<n>` on `node` (in namespace `default`) until the node uses 9 addresses
/// with the router's and its `used` others: with a pre-allocation of 8 its demand then grows
/// from 16 to 24, which the agent wants to write.
pub(crate) fn grow_demand_to_24(
    cluster: &Cluster,
    agent: &Agent,
    node: &str,
    used: usize,
) -> Vec<Pod> {
    (used + 1..9)
        .map(|i| {
            let name = format!("pad-{i}");
            cluster.add_pod("default", &name, node);
            add(agent, "default", &name)
        })
        .collect()
}

/// `status.ipam.used` as (ip → owner).
pub(crate) fn used(node: &Value) -> std::collections::BTreeMap<String, String> {
    node["status"]["ipam"]["used"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(ip, v)| {
            (
                ip.clone(),
                v["owner"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

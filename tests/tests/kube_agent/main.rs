//! The real `weft-agent` against the Kubernetes API emulator (through a kubeconfig, so the
//! agent's own kube-rs client code is what is exercised), with pods wired by the real
//! `weft-cni` in network namespaces: node discovery, the operator's side of the CRD and
//! multi-pool handshakes, churn under injected faults, a restart while the API server is down,
//! missing permissions, and a CiliumNode another writer broke. Runs as root.

mod faults;
mod lifecycle;
mod metrics;
mod reliability;
mod restarts;
mod two_nodes;

use std::{
    net::IpAddr,
    path::PathBuf,
    time::{Duration, Instant},
};

use ipnet::IpNet;
use serde_json::{Value, json};
use weft_tests::{
    NamedNetNs,
    agent::{Agent, CniCall},
    kube::Emulator,
    unique,
};

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

/// A pod wired through weft-cni.
#[derive(Debug)]
pub(crate) struct Pod {
    pub(crate) netns: NamedNetNs,
    pub(crate) id: String,
    pub(crate) ns: String,
    pub(crate) name: String,
    pub(crate) ips: Vec<IpAddr>,
}

pub(crate) fn ips_of(call: &CniCall) -> Vec<IpAddr> {
    call.stdout["ips"]
        .as_array()
        .unwrap_or_else(|| panic!("no ips in result: {}", call.stdout))
        .iter()
        .map(|ip| {
            ip["address"]
                .as_str()
                .expect("address")
                .parse::<IpNet>()
                .expect("cidr")
                .addr()
        })
        .collect()
}

/// ADD `ns/name`; panics with the agent's answer when it fails. "Try again later" (11: the
/// pool has not arrived from the API server yet) is retried for a while, as kubelet does.
pub(crate) fn add(agent: &Agent, ns: &str, name: &str) -> Pod {
    let netns = NamedNetNs::new();
    let id = unique("ctr-");
    let deadline = Instant::now() + Duration::from_secs(10);
    let call = loop {
        let call = agent.cni("ADD", &id, &netns.path().display().to_string(), (ns, name));
        if call.stdout["code"] != 11 || Instant::now() > deadline {
            break call;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(call.code, 0, "ADD {ns}/{name} failed: {}", call.stdout);
    let ips = ips_of(&call);
    Pod {
        netns,
        id,
        ns: ns.to_owned(),
        name: name.to_owned(),
        ips,
    }
}

/// DEL a pod; panics when it fails.
pub(crate) fn del(agent: &Agent, pod: &Pod) {
    let call = agent.cni(
        "DEL",
        &pod.id,
        &pod.netns.path().display().to_string(),
        (&pod.ns, &pod.name),
    );
    assert_eq!(
        call.code, 0,
        "DEL {}/{} failed: {}",
        pod.ns, pod.name, call.stdout
    );
}

/// Poll `check` until it holds or `timeout` passes; the panic shows `what` and the last state.
pub(crate) fn wait_for(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<(), String>,
) {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        match check() {
            Ok(()) => return,
            Err(state) => last = state,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out after {timeout:?} waiting for {what}; last state: {last}");
}

pub(crate) fn ping(from: &Pod, to: IpAddr) -> bool {
    from.netns
        .command("ping")
        .args(["-n", "-q", "-c", "1", "-W", "1"])
        .arg(to.to_string())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("ping")
        .success()
}

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

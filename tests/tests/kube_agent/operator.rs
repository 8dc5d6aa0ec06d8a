//! Real agents with the real `weft-operator`: node namespaces on one bridge, the API emulator
//! and the operator in the bridge's own namespace, pods wired by `weft-cni`. The operator hands
//! out cluster-pool blocks and multi-pool blocks; these scenarios check that what it writes is
//! what the agents use (distinct blocks, growing and shrinking with demand, pool selection,
//! reserved ranges, Azure NIC addresses, the cluster-pool → multi-pool migration) and that pods
//! on different nodes reach each other. Conflicts it reports must show on the CiliumNode and in
//! `weft-agent status`. The operator alone, without agents, is tested in `tests/operator`.

mod azure;
mod cluster_pool;
mod migration;
mod multi_pool;

use std::{
    collections::BTreeSet,
    process::Command,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use ipnet::IpNet;
use serde_json::{Value, json};
use weft_tests::{
    NamedNetNs, ThreadNetNs, agent::Agent, bin_path, kube::Emulator, operator::Operator, run,
    unique,
};

use super::{Cluster, Pod, ips_of, ping, two_nodes::node_ns, wait_for};

/// Where the API server (and the operator) listen, on the bridge.
const API_ADDR: &str = "192.0.2.254";

/// Node namespaces `node-1`… on one bridge (`192.0.2.<n>/24` on device `w<n>`), the API
/// server and the operator in the bridge's namespace at [`API_ADDR`].
pub(super) struct Lan {
    // Fields drop in order: the API server first, then the namespaces.
    pub(super) cluster: Cluster,
    nodes: Vec<NamedNetNs>,
    bridge: NamedNetNs,
}

impl Lan {
    /// `count` node namespaces on a fresh bridge, each with its v1.Node (InternalIP
    /// `192.0.2.<n>`, no pod CIDR: the operator hands those out).
    pub(super) fn new(count: usize) -> Self {
        let lan = node_ns();
        run(lan
            .command("ip")
            .args(["link", "add", "br0", "type", "bridge"]));
        run(lan
            .command("ip")
            .args(["addr", "add", &format!("{API_ADDR}/24"), "dev", "br0"]));
        run(lan.command("ip").args(["link", "set", "br0", "up"]));
        let cluster = {
            let _in = ThreadNetNs::enter(&lan.path());
            Cluster::with(Emulator::builder().all_interfaces().start())
        };
        // Everyone (agents and operator) reaches the API server over the bridge.
        cluster.emu.write_kubeconfig_via(
            &cluster.kubeconfig,
            &format!("http://{API_ADDR}:{}", cluster.emu.port()),
        );
        let nodes: Vec<NamedNetNs> = (1..=count)
            .map(|n| {
                let ns = node_ns();
                let (dev, port) = (format!("w{n}"), format!("p{n}"));
                run(Command::new("ip").args([
                    "link", "add", &dev, "netns", &ns.name, "type", "veth", "peer", "name", &port,
                    "netns", &lan.name,
                ]));
                run(lan
                    .command("ip")
                    .args(["link", "set", &port, "master", "br0", "up"]));
                run(ns.command("ip").args([
                    "addr",
                    "add",
                    &format!("192.0.2.{n}/24"),
                    "dev",
                    &dev,
                ]));
                run(ns.command("ip").args(["link", "set", &dev, "up"]));
                cluster.add_node_at(&node_name(n), &format!("192.0.2.{n}"), "", None);
                ns
            })
            .collect();
        Self {
            cluster,
            nodes,
            bridge: lan,
        }
    }

    /// The agent of node `n` (1-based) with `flags` plus direct routes and BPF masquerade on
    /// its link, spawned (not waited for).
    pub(super) fn agent(&self, n: usize, flags: &[&str]) -> Agent {
        let dev = format!("w{n}");
        let mut all = flags.to_vec();
        all.extend([
            "--auto-direct-node-routes",
            "true",
            "--enable-bpf-masquerade",
            "true",
            "--devices",
            dev.as_str(),
        ]);
        let mut agent = self.cluster.agent(&node_name(n), &all);
        let _in = ThreadNetNs::enter(&self.nodes[n - 1].path());
        agent.spawn();
        agent
    }

    /// Restart the agent of node `n` (1-based) in IPAM mode `ipam`, keeping its other flags
    /// and its state; wait until it serves.
    pub(super) fn restart_agent(&self, n: usize, agent: &mut Agent, ipam: &str) {
        agent.stop();
        if let Some(at) = agent.flags.iter().position(|f| f == "--ipam") {
            ipam.clone_into(&mut agent.flags[at + 1]);
        }
        {
            let _in = ThreadNetNs::enter(&self.nodes[n - 1].path());
            agent.spawn();
        }
        agent.wait_ready(Duration::from_secs(30));
    }

    /// Run `f` in the bridge's namespace (where the API server and the operator are).
    pub(super) fn in_bridge<T>(&self, f: impl FnOnce() -> T) -> T {
        let _in = ThreadNetNs::enter(&self.bridge.path());
        f()
    }

    /// The operator with `flags`, spawned next to the API server.
    pub(super) fn operator(&self, flags: &[&str]) -> Operator {
        let mut op = Operator::new(&self.cluster.kubeconfig, flags);
        let _in = ThreadNetNs::enter(&self.bridge.path());
        op.spawn();
        op
    }

    /// Start `op` again (stopped or killed before), next to the API server.
    pub(super) fn respawn(&self, op: &mut Operator) {
        let _in = ThreadNetNs::enter(&self.bridge.path());
        op.spawn();
    }

    /// A metric of `op` (its listener is in the bridge's namespace).
    pub(super) fn metric(&self, op: &Operator, series: &str) -> Option<f64> {
        let _in = ThreadNetNs::enter(&self.bridge.path());
        op.metric(series)
    }

    /// The CiliumNode of `name`; panics if it does not exist.
    pub(super) fn cilium_node(&self, name: &str) -> Value {
        self.cluster
            .cilium_node(name)
            .unwrap_or_else(|| panic!("no CiliumNode {name}"))
    }

    /// A pod in `ns` scheduled to node `n` with `annotations`, then ADDed through its agent
    /// (see [`add_retrying`]).
    pub(super) fn pod(
        &self,
        agent: &Agent,
        ns: &str,
        name: &str,
        n: usize,
        annotations: &Value,
    ) -> Pod {
        self.cluster.emu.put(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "spec": {"nodeName": node_name(n), "containers": [{"name": "c", "image": "busybox"}]},
        }));
        let node = node_name(n);
        add_retrying(agent, ns, name).unwrap_or_else(|error| {
            panic!(
                "{error}\nCiliumNode {node}: {}",
                self.cluster
                    .cilium_node(&node)
                    .map_or_else(|| "absent".to_owned(), |n| n.to_string())
            )
        })
    }
}

/// ADD `ns/name` in a fresh namespace, retried for up to 30 s (as kubelet retries a sandbox)
/// while the agent answers "try again later" (no block yet) or that its blocks are exhausted
/// (it has asked the operator for another one, which takes a debounce interval and a write);
/// the last answer when it fails otherwise or for longer.
fn add_retrying(agent: &Agent, ns: &str, name: &str) -> Result<Pod, String> {
    let netns = NamedNetNs::new();
    let id = unique("ctr-");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let call = agent.cni("ADD", &id, &netns.path().display().to_string(), (ns, name));
        if call.code == 0 {
            return Ok(Pod {
                ips: ips_of(&call),
                netns,
                id,
                ns: ns.to_owned(),
                name: name.to_owned(),
            });
        }
        let transient = call.stdout["code"] == 11
            || call.stdout["details"]
                .as_str()
                .is_some_and(|d| d.contains("exhausted"));
        if !transient || Instant::now() > deadline {
            return Err(format!("ADD {ns}/{name} failed: {}", call.stdout));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The name of node `n` (1-based).
pub(super) fn node_name(n: usize) -> String {
    format!("node-{n}")
}

/// `status.ipam.operator-status.error` of a CiliumNode (empty: none).
pub(super) fn operator_error(node: &Value) -> String {
    node["status"]["ipam"]["operator-status"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `spec.ipam.podCIDRs` of a CiliumNode.
pub(super) fn pod_cidrs(node: &Value) -> Vec<String> {
    strings(&node["spec"]["ipam"]["podCIDRs"])
}

/// The CIDRs of `pool` in `spec.ipam.pools.allocated` of a CiliumNode.
pub(super) fn allocated(node: &Value, pool: &str) -> Vec<IpNet> {
    node["spec"]["ipam"]["pools"]["allocated"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["pool"] == pool)
        .flat_map(|e| strings(&e["cidrs"]))
        .map(|c| c.parse().unwrap_or_else(|e| panic!("allocated {c}: {e}")))
        .collect()
}

/// The IPv4 addresses `pool` asks for in `spec.ipam.pools.requested` of a CiliumNode.
pub(super) fn requested(node: &Value, pool: &str) -> u64 {
    node["spec"]["ipam"]["pools"]["requested"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["pool"] == pool)
        .and_then(|e| e["needed"]["ipv4-addrs"].as_u64())
        .unwrap_or(0)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect()
}

/// Whether `cidr` (text) holds the pod's first address.
pub(super) fn in_cidr(pod: &Pod, cidr: &str) -> bool {
    let net: IpNet = cidr.parse().unwrap_or_else(|e| panic!("{cidr}: {e}"));
    net.contains(&pod.ips[0])
}

/// `weft-agent status -o json` of `agent` (it exits 1 when degraded, the JSON is the same).
pub(super) fn agent_status(agent: &Agent) -> Value {
    let out = Command::new(bin_path("weft-agent"))
        .args(["status", "-o", "json", "--socket"])
        .arg(&agent.socket)
        .output()
        .expect("weft-agent status");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "weft-agent status is not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Wait until every pod answers a ping from every other pod of `pods`.
pub(super) fn all_reach_each_other(pods: &[&Pod], timeout: Duration) {
    wait_for("every pod to reach every other pod", timeout, || {
        let silent: Vec<String> = pods
            .iter()
            .flat_map(|a| pods.iter().map(move |b| (a, b)))
            .filter(|(a, b)| a.name != b.name && !ping(a, b.ips[0]))
            .map(|(a, b)| format!("{} -> {} ({})", a.name, b.name, b.ips[0]))
            .collect();
        if silent.is_empty() {
            Ok(())
        } else {
            Err(format!("no answer: {silent:?}"))
        }
    });
}

/// Every distinct value `probe` returns while `during` runs (probed every 20 ms on another
/// thread, so a state that lasts only a moment — an error the operator reports and then heals
/// — is seen even when the test thread is busy); `during`'s result with them.
pub(super) fn record<T: Send>(
    probe: impl Fn() -> Vec<String> + Sync,
    during: impl FnOnce() -> T,
) -> (T, BTreeSet<String>) {
    /// Stops the probe when `during` returns or panics (the scope waits for the probe).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let seen = s.spawn(|| {
            let mut seen = BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                seen.extend(probe());
                std::thread::sleep(Duration::from_millis(20));
            }
            seen.extend(probe());
            seen
        });
        let out = {
            let _stop = Stop(&stop);
            during()
        };
        (out, seen.join().expect("recorder thread"))
    })
}

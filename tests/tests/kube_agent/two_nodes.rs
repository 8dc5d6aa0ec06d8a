//! Two nodes (two network namespaces joined by a veth, each running its own `weft-agent`
//! against the same API emulator): pods on different nodes reach each other through the routes
//! `auto-direct-node-routes` installs, never masqueraded, and each node's IPCache holds the other
//! node's pods with the identities their agents published (one identity per label set, shared
//! through CiliumIdentities).

use std::{collections::BTreeMap, process::Command, time::Duration};

use serde_json::{Value, json};
use weft_tests::{
    NamedNetNs, ThreadNetNs, agent::Agent, bin_path, kube::Emulator, require_root, run,
};

use super::{Cluster, add, del, ping, wait_for};

/// A node namespace that forwards IPv4 (as Kubernetes nodes do).
pub(super) fn node_ns() -> NamedNetNs {
    let ns = NamedNetNs::new();
    run(ns.command("ip").args(["link", "set", "lo", "up"]));
    run(ns.command("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
    ns
}

pub(super) fn bpf_list(agent: &Agent, map: &str) -> Vec<Value> {
    let out = run(Command::new(bin_path("weft-agent"))
        .arg("--pin-dir")
        .arg(&agent.pin_dir)
        .args(["bpf", map, "list", "-o", "json"]));
    serde_json::from_slice::<Value>(&out.stdout)
        .expect("JSON rows")
        .as_array()
        .expect("array")
        .clone()
}

/// The identity each CiliumEndpoint carries, by pod name.
fn published(cluster: &Cluster) -> BTreeMap<String, u64> {
    cluster
        .emu
        .list("ciliumendpoints")
        .iter()
        .filter_map(|c| {
            Some((
                c["metadata"]["name"].as_str()?.to_owned(),
                c["status"]["identity"]["id"].as_u64()?,
            ))
        })
        .collect()
}

/// Two node namespaces joined by a veth (`192.0.2.1` / `192.0.2.2`), the API server on node 1,
/// and an agent per node (kubernetes IPAM, direct routes, BPF masquerade on the link), ready.
pub(super) struct TwoNodes {
    // Fields drop in order: agents first, then the API server, then the namespaces.
    pub(super) a1: Agent,
    pub(super) a2: Agent,
    pub(super) cluster: Cluster,
    remote_kubeconfig: std::path::PathBuf,
    pub(super) n1: NamedNetNs,
    pub(super) n2: NamedNetNs,
}

impl Drop for TwoNodes {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.remote_kubeconfig);
    }
}

pub(super) fn two_nodes() -> TwoNodes {
    let n1 = node_ns();
    let n2 = node_ns();
    // The API server lives on node 1 (reached there over loopback, from node 2 over the link).
    let cluster = {
        let _in = ThreadNetNs::enter(&n1.path());
        Cluster::with(Emulator::builder().all_interfaces().start())
    };
    let remote_kubeconfig = cluster.kubeconfig.with_extension("node-2");
    cluster.emu.write_kubeconfig_via(
        &remote_kubeconfig,
        &format!("http://192.0.2.1:{}", cluster.emu.port()),
    );
    run(Command::new("ip").args([
        "link", "add", "w1", "netns", &n1.name, "type", "veth", "peer", "name", "w2", "netns",
        &n2.name,
    ]));
    for (ns, dev, ip) in [(&n1, "w1", "192.0.2.1/24"), (&n2, "w2", "192.0.2.2/24")] {
        run(ns.command("ip").args(["addr", "add", ip, "dev", dev]));
        run(ns.command("ip").args(["link", "set", dev, "up"]));
    }
    cluster.add_node_at("node-1", "192.0.2.1", "", Some("10.1.0.0/24"));
    cluster.add_node_at("node-2", "192.0.2.2", "", Some("10.2.0.0/24"));
    cluster.add_pod_labelled("web", "a", "node-1", &json!({"app": "web"}));
    cluster.add_pod_labelled("web", "b", "node-2", &json!({"app": "web"}));
    cluster.add_pod_labelled("web", "c", "node-2", &json!({"app": "db"}));

    let flags = |dev: &'static str| {
        [
            "--ipam",
            "kubernetes",
            "--auto-direct-node-routes",
            "true",
            "--enable-bpf-masquerade",
            "true",
            "--devices",
            dev,
        ]
    };
    let mut a1 = cluster.agent("node-1", &flags("w1"));
    let mut a2 = cluster.agent("node-2", &flags("w2"));
    a2.kubeconfig = Some(remote_kubeconfig.clone());
    {
        let _in = ThreadNetNs::enter(&n1.path());
        a1.spawn();
    }
    {
        let _in = ThreadNetNs::enter(&n2.path());
        a2.spawn();
    }
    a1.wait_ready(Duration::from_secs(30));
    a2.wait_ready(Duration::from_secs(30));
    TwoNodes {
        a1,
        a2,
        cluster,
        remote_kubeconfig,
        n1,
        n2,
    }
}

#[test]
fn pods_on_two_nodes_reach_each_other_unmasqueraded_with_identities_from_the_ipcache() {
    require_root();
    let TwoNodes {
        cluster,
        n1,
        a1,
        a2,
        ..
    } = &two_nodes();
    let pa = add(a1, "web", "a");
    let pb = add(a2, "web", "b");
    let pc = add(a2, "web", "c");
    assert!(pa.ips[0].to_string().starts_with("10.1.0."), "{:?}", pa.ips);
    assert!(pb.ips[0].to_string().starts_with("10.2.0."), "{:?}", pb.ips);

    // Each node routes the other's pod CIDR via its address.
    wait_for("node routes", Duration::from_secs(10), || {
        let out = run(n1.command("ip").args(["route", "show", "10.2.0.0/24"]));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("via 192.0.2.2").then_some(()).ok_or(text)
    });
    wait_for(
        "pods on different nodes to reach each other",
        Duration::from_secs(10),
        || {
            (ping(&pa, pb.ips[0]) && ping(&pb, pa.ips[0]) && ping(&pa, pc.ips[0]))
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        },
    );

    // One identity per label set, shared by both nodes; different labels, different identity.
    // Two agents may both create an identity for a new label set at the same moment (as with
    // Cilium's CRD allocation); both then settle on the lowest, so their endpoints agree.
    wait_for(
        "three CiliumEndpoints with agreeing identities",
        Duration::from_secs(10),
        || {
            let ids = published(cluster);
            (ids.len() == 3 && ids.values().all(|id| *id >= 256) && ids["a"] == ids["b"])
                .then_some(())
                .ok_or_else(|| format!("{ids:?}"))
        },
    );
    let ids = published(cluster);
    assert_ne!(ids["a"], ids["c"]);
    let identities: Vec<(String, String)> = cluster
        .emu
        .list("ciliumidentities")
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                i["security-labels"]["k8s:app"].to_string(),
            )
        })
        .collect();
    let label_sets: std::collections::BTreeSet<&String> =
        identities.iter().map(|(_, l)| l).collect();
    assert_eq!(label_sets.len(), 2, "{identities:?}");

    // Node 1's IPCache holds node 2's pods at their identities, tunnel endpoint node 2, and
    // node 2's address as remote-node; its own pod at the shared identity.
    wait_for(
        "node 1's IPCache to know node 2's pods",
        Duration::from_secs(10),
        || {
            let rows = bpf_list(a1, "ipcache");
            let find = |prefix: String| rows.iter().find(|r| r["prefix"] == prefix).cloned();
            let b = find(format!("{}/32", pb.ips[0])).ok_or("no entry for b")?;
            let c = find(format!("{}/32", pc.ips[0])).ok_or("no entry for c")?;
            let a = find(format!("{}/32", pa.ips[0])).ok_or("no entry for a")?;
            let node2 = find("192.0.2.2/32".to_owned()).ok_or("no entry for node 2")?;
            let ok = b["identity"] == ids["b"]
                && c["identity"] == ids["c"]
                && a["identity"] == ids["a"]
                && b["tunnel_endpoint"] == "192.0.2.2"
                && node2["identity"] == 6;
            ok.then_some(()).ok_or_else(|| format!("{rows:?}"))
        },
    );

    // Never masqueraded: pod-to-pod traffic left no SNAT entry on either node, from the first
    // ping on (a remote pod CIDR is a cluster destination before its pods are published).
    assert!(ping(&pa, pb.ips[0]));
    for agent in [a1, a2] {
        // (Entries of kind `host` track the node's own connections, e.g. to the API server.)
        let nat: Vec<Value> = bpf_list(agent, "nat")
            .into_iter()
            .filter(|e| e["kind"] == "snat")
            .collect();
        assert!(
            nat.is_empty(),
            "pod-to-pod traffic was masqueraded: {nat:?}"
        );
    }
}

/// A pod of node 2 goes away (its CiliumEndpoint with it) while node 1's agent is down: the
/// restarted agent removes the pod's IPCache entry, which the pinned map still held, before
/// it serves; everything still in the cluster stays.
#[test]
fn a_remote_pod_gone_while_the_agent_was_down_leaves_no_ipcache_entry() {
    require_root();
    let mut nodes = two_nodes();
    let pb = add(&nodes.a2, "web", "b");
    let pc = add(&nodes.a2, "web", "c");
    let entry = |rows: &[Value], ip: std::net::IpAddr| {
        rows.iter()
            .find(|r| r["prefix"] == format!("{ip}/32"))
            .cloned()
    };
    wait_for(
        "node 1's IPCache to know node 2's pods",
        Duration::from_secs(10),
        || {
            let rows = bpf_list(&nodes.a1, "ipcache");
            (entry(&rows, pb.ips[0]).is_some() && entry(&rows, pc.ips[0]).is_some())
                .then_some(())
                .ok_or_else(|| format!("{rows:?}"))
        },
    );
    let c_before = entry(&bpf_list(&nodes.a1, "ipcache"), pc.ips[0]);

    nodes.a1.stop();
    del(&nodes.a2, &pb);
    wait_for(
        "node 2 to delete b's CiliumEndpoint",
        Duration::from_secs(10),
        || {
            let names: Vec<String> = nodes
                .cluster
                .emu
                .list("ciliumendpoints")
                .iter()
                .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
                .collect();
            (!names.iter().any(|n| n == "b"))
                .then_some(())
                .ok_or_else(|| format!("{names:?}"))
        },
    );
    let rows = bpf_list(&nodes.a1, "ipcache");
    assert!(
        entry(&rows, pb.ips[0]).is_some(),
        "the pinned map keeps b's entry while the agent is down: {rows:?}"
    );

    {
        let _in = ThreadNetNs::enter(&nodes.n1.path());
        nodes.a1.spawn();
    }
    nodes.a1.wait_ready(Duration::from_secs(30));
    // Start-up applies the cluster before the agent serves: no waiting here.
    let rows = bpf_list(&nodes.a1, "ipcache");
    assert_eq!(
        entry(&rows, pb.ips[0]),
        None,
        "b's entry outlived its pod: {rows:?}"
    );
    assert_eq!(
        entry(&rows, pc.ips[0]),
        c_before,
        "c's entry stays as it was"
    );
    assert!(
        rows.iter()
            .any(|r| r["prefix"] == "192.0.2.2/32" && r["identity"] == 6),
        "node 2 stays a remote node: {rows:?}"
    );
}

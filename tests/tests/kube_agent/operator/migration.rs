//! Cluster-pool → multi-pool with live pods on three nodes: the dry run lists the moves, the
//! operator makes them with the agents untouched, a restarted agent keeps its pods'
//! addresses, nodes in both modes keep reaching each other and serving new pods, and once
//! every agent restarted a pod of a second pool reaches them all.

use std::{process::Command, time::Duration};

use serde_json::json;
use weft_tests::{agent::Agent, bin_path, require_root};

use super::{Lan, all_reach_each_other, allocated, in_cidr, node_name, pod_cidrs, requested};
use crate::{ips_of, ping, wait_for};

const CLUSTER_CIDR: &str = "10.246.0.0/16";

const CLUSTER_POOL: [&str; 6] = [
    "--ipam",
    "cluster-pool",
    "--cluster-pool-ipv4-cidr",
    CLUSTER_CIDR,
    "--cluster-pool-ipv4-mask-size",
    "24",
];

const MULTI_POOL: [&str; 3] = [
    "--ipam",
    "multi-pool",
    "--enable-cluster-pool-to-multi-pool-migration",
];

/// The dry run, from the API server's namespace, lists exactly the move of each node's block.
fn dry_run_lists(lan: &Lan, blocks: &[String]) {
    let out = lan.in_bridge(|| {
        Command::new(bin_path("weft-operator"))
            .args(["migrate", "cluster-pool-to-multi-pool", "--dry-run"])
            .arg("--kubeconfig")
            .arg(&lan.cluster.kubeconfig)
            .env_remove("KUBECONFIG")
            .output()
            .expect("the dry run")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let moves: Vec<String> = (1..=3)
        .map(|n| format!("{}: move {}", node_name(n), blocks[n - 1]))
        .collect();
    let listed: Vec<String> = stdout
        .lines()
        .filter(|l| l.contains(": move "))
        .map(str::to_owned)
        .collect();
    assert_eq!(listed, moves, "{stdout}");
}

/// Each node's block shows in the default pool's `allocated`, and `podCIDRs` is gone.
fn wait_migrated(lan: &Lan, blocks: &[String]) {
    for (n, block) in (1..=3).zip(blocks) {
        let name = node_name(n);
        wait_for(&format!("{name} migrated"), Duration::from_secs(30), || {
            let node = lan.cilium_node(&name);
            let held = allocated(&node, "default");
            if pod_cidrs(&node).is_empty() && held.len() == 1 && held[0].to_string() == *block {
                Ok(())
            } else {
                Err(node["spec"]["ipam"].to_string())
            }
        });
    }
}

#[test]
fn pods_keep_their_addresses_and_reach_each_other_through_the_migration() {
    require_root();
    let lan = Lan::new(3);
    let mut op = lan.operator(&CLUSTER_POOL);
    let mut agents: Vec<Agent> = (1..=3)
        .map(|n| lan.agent(n, &["--ipam", "cluster-pool"]))
        .collect();
    for agent in &mut agents {
        agent.wait_ready(Duration::from_secs(30));
    }
    let mut pods: Vec<_> = agents
        .iter()
        .enumerate()
        .map(|(i, agent)| lan.pod(agent, "web", &format!("p{}", i + 1), i + 1, &json!({})))
        .collect();
    all_reach_each_other(&pods.iter().collect::<Vec<_>>(), Duration::from_secs(30));
    let blocks: Vec<String> = (1..=3)
        .map(|n| pod_cidrs(&lan.cilium_node(&node_name(n)))[0].clone())
        .collect();

    lan.cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
        "metadata": {"name": "default"},
        "spec": {"ipv4": {"cidrs": [CLUSTER_CIDR], "maskSize": 24}},
    }));
    dry_run_lists(&lan, &blocks);

    // The operator switches; the agents are left alone.
    assert_eq!(op.stop(), Some(0), "{}", op.log());
    let _op = lan.operator(&MULTI_POOL);
    wait_migrated(&lan, &blocks);
    all_reach_each_other(&pods.iter().collect::<Vec<_>>(), Duration::from_secs(30));

    // node-1's agent restarts in multi-pool: its pod keeps its address and is reached again.
    lan.restart_agent(1, &mut agents[0], "multi-pool");
    let again = agents[0].cni(
        "ADD",
        &pods[0].id,
        &pods[0].netns.path().display().to_string(),
        ("web", "p1"),
    );
    assert_eq!(again.code, 0, "{}", again.stdout);
    assert_eq!(ips_of(&again), pods[0].ips, "p1 keeps its address");
    wait_for(
        "p1 to answer within a second of ready",
        Duration::from_secs(1),
        || {
            ping(&pods[1], pods[0].ips[0])
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        },
    );
    all_reach_each_other(&pods.iter().collect::<Vec<_>>(), Duration::from_secs(10));
    wait_for(
        "node-1 asks for the default pool",
        Duration::from_secs(30),
        || {
            let asked = requested(&lan.cilium_node("node-1"), "default");
            if asked > 0 {
                Ok(())
            } else {
                Err(format!("{asked}"))
            }
        },
    );
    // New pods on the migrated node and on a node still in cluster-pool.
    let q1 = lan.pod(&agents[0], "web", "q1", 1, &json!({}));
    let q2 = lan.pod(&agents[1], "web", "q2", 2, &json!({}));
    assert!(
        in_cidr(&q1, &blocks[0]),
        "{:?} not in {}",
        q1.ips,
        blocks[0]
    );
    assert!(
        in_cidr(&q2, &blocks[1]),
        "{:?} not in {}",
        q2.ips,
        blocks[1]
    );
    pods.extend([q1, q2]);
    all_reach_each_other(&pods.iter().collect::<Vec<_>>(), Duration::from_secs(30));

    // The rest restart; then a pod may ask for a second pool.
    for n in [2, 3] {
        lan.restart_agent(n, &mut agents[n - 1], "multi-pool");
    }
    lan.cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
        "metadata": {"name": "second"},
        "spec": {"ipv4": {"cidrs": ["10.247.0.0/16"], "maskSize": 24}},
    }));
    let other = lan.pod(
        &agents[2],
        "web",
        "r3",
        3,
        &json!({"ipam.cilium.io/ip-pool": "second"}),
    );
    assert!(in_cidr(&other, "10.247.0.0/16"), "{:?}", other.ips);
    pods.push(other);
    all_reach_each_other(&pods.iter().collect::<Vec<_>>(), Duration::from_secs(30));
}

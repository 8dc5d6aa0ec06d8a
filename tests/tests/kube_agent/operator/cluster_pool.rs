//! Cluster-pool mode: the operator hands each node a distinct `/24` of the cluster CIDR, the
//! agents wait for it, allocate from it and route to the other nodes' blocks; a conflicting
//! `podCIDRs` is reported in `operator-status` (and by `weft-agent status` on an agent's own
//! node) until the operator has healed it.

use std::{collections::BTreeSet, time::Duration};

use serde_json::{Value, json};
use weft_tests::{agent::Agent, require_root};

use super::{
    Lan, agent_status, all_reach_each_other, in_cidr, node_name, operator_error, pod_cidrs, record,
};
use crate::wait_for;

const CLUSTER_CIDR: &str = "10.244.0.0/16";

const OPERATOR: [&str; 6] = [
    "--ipam",
    "cluster-pool",
    "--cluster-pool-ipv4-cidr",
    CLUSTER_CIDR,
    "--cluster-pool-ipv4-mask-size",
    "24",
];

/// Spawn an agent per node of `lan` in cluster-pool mode and wait until each serves.
fn agents(lan: &Lan, count: usize) -> Vec<Agent> {
    let mut agents: Vec<Agent> = (1..=count)
        .map(|n| lan.agent(n, &["--ipam", "cluster-pool"]))
        .collect();
    for agent in &mut agents {
        agent.wait_ready(Duration::from_secs(30));
    }
    agents
}

/// The one block of each of `names` once every one has exactly one.
fn blocks(lan: &Lan, names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    wait_for("every node to get a block", Duration::from_secs(30), || {
        out = names
            .iter()
            .filter_map(|n| lan.cluster.cilium_node(n))
            .filter_map(|n| {
                let cidrs = pod_cidrs(&n);
                (cidrs.len() == 1).then(|| cidrs[0].clone())
            })
            .collect();
        if out.len() == names.len() {
            Ok(())
        } else {
            Err(format!("{out:?}"))
        }
    });
    out
}

#[test]
fn three_nodes_get_distinct_blocks_and_their_pods_reach_each_other() {
    require_root();
    let lan = Lan::new(3);
    // Leader election stays on: the operator takes the Lease the emulator serves.
    let op = lan.operator(&OPERATOR);
    let agents = agents(&lan, 3);
    let names: Vec<String> = (1..=3).map(node_name).collect();
    let blocks = blocks(&lan, &names);
    let distinct: BTreeSet<&String> = blocks.iter().collect();
    assert_eq!(distinct.len(), 3, "{blocks:?}");
    let cluster: ipnet::IpNet = CLUSTER_CIDR.parse().expect("cidr");
    for block in &blocks {
        let net: ipnet::IpNet = block.parse().expect("block");
        assert!(
            net.prefix_len() == 24 && cluster.contains(&net),
            "{blocks:?}"
        );
    }

    let pods: Vec<_> = agents
        .iter()
        .enumerate()
        .map(|(i, agent)| lan.pod(agent, "web", &format!("p{}", i + 1), i + 1, &json!({})))
        .collect();
    for (pod, block) in pods.iter().zip(&blocks) {
        assert!(
            in_cidr(pod, block),
            "{} got {:?}, not from its node's block {block}",
            pod.name,
            pod.ips
        );
    }
    all_reach_each_other(&pods.iter().collect::<Vec<_>>(), Duration::from_secs(30));

    assert_eq!(
        lan.metric(&op, "weft_operator_leader"),
        Some(1.0),
        "the operator leads through its Lease"
    );
    assert_eq!(
        lan.metric(&op, "weft_operator_ipam_nodes{category=\"total\"}"),
        Some(3.0)
    );
    for name in &names {
        assert_eq!(operator_error(&lan.cilium_node(name)), "", "{name}");
    }
}

/// What the probe of the conflict test sees: the errors on the CiliumNodes and in the agent's
/// status report.
fn conflict_probe(lan: &Lan, agent: &Agent, ghost: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for name in [ghost, "node-1"] {
        if let Some(node) = lan.cluster.cilium_node(name) {
            let error = operator_error(&node);
            if !error.is_empty() {
                seen.push(format!("{name}: {error}"));
            }
        }
    }
    let status = agent_status(agent);
    if let Some(error) = status["ipam"]["operator_error"].as_str() {
        seen.push(format!("status: {error}"));
    }
    for problem in status["problems"].as_array().into_iter().flatten() {
        if let Some(p) = problem.as_str().filter(|p| p.starts_with("operator: ")) {
            seen.push(format!("problem: {p}"));
        }
    }
    seen
}

#[test]
fn a_conflicting_pod_cidr_is_reported_on_the_node_and_in_agent_status_then_healed() {
    require_root();
    let lan = Lan::new(1);
    let mut flags = OPERATOR.to_vec();
    flags.push("--leader-election=false");
    let _op = lan.operator(&flags);
    // A node without an agent here, its CiliumNode created as its agent would.
    let other = "node-9";
    lan.cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": other}, "spec": {"ipam": {}},
    }));
    let agents = agents(&lan, 1);
    let agent = &agents[0];
    let held = blocks(&lan, &["node-1".to_owned(), other.to_owned()]);
    let (own, others) = (held[0].clone(), held[1].clone());
    let before = lan.pod(agent, "web", "a", 1, &json!({}));
    assert!(in_cidr(&before, &own), "{:?} not in {own}", before.ips);

    // A fourth CiliumNode, written by hand with node-1's block: reported on it, stripped,
    // and replaced by a block of its own; node-1 keeps its block and sees no error.
    let ghost = "ghost";
    let ((), seen) = record(
        || conflict_probe(&lan, agent, ghost),
        || {
            lan.cluster.emu.put(json!({
                "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                "metadata": {"name": ghost}, "spec": {"ipam": {"podCIDRs": [own]}},
            }));
            wait_for(
                "the ghost to get a block of its own and its error to clear",
                Duration::from_secs(30),
                || {
                    let node = lan.cilium_node(ghost);
                    let cidrs = pod_cidrs(&node);
                    let ok = cidrs.len() == 1
                        && cidrs[0] != own
                        && cidrs[0] != others
                        && operator_error(&node).is_empty();
                    ok.then_some(()).ok_or_else(|| node.to_string())
                },
            );
        },
    );
    let want = format!("{ghost}: requested CIDR ({own}) is already allocated");
    assert!(seen.contains(&want), "{want:?} never shown: {seen:?}");
    assert!(
        seen.iter().all(|s| s.starts_with("ghost: ")),
        "only the ghost had an error: {seen:?}"
    );
    assert_eq!(
        pod_cidrs(&lan.cilium_node("node-1")),
        std::slice::from_ref(&own)
    );

    // node-1's own CiliumNode is edited to list node-9's block: the operator reports the
    // conflict there (the agent shows it), puts node-1's block back and clears the error.
    let ((), seen) = record(
        || conflict_probe(&lan, agent, ghost),
        || {
            lan.cluster.operator_edit("node-1", |n| {
                n["spec"]["ipam"]["podCIDRs"] = json!([others]);
            });
            wait_for(
                "node-1's block back, its error cleared and seen so by the agent",
                Duration::from_secs(30),
                || {
                    let node = lan.cilium_node("node-1");
                    let status = agent_status(agent);
                    let ok = pod_cidrs(&node) == std::slice::from_ref(&own)
                        && operator_error(&node).is_empty()
                        && status["ipam"]["operator_error"].is_null()
                        && status["problems"] == Value::Array(Vec::new());
                    ok.then_some(()).ok_or_else(|| format!("{node} / {status}"))
                },
            );
        },
    );
    let conflict =
        format!("node has CIDRs allocated ([{own}]) that conflict with requested CIDRs [{others}]");
    for want in [
        format!("node-1: {conflict}"),
        format!("status: {conflict}"),
        format!("problem: operator: {conflict}"),
    ] {
        assert!(seen.contains(&want), "{want:?} never shown: {seen:?}");
    }
    assert_eq!(
        pod_cidrs(&lan.cilium_node(other)),
        std::slice::from_ref(&others)
    );

    // The agent kept allocating from its own block throughout.
    let after = lan.pod(agent, "web", "b", 1, &json!({}));
    assert!(in_cidr(&after, &own), "{:?} not in {own}", after.ips);
}

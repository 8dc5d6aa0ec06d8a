//! The agent-not-ready taint: removed from the agent's own Node once it serves CNI, other
//! taints kept, a conflicting patch read again, a missing permission named while the agent
//! keeps serving.

use std::time::Duration;

use serde_json::{Value, json};
use weft_tests::{
    ThreadNetNs,
    kube::{Answer, Verb},
    require_root,
};

use super::{Cluster, wait_for};

const NOT_READY: &str = "node.cilium.io/agent-not-ready";

/// A tainted Node as a cluster that waits for the pod network registers it.
fn tainted_node(cluster: &Cluster, name: &str) {
    let mut node = cluster.add_node(name, "", Some("10.78.0.0/24"));
    node["spec"]["taints"] = json!([
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": NOT_READY, "value": "true", "effect": "NoSchedule"},
    ]);
    cluster.emu.put(node);
}

fn taints(cluster: &Cluster, name: &str) -> Value {
    cluster
        .emu
        .get("nodes", None, name)
        .map_or(Value::Null, |n| n["spec"]["taints"].clone())
}

fn wait_untainted(cluster: &Cluster, name: &str) {
    wait_for(
        "the agent-not-ready taint to leave the Node",
        Duration::from_secs(30),
        || {
            let now = taints(cluster, name);
            (now == json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]))
                .then_some(())
                .ok_or_else(|| now.to_string())
        },
    );
}

#[test]
fn the_taint_leaves_once_the_agent_is_ready_and_others_stay() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    tainted_node(&cluster, "node-t");
    // The first patch meets a conflict, as when another writer changed the taints meanwhile.
    cluster
        .emu
        .faults()
        .inject(Some(Verb::Patch), "nodes", 1, Answer::Conflict);
    let mut agent = cluster.agent("node-t", &["--ipam", "kubernetes"]);
    agent.spawn();
    agent.wait_ready(Duration::from_secs(30));
    wait_untainted(&cluster, "node-t");
    assert_eq!(
        cluster.emu.requests().count(Verb::Patch, "nodes"),
        2,
        "one conflict, then the patch"
    );
    // The agent logs after the API server answered, so the Node may be seen untainted first.
    agent.wait_log(
        "removed the agent-not-ready taint from the Node",
        Duration::from_secs(10),
    );
}

#[test]
fn without_permission_the_agent_says_so_and_keeps_serving() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    tainted_node(&cluster, "node-u");
    cluster
        .emu
        .faults()
        .inject(Some(Verb::Patch), "nodes", u32::MAX, Answer::Forbidden);
    let mut agent = cluster.agent("node-u", &["--ipam", "kubernetes"]);
    agent.spawn();
    agent.wait_ready(Duration::from_secs(30));
    wait_for(
        "the agent to name the missing permission",
        Duration::from_secs(20),
        || {
            let log = agent.log();
            (log.contains("cannot remove the agent-not-ready taint") && log.contains("patch nodes"))
                .then_some(())
                .ok_or(log)
        },
    );
    assert!(agent.running(), "{}", agent.log());
    assert_eq!(agent.probe("/readyz"), 200);
    assert_eq!(taints(&cluster, "node-u").as_array().map(Vec::len), Some(2));
}

#[test]
fn a_configured_key_is_the_one_removed() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let mut node = cluster.add_node("node-v", "", Some("10.79.0.0/24"));
    node["spec"]["taints"] = json!([
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": "example.com/network-not-ready", "effect": "NoExecute"},
    ]);
    cluster.emu.put(node);
    let config = std::env::temp_dir().join(weft_tests::unique("weft-taint-config-"));
    std::fs::write(
        &config,
        "agent-not-ready-taint-key: example.com/network-not-ready\n",
    )
    .expect("write config");
    let mut agent = cluster.agent(
        "node-v",
        &[
            "--ipam",
            "kubernetes",
            "--config",
            config.to_str().expect("utf-8"),
        ],
    );
    agent.spawn();
    agent.wait_ready(Duration::from_secs(30));
    wait_untainted(&cluster, "node-v");
    let _ = std::fs::remove_file(config);
}

//! A CiliumNode deleted by hand while the agent runs comes back (issue 13 item 4): created again
//! with the seed and the `spec.ipam` the agent was using, without the old status, which the
//! agent then writes again; its pods keep their addresses and keep answering.

use std::time::Duration;

use serde_json::{Value, json};
use weft_tests::{ThreadNetNs, require_root};

use super::{Cluster, DEBOUNCE, add, crd_pool, ping, used, wait_for};

/// How soon the CiliumNode must be back.
const BACK_WITHIN: Duration = Duration::from_secs(5);

/// Delete the CiliumNode `name` and wait until it exists again as a new object; returns it.
fn delete_and_wait_back(cluster: &Cluster, name: &str) -> Value {
    let old = cluster
        .emu
        .remove("ciliumnodes", None, name)
        .expect("the CiliumNode existed");
    let old_uid = old["metadata"]["uid"].clone();
    let mut back = Value::Null;
    wait_for("the CiliumNode to be created again", BACK_WITHIN, || {
        let node = cluster.cilium_node(name).ok_or("absent")?;
        if node["metadata"]["uid"] == old_uid {
            return Err("still the old object".into());
        }
        back = node;
        Ok(())
    });
    back
}

/// The seed node discovery put there: labels, owner reference, instance-id, addresses.
fn seed_of(node: &Value) -> Value {
    json!([
        node["metadata"]["labels"],
        node["metadata"]["ownerReferences"],
        node["spec"]["instance-id"],
        node["spec"]["addresses"],
    ])
}

#[test]
fn cluster_pool_a_deleted_ciliumnode_comes_back_with_its_pod_cidrs() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-r", "aws:///eu-west-1a/i-0r", None);
    let mut agent = cluster.agent("node-r", &["--ipam", "cluster-pool"]);
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node("node-r")
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    // The operator's part: hand the node its block.
    cluster.operator_edit("node-r", |n| {
        n["spec"]["ipam"]["podCIDRs"] = json!(["10.66.1.0/24"]);
    });
    agent.wait_ready(Duration::from_secs(30));
    cluster.add_pod("default", "a", "node-r");
    cluster.add_pod("default", "b", "node-r");
    let a = add(&agent, "default", "a");
    let b = add(&agent, "default", "b");
    assert!(ping(&a, b.ips[0]), "a reaches b before the deletion");
    let before = cluster.cilium_node("node-r").expect("exists");

    let back = delete_and_wait_back(&cluster, "node-r");
    assert_eq!(
        back["spec"]["ipam"]["podCIDRs"],
        json!(["10.66.1.0/24"]),
        "the block the agent uses is listed again, so the operator re-occupies it: {back}"
    );
    assert_eq!(seed_of(&back), seed_of(&before), "the same seed");
    assert!(
        agent
            .log()
            .contains("CiliumNode was deleted; creating it again"),
        "{}",
        agent.log()
    );

    // The pods keep their addresses and keep answering; a new pod comes from the same block.
    assert!(ping(&a, b.ips[0]), "a still reaches b");
    assert!(ping(&b, a.ips[0]), "b still reaches a");
    cluster.add_pod("default", "c", "node-r");
    let c = add(&agent, "default", "c");
    let cidr: ipnet::IpNet = "10.66.1.0/24".parse().expect("cidr");
    assert!(cidr.contains(&c.ips[0]), "{:?}", c.ips);
    assert!(!a.ips.contains(&c.ips[0]) && !b.ips.contains(&c.ips[0]));
    assert!(ping(&c, a.ips[0]), "c reaches a");
    assert!(agent.running(), "{}", agent.log());
}

#[test]
fn crd_a_deleted_ciliumnode_comes_back_and_status_used_is_written_again() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node(
        "node-s",
        "azure:///subscriptions/S/virtualMachines/VM-S",
        None,
    );
    let mut agent = cluster.agent(
        "node-s",
        &[
            "--ipam",
            "crd",
            "--enable-health-checking",
            "false",
            "--ipam-min-allocate",
            "4",
        ],
    );
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node("node-s")
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    cluster.operator_edit("node-s", |n| n["spec"]["ipam"]["pool"] = crd_pool(8));
    agent.wait_ready(Duration::from_secs(30));
    cluster.add_pod("web", "w0", "node-s");
    let pod = add(&agent, "web", "w0");
    let ip = pod.ips[0].to_string();
    let lists_the_pod = |node: &Value| used(node).get(&ip).map(String::as_str) == Some("web/w0");
    wait_for("status.ipam.used to list the pod", DEBOUNCE * 3, || {
        let node = cluster.cilium_node("node-s").ok_or("absent")?;
        lists_the_pod(&node)
            .then_some(())
            .ok_or_else(|| node["status"].to_string())
    });
    let before = cluster.cilium_node("node-s").expect("exists");

    let back = delete_and_wait_back(&cluster, "node-s");
    assert_eq!(seed_of(&back), seed_of(&before), "the same seed");
    assert_eq!(back["spec"]["ipam"]["min-allocate"], 4);
    assert_eq!(
        back["spec"]["ipam"]["pool"],
        crd_pool(8),
        "the addresses the agent uses are listed again"
    );
    wait_for(
        "status.ipam.used to list the pod again",
        DEBOUNCE * 5,
        || {
            let node = cluster.cilium_node("node-s").ok_or("absent")?;
            lists_the_pod(&node)
                .then_some(())
                .ok_or_else(|| node["status"].to_string())
        },
    );
    assert!(
        agent
            .log()
            .contains("CiliumNode was deleted; creating it again"),
        "{}",
        agent.log()
    );
    // The pod keeps its address: a new pod gets another one.
    cluster.add_pod("web", "w1", "node-s");
    let second = add(&agent, "web", "w1");
    assert_ne!(second.ips, pod.ips);
    assert!(agent.running(), "{}", agent.log());
}

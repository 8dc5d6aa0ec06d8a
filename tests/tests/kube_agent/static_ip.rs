//! Azure IPAM on the agent side: a node asking for a static (public) IP, seeded from
//! `--ipam-static-ip-tags`, serves no pod until the operator wrote
//! `status.ipam.assigned-static-ip` (Cilium holds the CRD allocator the same way); meanwhile
//! a CNI ADD and `weft-agent status` say what the node waits for.

use std::time::Duration;

use serde_json::json;
use weft_tests::{NamedNetNs, ThreadNetNs, require_root, unique};

use super::{Cluster, add, crd_pool, operator::agent_status, wait_for};

/// What the agent says while the operator has not assigned the static IP.
const WAITING: &str = "Waiting for the operator to assign a static IP (static-ip-tags \
                       env=prod,pool=egress): status.ipam.assigned-static-ip is empty";

#[test]
fn azure_node_with_static_ip_tags_waits_for_the_operator_to_assign_the_static_ip() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node(
        "node-s",
        "azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-s",
        None,
    );
    let mut agent = cluster.agent(
        "node-s",
        &[
            "--ipam",
            "azure",
            "--enable-health-checking",
            "false",
            "--ipam-static-ip-tags",
            "pool=egress,env=prod",
        ],
    );
    agent.spawn();
    wait_for(
        "the CiliumNode seeded with the static IP tags",
        Duration::from_secs(20),
        || {
            let node = cluster.cilium_node("node-s").ok_or("no CiliumNode")?;
            let tags = &node["spec"]["ipam"]["static-ip-tags"];
            (*tags == json!({"env": "prod", "pool": "egress"}))
                .then_some(())
                .ok_or_else(|| tags.to_string())
        },
    );
    // The operator's first part: the node's addresses, but no static IP yet.
    cluster.operator_edit("node-s", |n| n["spec"]["ipam"]["pool"] = crd_pool(4));
    agent.wait_ready(Duration::from_secs(30));

    cluster.add_pod("web", "s0", "node-s");
    let netns = NamedNetNs::new();
    let id = unique("ctr-");
    let netns_path = netns.path().display().to_string();
    wait_for(
        "the ADD to be refused, naming the static IP wait",
        Duration::from_secs(20),
        || {
            let call = agent.cni("ADD", &id, &netns_path, ("web", "s0"));
            (call.code != 0 && call.stdout["code"] == 11 && call.stdout["details"] == WAITING)
                .then_some(())
                .ok_or_else(|| call.stdout.to_string())
        },
    );
    let status = agent_status(&agent);
    assert_eq!(status["ipam"]["not_ready"], WAITING, "{status}");
    let problem = format!("IPAM not ready: {WAITING}");
    assert!(
        status["problems"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| *p == problem.as_str())),
        "{status}"
    );

    // The operator's second part: the public IP.
    cluster.operator_edit("node-s", |n| {
        n["status"]["ipam"]["assigned-static-ip"] = json!("20.50.0.7");
    });
    let pod = add(&agent, "web", "s0");
    let pool: ipnet::IpNet = "10.88.0.8/29".parse().expect("cidr");
    assert!(pod.ips.iter().all(|ip| pool.contains(ip)), "{:?}", pod.ips);
    wait_for(
        "weft-agent status to report IPAM ready",
        Duration::from_secs(10),
        || {
            let status = agent_status(&agent);
            status["ipam"]["not_ready"]
                .is_null()
                .then_some(())
                .ok_or_else(|| status["ipam"].to_string())
        },
    );
}

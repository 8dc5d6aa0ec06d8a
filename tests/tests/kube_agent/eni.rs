//! ENI mode against Kubernetes: the pool is the node's ENI addresses from `status.eni.enis`
//! as the ENI operator writes them, with no CiliumPodIPPool in the cluster (Cilium's ENI mode
//! has none); node discovery from IMDS in [`imds`], the VPC CIDR as the native-routing CIDR
//! in [`native_routing`].

mod imds;
mod native_routing;

use std::time::Duration;

use serde_json::json;
use weft_tests::{ThreadNetNs, agent::add, require_root};

use super::{Cluster, wait_for};

#[test]
fn a_pod_gets_an_address_of_the_second_eni_with_no_ciliumpodippool() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-e", "aws:///us-east-1a/i-0123456789abcdef0", None);
    let mut agent = cluster.agent(
        "node-e",
        &["--ipam", "eni", "--enable-health-checking", "false"],
    );
    agent.spawn();
    wait_for("the agent's CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node("node-e")
            .map(drop)
            .ok_or_else(|| "not yet".to_owned())
    });
    // The operator's part: ENI 0 (excluded by first-interface-index 1) and ENI 1 with two
    // secondary addresses; each ENI's primary address is its `ip` only.
    cluster.operator_edit("node-e", |n| {
        n["spec"]["eni"]["first-interface-index"] = json!(1);
        n["status"]["eni"] = json!({"enis": {
            "eni-0": {
                "id": "eni-0", "ip": "10.6.0.10", "mac": "02:00:00:00:00:10",
                "subnet": {"id": "subnet-1", "cidr": "10.6.0.0/24"},
                "vpc": {"id": "vpc-1", "primary-cidr": "10.6.0.0/16"},
            },
            "eni-1": {
                "id": "eni-1", "ip": "10.6.1.20", "mac": "02:00:00:00:00:20", "number": 1,
                "subnet": {"id": "subnet-2", "cidr": "10.6.1.0/24"},
                "vpc": {"id": "vpc-1", "primary-cidr": "10.6.0.0/16"},
                "addresses": ["10.6.1.21", "10.6.1.22"],
            },
        }});
    });
    agent.wait_ready(Duration::from_secs(30));
    cluster.add_pod("default", "a", "node-e");
    let pod = add(&agent, "default", "a");
    let ip = pod.ips[0].to_string();
    assert!(
        ["10.6.1.21", "10.6.1.22"].contains(&ip.as_str()),
        "{ip}: one of ENI 1's secondary addresses\n{}",
        agent.log()
    );
}

//! The native-routing CIDR in `eni` mode (§6.1 of the IPAM spec): with BPF masquerading on and
//! no `ipv4-native-routing-cidr`, the VPC's primary CIDR from `status.eni.enis` becomes a
//! `native-routing-cidr` masquerade exclusion once the operator reports it (pods keep their
//! address inside the VPC); a configured CIDR that does not contain the VPC's is logged with
//! Cilium's text and stays in force.

use std::{process::Command, time::Duration};

use serde_json::{Value, json};
use weft_tests::{ThreadNetNs, agent::Agent, require_root, run};

use super::super::{Cluster, two_nodes::bpf_list, wait_for};

/// An eni agent masquerading through a veth as its native device, for node `node` (the IMDS reading
/// fails at once: nothing listens there).
fn masquerading_agent(cluster: &Cluster, node: &str, extra: &[&str]) -> Agent {
    run(Command::new("ip").args([
        "link", "add", "wnode", "type", "veth", "peer", "name", "wpeer",
    ]));
    run(Command::new("ip").args(["addr", "add", "192.0.2.10/24", "dev", "wnode"]));
    for dev in ["wnode", "wpeer"] {
        run(Command::new("ip").args(["link", "set", dev, "up"]));
    }
    cluster.add_node(node, "aws:///us-east-1a/i-0123456789abcdef0", None);
    let mut flags = vec![
        "--ipam",
        "eni",
        "--enable-health-checking",
        "false",
        "--enable-bpf-masquerade",
        "true",
        "--devices",
        "wnode",
        "--aws-imds-endpoint",
        "http://127.0.0.1:1",
    ];
    flags.extend_from_slice(extra);
    let mut agent = cluster.agent(node, &flags);
    agent.spawn();
    wait_for("the agent's CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node(node)
            .map(drop)
            .ok_or_else(|| "not yet".to_owned())
    });
    // The operator's part: one ENI in VPC 10.6.0.0/16 with two secondary addresses.
    cluster.operator_edit(node, |n| {
        n["status"]["eni"] = json!({"enis": {
            "eni-0": {
                "id": "eni-0", "ip": "10.6.0.10", "mac": "02:00:00:00:00:10",
                "subnet": {"id": "subnet-1", "cidr": "10.6.0.0/24"},
                "vpc": {"id": "vpc-1", "primary-cidr": "10.6.0.0/16"},
                "addresses": ["10.6.0.11", "10.6.0.12"],
            },
        }});
    });
    agent.wait_ready(Duration::from_secs(30));
    agent
}

/// The masquerade exclusions with their origin, as `weft-agent bpf masq list` prints them.
fn native_exclusions(agent: &Agent) -> Vec<String> {
    bpf_list(agent, "masq")
        .iter()
        .filter(|r| {
            r["origin"]
                .as_array()
                .is_some_and(|o| o.contains(&Value::from("native-routing-cidr")))
        })
        .filter_map(|r| r["cidr"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_vpc_cidr_becomes_the_native_routing_cidr() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let agent = masquerading_agent(&cluster, "node-nr", &[]);
    wait_for(
        "the VPC CIDR as a native-routing exclusion",
        Duration::from_secs(20),
        || {
            let found = native_exclusions(&agent);
            (found == ["10.6.0.0/16"])
                .then_some(())
                .ok_or_else(|| format!("{found:?}\n--- agent ---\n{}", agent.log()))
        },
    );
    assert!(
        agent
            .log()
            .contains("ipv4-native-routing-cidr detected from the CiliumNode's status"),
        "{}",
        agent.log()
    );
}

#[test]
fn a_configured_cidr_not_containing_the_vpc_is_reported_and_stays() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let mut agent = masquerading_agent(
        &cluster,
        "node-nr-narrow",
        &["--ipv4-native-routing-cidr", "10.6.1.0/24"],
    );
    agent.wait_log(
        "Configured native routing CIDR does not contain VPC CIDR",
        Duration::from_secs(20),
    );
    assert_eq!(native_exclusions(&agent), ["10.6.1.0/24"]);
}

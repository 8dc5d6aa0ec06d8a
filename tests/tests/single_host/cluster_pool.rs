//! Cluster-pool: `spec.ipam.podCIDRs` from `cluster-pool-ipv4-cidr`, in-process.

use ipnet::Ipv4Net;
use serde_json::json;
use std::time::Duration;

use weft_tests::{ThreadNetNs, agent::add, require_root, wait_for};

use super::{agent_with, doc, log_operated, refused_start, store_path, wait_operated};

/// The own node as a user pastes it: no podCIDRs yet, fields nobody here owns.
const NODE1: &str = "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\n  labels:\n    \
                     kubernetes.io/hostname: node1\nspec:\n  addresses:\n  - type: InternalIP\n    ip: 192.0.2.10\n  \
                     futureSpec: kept\n";

fn other_node(name: &str, cidr: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: {name}\nspec:\n  ipam:\n    \
         podCIDRs:\n    - {cidr}\n"
    )
}

const FLAGS: [&str; 8] = [
    "--ipam",
    "cluster-pool",
    "--cluster-pool-ipv4-cidr",
    "10.240.0.0/16",
    "--cluster-pool-ipv4-mask-size",
    "24",
    "--ipam-cilium-node-update-rate",
    "500ms",
];

#[test]
fn a_node_without_pod_cidrs_gets_a_block_no_other_node_holds() {
    require_root();
    let _node = ThreadNetNs::new();
    let node2 = other_node("node2", "10.240.0.0/24");
    let node3 = other_node("node3", "10.240.1.0/24");
    let mut agent = agent_with(
        &[
            ("ciliumnodes/node1.yaml", NODE1),
            ("ciliumnodes/node2.yaml", &node2),
            ("ciliumnodes/node3.yaml", &node3),
        ],
        &FLAGS,
    );
    log_operated(&mut agent);
    let others_before: Vec<Vec<u8>> = ["node2", "node3"]
        .iter()
        .map(|n| std::fs::read(store_path(&agent, &format!("ciliumnodes/{n}.yaml"))).expect("read"))
        .collect();
    agent.start();
    let cidrs = wait_for(
        "podCIDRs in node1's CiliumNode",
        Duration::from_secs(15),
        || {
            let cidrs = doc(&agent, "ciliumnodes/node1.yaml")["spec"]["ipam"]["podCIDRs"].clone();
            if cidrs.is_null() {
                Err(cidrs.to_string())
            } else {
                Ok(cidrs)
            }
        },
    );
    assert_eq!(
        cidrs,
        json!(["10.240.2.0/24"]),
        "the first block no other CiliumNode document holds"
    );
    let node1 = doc(&agent, "ciliumnodes/node1.yaml");
    assert_eq!(node1["spec"]["futureSpec"], "kept", "{node1}");
    assert_eq!(node1["spec"]["addresses"][0]["ip"], "192.0.2.10", "{node1}");
    assert_eq!(
        node1["metadata"]["labels"]["kubernetes.io/hostname"],
        "node1"
    );
    assert!(
        node1.get("status").is_none(),
        "no error, so no status: {node1}"
    );
    for (name, before) in ["node2", "node3"].iter().zip(&others_before) {
        let now =
            std::fs::read(store_path(&agent, &format!("ciliumnodes/{name}.yaml"))).expect("read");
        assert_eq!(&now, before, "{name}'s document was touched");
    }

    // The agent serves pods from the block.
    let block: Ipv4Net = "10.240.2.0/24".parse().expect("cidr");
    let pod = add(&agent, "default", "web");
    let v4 = pod
        .ips
        .iter()
        .find_map(|ip| match ip {
            std::net::IpAddr::V4(v4) => Some(*v4),
            std::net::IpAddr::V6(_) => None,
        })
        .expect("an IPv4 address");
    assert!(block.contains(&v4), "{v4} is outside node1's block {block}");

    // A restart restores the block instead of handing out another one.
    agent.stop();
    let restarted = agent.log().len();
    agent.start();
    wait_operated(
        &agent,
        restarted,
        "the restarted allocator's first pass",
        |ipam| ipam["podCIDRs"] == json!(["10.240.2.0/24"]),
    );
    assert_eq!(
        doc(&agent, "ciliumnodes/node1.yaml")["spec"]["ipam"]["podCIDRs"],
        json!(["10.240.2.0/24"])
    );
    let again = add(&agent, "default", "db");
    assert!(
        again.ips.iter().all(|ip| match ip {
            std::net::IpAddr::V4(v4) => block.contains(v4),
            std::net::IpAddr::V6(_) => true,
        }),
        "{:?}",
        again.ips
    );
}

#[test]
fn a_bad_cluster_pool_ipv4_cidr_stops_the_agent_naming_the_key() {
    require_root();
    let _node = ThreadNetNs::new();
    for (value, expect) in [
        (
            "fd00::/104",
            "invalid cluster-pool-ipv4-cidr for the in-process cluster-pool allocator",
        ),
        (
            "10.240.0.0/16,10.240.7.0/24",
            "invalid cluster-pool-ipv4-cidr for the in-process cluster-pool allocator",
        ),
        (
            "10.240.0/16",
            "invalid value \"10.240.0/16\" for cluster-pool-ipv4-cidr: expected CIDRs separated \
             by spaces or commas",
        ),
    ] {
        let mut agent = agent_with(
            &[("ciliumnodes/node1.yaml", NODE1)],
            &["--ipam", "cluster-pool", "--cluster-pool-ipv4-cidr", value],
        );
        let log = refused_start(&mut agent);
        assert!(log.contains(expect), "{value}: no {expect:?} in:\n{log}");
        assert!(
            doc(&agent, "ciliumnodes/node1.yaml")["spec"]["ipam"].is_null(),
            "{value}: the node got a block anyway"
        );
    }
}

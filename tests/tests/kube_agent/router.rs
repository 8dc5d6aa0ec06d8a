//! The router address against the Kubernetes API: node discovery keeps the CiliumNode's
//! `CiliumInternalIP` when it seeds `spec.addresses` from the Node, and the agent takes its
//! router from there (issue 16, finding 6).

use serde_json::json;
use weft_tests::{NamedNetNs, ThreadNetNs, require_root, unique};

use super::Cluster;

#[test]
fn the_router_named_by_cilium_internal_ip_survives_discovery_and_is_used() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-a", "aws:///z1/i-1", Some("10.77.0.0/24"));
    // The CiliumNode an earlier agent left: its router named.
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": "node-a"},
        "spec": {
            "addresses": [
                {"type": "InternalIP", "ip": "192.0.2.10"},
                {"type": "CiliumInternalIP", "ip": "10.77.0.9"},
            ],
            "ipam": {"podCIDRs": ["10.77.0.0/24"]},
        },
    }));
    let mut agent = cluster.agent("node-a", &["--ipam", "kubernetes"]);
    agent.start();
    cluster.add_pod("default", "web-0", "node-a");
    let netns = NamedNetNs::new();
    let call = agent.cni(
        "ADD",
        &unique("ctr-"),
        &netns.path().display().to_string(),
        ("default", "web-0"),
    );
    assert_eq!(call.code, 0, "ADD: {}", call.stdout);
    assert_eq!(
        call.stdout["ips"][0]["gateway"],
        "10.77.0.9",
        "the router must come from CiliumInternalIP: {}\n{}",
        call.stdout,
        agent.log()
    );
    let cn = cluster.cilium_node("node-a").expect("CiliumNode");
    assert_eq!(
        cn["spec"]["addresses"],
        json!([
            {"type": "InternalIP", "ip": "192.0.2.10"},
            {"type": "CiliumInternalIP", "ip": "10.77.0.9"},
        ]),
        "{cn}"
    );
}

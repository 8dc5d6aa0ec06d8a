//! An ENI that appears in `status.eni.enis` after the agent started is found by MAC, gets the
//! device MTU, comes up and carries pods; one whose link never appears is reported by `weft-agent
//! status` while the agent goes on serving.

use std::net::IpAddr;

use weft_tests::{
    agent::ping,
    cloud::{self, HOST_IP, VPC_MTU},
};

use super::{
    eni::{ENI1, EniNode, eni, link},
    wait_interface,
};

#[test]
fn a_new_eni_is_configured_and_used_and_a_missing_link_is_reported() {
    let mut node = EniNode::start(&[], &[]);
    wait_interface(&node.agent, "eni-1", "configured");
    let eni2 = ["10.6.2.30", "10.6.2.31", "10.6.2.32"];
    node.vpc
        .attach("eth2", "02:00:00:00:00:30", "10.6.2.0/24", &eni2, 1500);
    node.cluster.operator_edit("node-e", |n| {
        n["status"]["eni"]["enis"]["eni-2"] =
            eni("eni-2", 2, "02:00:00:00:00:30", "10.6.2.0/24", &eni2);
        n["status"]["eni"]["enis"]["eni-3"] = eni(
            "eni-3",
            3,
            "02:00:00:00:00:40",
            "10.6.3.0/24",
            &["10.6.3.40"],
        );
    });
    let configured = wait_interface(&node.agent, "eni-2", "configured");
    assert_eq!(configured["ifname"], "eth2", "{configured}");
    assert_eq!(configured["mtu"], VPC_MTU, "{configured}");
    let (mtu, up, addrs) = link("eth2");
    assert_eq!((mtu, up), (u64::from(VPC_MTU), true));
    assert_eq!(addrs, ["10.6.2.30/24"]);
    let missing = wait_interface(
        &node.agent,
        "eni-3",
        "looking for a link with MAC 02:00:00:00:00:40",
    );
    assert_eq!(missing["ifname"], "", "{missing}");

    // Pods fill ENI 1 (one of its addresses is the router's), then land on ENI 2.
    let mut pods = Vec::new();
    let on_eni2 = loop {
        assert!(pods.len() < ENI1.len(), "no pod got an address of ENI 2");
        let pod = node.pod(&format!("p{}", pods.len()));
        if eni2.contains(&pod.ips[0].to_string().as_str()) {
            break pod;
        }
        pods.push(pod);
    };
    let ip = on_eni2.ips[0];
    assert_eq!(
        cloud::rules_of(ip)[1],
        format!("111: from {ip} to 10.6.0.0/16 lookup 12")
    );
    assert!(
        (0..3).any(|_| ping(&on_eni2, IpAddr::V4(HOST_IP))),
        "a pod on the new ENI reaches the VPC host"
    );
    assert_eq!(node.vpc.drops(), 0);
    assert!(node.agent.running(), "a missing link is not fatal");
}

/// Rules lost while the agent runs (a hand's `ip rule flush`, a link that came back) are
/// installed again on the agent's one-minute tick.
#[test]
fn a_pod_s_lost_rules_come_back_on_the_tick() {
    let node = EniNode::start(&[], &[]);
    wait_interface(&node.agent, "eni-1", "configured");
    let pod = node.pod("a");
    let ip = pod.ips[0];
    let rules = cloud::rules_of(ip);
    assert_eq!(rules.len(), 2, "{rules:?}");
    for priority in ["111", "20"] {
        let args = ["rule", "del", "priority", priority];
        let selector = if priority == "20" { "to" } else { "from" };
        weft_tests::run(
            std::process::Command::new("ip")
                .args(args)
                .args([selector, &ip.to_string()]),
        );
    }
    assert!(cloud::rules_of(ip).is_empty());
    weft_tests::wait_for(
        "the tick to install the rules again",
        std::time::Duration::from_secs(90),
        || {
            let now = cloud::rules_of(ip);
            (now == rules)
                .then_some(())
                .ok_or_else(|| format!("{now:?}"))
        },
    );
    assert!((0..3).any(|_| ping(&pod, IpAddr::V4(HOST_IP))));
}

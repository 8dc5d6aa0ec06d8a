//! Masquerade end to end on the real kernel. The test thread's node namespace gets a veth to
//! an "external host" namespace (node side `44.77.0.2/24` with `to_netdev`/`from_netdev`
//! attached, external side `44.77.0.1`), IPv4 forwarding on inside the node only. Pods ping and
//! TCP-connect to the external host; the server reports the peer address it saw: the node IP
//! when masqueraded, the pod IP for a no-SNAT endpoint or an excluded destination (the external
//! host then routes the pod CIDR back via the node).

use std::net::IpAddr;

use agent_common::endpoint::ENDPOINT_F_NO_SNAT_V4;
use weft_agent::{
    datapath::NetdevConfig,
    masq::{MasqConfig, Masquerade},
};
use weft_tests::{
    Node,
    external::{EXT_IP, External, NODE_DEV, NODE_IP},
};

/// The external host, with the datapath's native-device programs on the node side.
fn external(node: &mut Node) -> External {
    let ext = External::new(&["10.77.0.0/24"]);
    let dp = &mut node.datapath;
    dp.attach_netdev(
        NODE_DEV,
        &NetdevConfig {
            masq_v4: Some(NODE_IP),
            masq_v6: None,
        },
    )
    .expect("attach to_netdev/from_netdev");
    dp.ensure_world_ipcache().expect("world");
    dp.sync_host_ips(&[IpAddr::V4(NODE_IP)]).expect("host ips");
    ext
}

#[test]
fn default_pool_pod_reaches_the_outside_as_the_node() {
    let mut node = Node::new();
    let pod = node.add_pod(1);
    let ext = external(&mut node);
    assert!(pod.ping(IpAddr::V4(EXT_IP), 3, "0.05"), "ping through SNAT");
    assert_eq!(
        ext.tcp_peer(&pod.netns.path(), 7100),
        IpAddr::V4(NODE_IP),
        "server sees the node IP"
    );
    let counters = node.counters();
    assert!(counters["snat"] >= 6, "{counters:?}");
    assert!(
        counters["rev_snat"] >= 5,
        "replies reverse-NATed: {counters:?}"
    );
    let nat = node.datapath.list_nat().expect("nat list");
    assert!(
        nat.iter()
            .any(|r| r.proto == "tcp" && r.saddr == pod.v4 && r.to_addr == NODE_IP),
        "{nat:?}"
    );
    assert!(nat.iter().any(|r| r.proto == "icmp"), "{nat:?}");
}

#[test]
fn no_snat_endpoint_reaches_the_outside_with_its_own_address() {
    let mut node = Node::new();
    let pod = node.add_pod_with(2, ENDPOINT_F_NO_SNAT_V4, 5);
    let ext = external(&mut node);
    assert!(pod.ping(IpAddr::V4(EXT_IP), 2, "0.05"));
    assert_eq!(
        ext.tcp_peer(&pod.netns.path(), 7101),
        IpAddr::V4(pod.v4),
        "server sees the pod IP"
    );
    let counters = node.counters();
    assert_eq!(counters["snat"], 0, "{counters:?}");
    assert!(counters["snat_skip_endpoint"] >= 4, "{counters:?}");
    assert!(
        counters["redirect_local"] >= 2,
        "replies delivered to the pod: {counters:?}"
    );
}

#[test]
fn excluded_destination_is_not_masqueraded() {
    let mut node = Node::new();
    let pod = node.add_pod(3);
    let ext = external(&mut node);
    let dir = std::env::temp_dir().join(weft_tests::unique("weft-masq-"));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let file = dir.join("ip-masq-agent");
    std::fs::write(
        &file,
        "nonMasqueradeCIDRs:\n  - 44.77.0.0/24\nmasqLinkLocal: true\n",
    )
    .expect("write config");
    let masq = Masquerade::new(MasqConfig {
        ip_masq_agent_config: Some(file.clone()),
        ..MasqConfig::default()
    });
    masq.reload(&mut node.datapath).expect("apply exclusions");
    assert_eq!(
        ext.tcp_peer(&pod.netns.path(), 7102),
        IpAddr::V4(pod.v4),
        "excluded: pod IP kept"
    );
    assert!(node.counters()["snat_skip_excluded"] >= 2);

    // A broken edit is refused with file and line; the exclusion stays in force.
    std::fs::write(
        &file,
        "nonMasqueradeCIDRs:\n  - 44.77.0.0/24\n  - 44.77.0.0/33\n",
    )
    .expect("write config");
    let err = masq.reload(&mut node.datapath).expect_err("invalid CIDR");
    assert!(
        err.to_string().contains(&format!("{}:3", file.display())),
        "{err}"
    );
    assert_eq!(
        ext.tcp_peer(&pod.netns.path(), 7103),
        IpAddr::V4(pod.v4),
        "still excluded"
    );

    // Removing the exclusion masquerades new flows again.
    std::fs::write(&file, "nonMasqueradeCIDRs: []\n").expect("write config");
    masq.reload(&mut node.datapath).expect("apply");
    assert_eq!(
        ext.tcp_peer(&pod.netns.path(), 7104),
        IpAddr::V4(NODE_IP),
        "masqueraded again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

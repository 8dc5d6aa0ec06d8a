//! The IPv6 masquerade decision: each reason to keep the pod address, traffic that is not a
//! pod's, ICMPv6 that is never masqueraded, and packets NAT cannot follow.

use super::*;

#[test]
fn ipv6_excluded_cidr_keeps_the_pod_address() {
    let mut node = node6();
    assert_untouched(
        &mut node,
        &frames::udp6_ports(POD6, 40000, EXCLUDED6, 53, b"x"),
        "snat_skip_excluded",
    );
    assert_untouched(
        &mut node,
        &frames::tcp6(POD6, 40001, EXCLUDED6, 443, 0x02, b""),
        "snat_skip_excluded",
    );
}

#[test]
fn ipv6_pool_skip_flags_keep_the_pod_address() {
    let mut node = node6();
    // skip-masquerade pool annotation, and --only-masquerade-default-pool for pool 5.
    for pod in [POD6_SKIP, POD6_OTHER_POOL] {
        assert_untouched(
            &mut node,
            &frames::udp6_ports(pod, 40000, WORLD6, 53, b"x"),
            "snat_skip_endpoint",
        );
        assert_untouched(
            &mut node,
            &frames::icmp6_echo(pod, WORLD6, 128, 7, 1),
            "snat_skip_endpoint",
        );
    }
    // ENDPOINT_F_NO_SNAT_V4 says nothing about IPv6.
    let (verdict, out) = egress(
        &mut node,
        &frames::udp6_ports(POD6_V4_SKIP, 40000, WORLD6, 53, b"x"),
    );
    assert_eq!(verdict, TC_ACT_OK);
    assert_masqueraded6(&out, WORLD6);
}

#[test]
fn ipv6_pool_exclusions_apply_to_their_pool_only() {
    let mut node = node6();
    assert_untouched(
        &mut node,
        &frames::udp6_ports(POD6_POOL7, 40000, POOL7_EXCLUDED6, 53, b"x"),
        "snat_skip_excluded",
    );
    let (_, out) = egress(
        &mut node,
        &frames::udp6_ports(POD6_POOL7, 40000, WORLD6, 53, b"x"),
    );
    assert_masqueraded6(&out, WORLD6);
    let (_, out) = egress(
        &mut node,
        &frames::udp6_ports(POD6, 40000, POOL7_EXCLUDED6, 53, b"x"),
    );
    assert_masqueraded6(&out, POOL7_EXCLUDED6);
}

#[test]
fn ipv6_cluster_destinations_keep_the_pod_address() {
    let mut node = node6();
    assert_untouched(
        &mut node,
        &frames::udp6_ports(POD6, 40000, CLUSTER_POD6, 53, b"x"),
        "snat_skip_cluster",
    );
    assert_untouched(
        &mut node,
        &frames::tcp6(POD6, 40000, REMOTE_NODE6, 10250, 0x02, b""),
        "snat_skip_cluster",
    );
    // The world entry `::/0` is identity 2: masqueraded; without it a miss means world too.
    let (_, out) = egress(
        &mut node,
        &frames::udp6_ports(POD6, 40000, WORLD6, 53, b"x"),
    );
    assert_masqueraded6(&out, WORLD6);
    assert!(
        node.datapath
            .remove_ipcache("::/0".parse().expect("cidr"))
            .expect("rm")
    );
    let (_, out) = egress(
        &mut node,
        &frames::udp6_ports(POD6, 40002, WORLD6, 53, b"x"),
    );
    assert_masqueraded6(&out, WORLD6);
}

#[test]
fn ipv6_traffic_that_is_not_from_a_pod_is_untouched() {
    let mut node = node6();
    // Forwarded traffic from an unknown source.
    let stranger: Ipv6Addr = "fd00:99::1".parse().expect("ip");
    assert_untouched(
        &mut node,
        &frames::udp6_ports(stranger, 40000, WORLD6, 53, b"x"),
        "netdev_pass",
    );
    // The node's own socket: untouched, its port reserved against pods.
    let host = frames::udp6_ports(NODE_IP6, 50000, WORLD6, 53, b"x");
    assert_untouched(&mut node, &host, "netdev_pass");
    let reserved = NatTuple6 {
        daddr: NODE_IP6.octets(),
        saddr: WORLD6.octets(),
        dport: 50000,
        sport: 53,
        nexthdr: IPPROTO_UDP,
        flags: NAT_DIR_INGRESS,
    };
    let entry = node
        .datapath
        .nat6_entry(&reserved)
        .expect("lookup")
        .expect("reserved");
    assert_eq!(entry.flags, agent_common::nat::NAT_F_HOST);
    let (_, out) = egress(
        &mut node,
        &frames::udp6_ports(POD6, 50000, WORLD6, 53, b"x"),
    );
    assert_ne!(
        assert_masqueraded6(&out, WORLD6).sport,
        50000,
        "the node's port is not handed to a pod"
    );
    // Replies to the node socket pass to the stack untouched.
    let reply = frames::udp6_ports(WORLD6, 53, NODE_IP6, 50000, b"answer");
    assert_eq!(ingress(&mut node, &reply), (TC_ACT_OK, reply));
}

#[test]
fn ndp_and_other_icmpv6_from_pods_are_never_masqueraded() {
    let mut node = node6();
    let ns = frames::neighbor_solicit(POD6, WORLD6);
    assert_untouched(&mut node, &ns, "netdev_pass");
    // An error a pod sends (port unreachable about some inbound packet).
    let quoted = frames::udp6_ports(WORLD6, 5000, POD6, 9, b"?");
    let unreachable = frames::icmp6_error(POD6, WORLD6, 1, 4, &quoted);
    assert_untouched(&mut node, &unreachable, "netdev_pass");
    // A unicast neighbour solicitation to the masquerade address (reachability probe)
    // reaches the host stack as it is.
    let mut ns_in = frames::neighbor_solicit(WORLD6, NODE_IP6);
    ns_in[14 + 24..14 + 40].copy_from_slice(&NODE_IP6.octets());
    assert_eq!(ingress(&mut node, &ns_in), (TC_ACT_OK, ns_in));
    assert_eq!(node.datapath.list_nat().expect("nat"), Vec::new());
}

#[test]
fn ipv6_is_untouched_without_the_device_flag() {
    let mut node = node6();
    node.datapath
        .upsert_netdev(
            LO,
            &NetdevConfig {
                masq_v4: Some(NODE_IP),
                masq_v6: None,
            },
        )
        .expect("netdev");
    assert_untouched(
        &mut node,
        &frames::udp6_ports(POD6, 40000, WORLD6, 53, b"x"),
        "netdev_pass",
    );
    // IPv4 still masquerades.
    let (_, out) = egress(&mut node, &frames::udp4_ports(POD, 40000, WORLD, 53, b"x"));
    assert_masqueraded(&out, WORLD);
}

#[test]
fn ipv6_fragments_that_need_masquerading_are_dropped_with_a_reason() {
    let mut node = node6();
    // A fragment header (44) in front of UDP: NAT cannot follow the flow.
    let frag = |dst: Ipv6Addr| {
        let mut f = frames::udp6_ports(POD6, 40000, dst, 53, &[0; 64]);
        let udp = f.split_off(54);
        f[14 + 6] = 44;
        let len = u16::from_be_bytes([f[18], f[19]]) + 8;
        f[18..20].copy_from_slice(&len.to_be_bytes());
        f.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 42]);
        f.extend_from_slice(&udp);
        f
    };
    let (verdict, _) = egress(&mut node, &frag(WORLD6));
    assert_eq!(verdict, TC_ACT_SHOT);
    assert_eq!(node.counters()["drop_nat_unsupported"], 1);
    // Excluded destinations do not need masquerading: fragments pass untouched.
    assert_untouched(&mut node, &frag(EXCLUDED6), "snat_skip_excluded");
}

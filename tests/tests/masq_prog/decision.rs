//! The masquerade decision: each reason to keep the pod address, and traffic that is not a
//! pod's.

use super::*;

#[test]
fn excluded_cidr_keeps_the_pod_address() {
    let mut node = node();
    assert_untouched(
        &mut node,
        &frames::udp4_ports(POD, 40000, EXCLUDED, 53, b"x"),
        "snat_skip_excluded",
    );
}

#[test]
fn pool_skip_flag_keeps_the_pod_address() {
    let mut node = node();
    assert_untouched(
        &mut node,
        &frames::udp4_ports(POD_SKIP, 40000, WORLD, 53, b"x"),
        "snat_skip_endpoint",
    );
    assert_untouched(
        &mut node,
        &frames::tcp4(POD_SKIP, 40001, WORLD, 443, 0x02, b""),
        "snat_skip_endpoint",
    );
}

#[test]
fn only_masquerade_default_pool_flag_keeps_the_pod_address() {
    let mut node = node();
    assert_untouched(
        &mut node,
        &frames::udp4_ports(POD_OTHER_POOL, 40000, WORLD, 53, b"x"),
        "snat_skip_endpoint",
    );
}

#[test]
fn pool_exclusions_apply_to_their_pool_only() {
    let mut node = node();
    assert_untouched(
        &mut node,
        &frames::udp4_ports(POD_POOL7, 40000, POOL7_EXCLUDED, 53, b"x"),
        "snat_skip_excluded",
    );
    // Pool 7 still masquerades elsewhere, and the default pool to pool 7's exclusion.
    let (_, out) = egress(
        &mut node,
        &frames::udp4_ports(POD_POOL7, 40000, WORLD, 53, b"x"),
    );
    assert_masqueraded(&out, WORLD);
    let (_, out) = egress(
        &mut node,
        &frames::udp4_ports(POD, 40000, POOL7_EXCLUDED, 53, b"x"),
    );
    assert_masqueraded(&out, POOL7_EXCLUDED);
}

#[test]
fn cluster_destinations_keep_the_pod_address() {
    let mut node = node();
    assert_untouched(
        &mut node,
        &frames::udp4_ports(POD, 40000, CLUSTER_POD, 53, b"x"),
        "snat_skip_cluster",
    );
    assert_untouched(
        &mut node,
        &frames::tcp4(POD, 40000, REMOTE_NODE, 10250, 0x02, b""),
        "snat_skip_cluster",
    );
    // Without the world entries a miss still means world.
    assert!(
        node.datapath
            .remove_ipcache("0.0.0.0/0".parse().expect("cidr"))
            .expect("rm")
    );
    let (_, out) = egress(&mut node, &frames::udp4_ports(POD, 40000, WORLD, 53, b"x"));
    assert_masqueraded(&out, WORLD);
}

#[test]
fn traffic_that_is_not_from_a_pod_is_untouched() {
    let mut node = node();
    // Forwarded traffic from an unknown source.
    assert_untouched(
        &mut node,
        &frames::udp4_ports(Ipv4Addr::new(10, 99, 0, 1), 40000, WORLD, 53, b"x"),
        "netdev_pass",
    );
    // The node's own socket: untouched, but its port is reserved against pods.
    let host = frames::udp4_ports(NODE_IP, 50000, WORLD, 53, b"x");
    assert_untouched(&mut node, &host, "netdev_pass");
    let reserved = NatTuple4 {
        daddr: NODE_IP.octets(),
        saddr: WORLD.octets(),
        dport: 50000,
        sport: 53,
        nexthdr: IPPROTO_UDP,
        flags: NAT_DIR_INGRESS,
    };
    let entry = node
        .datapath
        .nat4_entry(&reserved)
        .expect("lookup")
        .expect("reserved");
    assert_eq!(entry.flags, agent_common::nat::NAT_F_HOST);
    // A pod asking for the same port gets another one.
    let (_, out) = egress(&mut node, &frames::udp4_ports(POD, 50000, WORLD, 53, b"x"));
    assert_ne!(assert_masqueraded(&out, WORLD).sport, 50000);
    // Replies to the node socket pass to the stack untouched.
    let reply = frames::udp4_ports(WORLD, 53, NODE_IP, 50000, b"answer");
    assert_eq!(ingress(&mut node, &reply), (TC_ACT_OK, reply));
    // ARP and IPv6 pass.
    let arp = frames::arp_request(NODE_IP, Ipv4Addr::new(172, 31, 0, 1));
    assert_eq!(egress(&mut node, &arp), (TC_ACT_OK, arp));
    let v6 = frames::udp6(
        "fd00:77::11".parse().expect("ip"),
        "2001:db8::1".parse().expect("ip"),
        64,
        b"x",
    );
    assert_eq!(egress(&mut node, &v6), (TC_ACT_OK, v6));
}

#[test]
fn device_that_is_not_native_passes_everything() {
    let mut node = node();
    let frame = frames::udp4_ports(POD, 40000, WORLD, 53, b"x");
    // Re-record the device under another ifindex: lo is no longer native.
    node.datapath
        .upsert_netdev(
            LO + 100,
            &NetdevConfig {
                masq_v4: Some(NODE_IP),
                masq_v6: None,
            },
        )
        .expect("netdev");
    let rows = node.datapath.list_netdevs().expect("list");
    assert_eq!(rows.len(), 2);
    assert!(node.datapath.detach_netdev("lo").expect("detach"));
    assert_eq!(egress(&mut node, &frame), (TC_ACT_OK, frame.clone()));
    assert_eq!(node.counters()["snat"], 0);
}

#[test]
fn fragments_that_need_masquerading_are_dropped_with_a_reason() {
    let mut node = node();
    let mut frag = frames::udp4_ports(POD, 40000, WORLD, 53, &[0; 64]);
    frag[14 + 6] = 0x20; // more fragments
    let c = {
        frag[14 + 10] = 0;
        frag[14 + 11] = 0;
        frames::ipv4_header_csum(&frag[14..34])
    };
    frag[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
    let (verdict, _) = egress(&mut node, &frag);
    assert_eq!(verdict, TC_ACT_SHOT);
    assert_eq!(node.counters()["drop_nat_unsupported"], 1);
    // Excluded destinations do not need masquerading: fragments pass.
    let mut excluded = frag.clone();
    excluded[14 + 16..14 + 20].copy_from_slice(&EXCLUDED.octets());
    assert_eq!(egress(&mut node, &excluded).0, TC_ACT_OK);
}

//! Mappings: a kept port, a remapped low port, reuse by the rest of the flow, ICMP echo, a
//! collision, an exhausted port space.

use super::*;

#[test]
fn world_destination_is_masqueraded_keeping_a_free_port() {
    let mut node = node();
    let frame = frames::udp4_ports(POD, 40000, WORLD, 53, b"query");
    let (verdict, out) = egress(&mut node, &frame);
    assert_eq!(verdict, TC_ACT_OK);
    let v = assert_masqueraded(&out, WORLD);
    assert_eq!(
        (v.sport, v.dport),
        (40000, 53),
        "a free port in range is kept"
    );
    assert_eq!(out[..14], frame[..14], "L2 untouched");
    assert_eq!(out[14 + 28..], frame[14 + 28..], "payload untouched");
    // Two entries: forward (pod → world) and reverse (world → node).
    let forward = NatTuple4 {
        daddr: WORLD.octets(),
        saddr: POD.octets(),
        dport: 53,
        sport: 40000,
        nexthdr: IPPROTO_UDP,
        flags: NAT_DIR_EGRESS,
    };
    let entry = node
        .datapath
        .nat4_entry(&forward)
        .expect("lookup")
        .expect("forward entry");
    assert_eq!((entry.to_addr, entry.to_port), (NODE_IP.octets(), 40000));
    let reverse = NatTuple4 {
        daddr: NODE_IP.octets(),
        saddr: WORLD.octets(),
        dport: 40000,
        sport: 53,
        nexthdr: IPPROTO_UDP,
        flags: NAT_DIR_INGRESS,
    };
    let entry = node
        .datapath
        .nat4_entry(&reverse)
        .expect("lookup")
        .expect("reverse entry");
    assert_eq!((entry.to_addr, entry.to_port), (POD.octets(), 40000));
    assert_eq!(node.counters()["snat"], 1);
    let rows = node.datapath.list_nat().expect("list");
    assert_eq!(rows.len(), 2, "{rows:?}");
}

#[test]
fn tcp_low_port_gets_a_port_in_range_and_the_flow_reuses_it() {
    let mut node = node();
    let syn = frames::tcp4(POD, 1234, WORLD, 443, 0x02, b"");
    let (verdict, out) = egress(&mut node, &syn);
    assert_eq!(verdict, TC_ACT_OK);
    let first = assert_masqueraded(&out, WORLD);
    assert_ne!(first.sport, 1234, "ports below the range are remapped");
    // The rest of the flow (data, with another payload and flags) reuses the mapping.
    for _ in 0..3 {
        let data = frames::tcp4(POD, 1234, WORLD, 443, 0x18, b"GET / HTTP/1.1\r\n\r\n");
        let (verdict, out) = egress(&mut node, &data);
        assert_eq!(verdict, TC_ACT_OK);
        let again = assert_masqueraded(&out, WORLD);
        assert_eq!(again.sport, first.sport, "established flow keeps its port");
    }
    assert_eq!(node.counters()["snat"], 4);
    assert_eq!(
        node.datapath.list_nat().expect("list").len(),
        2,
        "still one flow"
    );
}

#[test]
fn icmp_echo_is_masqueraded_with_its_identifier_as_port() {
    let mut node = node();
    let echo = frames::icmp4_echo(POD, WORLD, 8, 0x4242, 1);
    let (verdict, out) = egress(&mut node, &echo);
    assert_eq!(verdict, TC_ACT_OK);
    let v = view4(&out);
    assert_eq!((v.src, v.dst, v.sport), (NODE_IP, WORLD, 0x4242));
    assert!(v.ip_csum_ok && v.l4_csum_ok);
    // The reply finds its way back to the pod.
    let reply = frames::icmp4_echo(WORLD, NODE_IP, 0, 0x4242, 1);
    let (verdict, out) = ingress(&mut node, &reply);
    assert_eq!(verdict, TC_ACT_OK, "restored, then to the stack");
    let v = view4(&out);
    assert_eq!((v.src, v.dst, v.sport), (WORLD, POD, 0x4242));
    assert!(v.ip_csum_ok && v.l4_csum_ok);
    // An echo reply a pod sends (answering a ping) is never masqueraded.
    let pong = frames::icmp4_echo(POD, WORLD, 0, 7, 1);
    assert_untouched(&mut node, &pong, "snat_skip_reply");
}

#[test]
fn a_taken_port_moves_the_new_flow_to_another() {
    let mut node = node();
    // Another pod already holds node port 40000 towards 8.8.8.8:53.
    let taken = NatTuple4 {
        daddr: NODE_IP.octets(),
        saddr: WORLD.octets(),
        dport: 40000,
        sport: 53,
        nexthdr: IPPROTO_UDP,
        flags: NAT_DIR_INGRESS,
    };
    let other = NatEntry4 {
        created: 0,
        to_addr: [10, 77, 0, 99],
        to_port: 40000,
        flags: 0,
    };
    node.datapath.upsert_nat4(&taken, &other).expect("prefill");
    let (verdict, out) = egress(&mut node, &frames::udp4_ports(POD, 40000, WORLD, 53, b"x"));
    assert_eq!(verdict, TC_ACT_OK);
    let v = assert_masqueraded(&out, WORLD);
    assert_ne!(v.sport, 40000, "collision moved the flow");
    assert_eq!(
        node.datapath.nat4_entry(&taken).expect("lookup"),
        Some(other),
        "the existing mapping is untouched"
    );
    // Replies to each port reach their own pod.
    let reply = frames::udp4_ports(WORLD, 53, NODE_IP, v.sport, b"r");
    let (verdict, out) = ingress(&mut node, &reply);
    assert_eq!(verdict, TC_ACT_OK, "restored, then to the stack");
    assert_eq!((view4(&out).dst, view4(&out).dport), (POD, 40000));
}

#[test]
fn exhausted_port_space_drops_with_a_reason() {
    let mut node = node();
    for port in NAT_PORT_MIN..=NAT_PORT_MAX {
        let taken = NatTuple4 {
            daddr: NODE_IP.octets(),
            saddr: WORLD.octets(),
            dport: port,
            sport: 53,
            nexthdr: IPPROTO_UDP,
            flags: NAT_DIR_INGRESS,
        };
        let entry = NatEntry4 {
            created: 0,
            to_addr: [10, 77, 0, 99],
            to_port: port,
            flags: 0,
        };
        node.datapath.upsert_nat4(&taken, &entry).expect("prefill");
    }
    let (verdict, _) = egress(&mut node, &frames::udp4_ports(POD, 40000, WORLD, 53, b"x"));
    assert_eq!(verdict, TC_ACT_SHOT);
    assert_eq!(node.counters()["drop_nat_no_port"], 1);
    // Another peer port is a different tuple space: still fine.
    let (verdict, out) = egress(&mut node, &frames::udp4_ports(POD, 40000, WORLD, 54, b"x"));
    assert_eq!(verdict, TC_ACT_OK);
    assert_masqueraded(&out, WORLD);
}

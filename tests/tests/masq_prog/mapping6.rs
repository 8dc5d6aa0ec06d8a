//! IPv6 mappings and their reverse: a kept port, a remapped low port reused by the flow,
//! ICMPv6 echo, replies delivered to the pod, ICMPv6 errors about masqueraded flows, flows the
//! outside opens, an exhausted port space. Every rewritten frame's L4 checksum is recomputed.

use super::*;

fn tuple6(saddr: Ipv6Addr, sport: u16, daddr: Ipv6Addr, dport: u16, dir: u8) -> NatTuple6 {
    NatTuple6 {
        daddr: daddr.octets(),
        saddr: saddr.octets(),
        dport,
        sport,
        nexthdr: IPPROTO_UDP,
        flags: dir,
    }
}

#[test]
fn ipv6_world_destination_is_masqueraded_keeping_a_free_port() {
    let mut node = node6();
    let frame = frames::udp6_ports(POD6, 40000, WORLD6, 53, b"query");
    let (verdict, out) = egress(&mut node, &frame);
    assert_eq!(verdict, TC_ACT_OK);
    let v = assert_masqueraded6(&out, WORLD6);
    assert_eq!((v.sport, v.dport, v.hop_limit), (40000, 53, 64));
    assert_eq!(out[..14], frame[..14], "L2 untouched");
    assert_eq!(out[54 + 8..], frame[54 + 8..], "payload untouched");
    let forward = node
        .datapath
        .nat6_entry(&tuple6(POD6, 40000, WORLD6, 53, NAT_DIR_EGRESS))
        .expect("lookup")
        .expect("forward entry");
    assert_eq!(
        (forward.to_addr, forward.to_port),
        (NODE_IP6.octets(), 40000)
    );
    let reverse = node
        .datapath
        .nat6_entry(&tuple6(WORLD6, 53, NODE_IP6, 40000, NAT_DIR_INGRESS))
        .expect("lookup")
        .expect("reverse entry");
    assert_eq!((reverse.to_addr, reverse.to_port), (POD6.octets(), 40000));
    assert_eq!(node.counters()["snat"], 1);
    let rows = node.datapath.list_nat().expect("list");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter().any(|r| r.direction == "egress"
            && r.saddr == IpAddr::V6(POD6)
            && r.to_addr == IpAddr::V6(NODE_IP6)),
        "{rows:?}"
    );
}

#[test]
fn ipv6_tcp_flow_gets_one_port_and_its_replies_reach_the_pod() {
    let mut node = node6();
    let (verdict, out) = egress(&mut node, &frames::tcp6(POD6, 1234, WORLD6, 443, 0x02, b""));
    assert_eq!(verdict, TC_ACT_OK);
    let port = assert_masqueraded6(&out, WORLD6).sport;
    assert_ne!(port, 1234, "ports below the range are remapped");
    let data = frames::tcp6(POD6, 1234, WORLD6, 443, 0x18, b"GET / HTTP/1.1\r\n\r\n");
    let (_, out) = egress(&mut node, &data);
    assert_eq!(
        assert_masqueraded6(&out, WORLD6).sport,
        port,
        "same flow, same port"
    );

    let reply = frames::tcp6(WORLD6, 443, NODE_IP6, port, 0x12, b"hello pod");
    let (verdict, out) = ingress(&mut node, &reply);
    assert_eq!(
        verdict, TC_ACT_OK,
        "handed to the stack, which routes it to the pod"
    );
    let v = view6(&out);
    assert_eq!((v.src, v.sport, v.dst, v.dport), (WORLD6, 443, POD6, 1234));
    assert!(v.l4_csum_ok, "TCP checksum after reverse NAT");
    assert_eq!(
        v.hop_limit,
        view6(&reply).hop_limit,
        "the stack decrements the hop limit"
    );
    assert_eq!(out[0..12], reply[0..12], "MACs untouched");
    assert_eq!(node.counters()["rev_snat"], 1);
    // Nobody holds the next port; a port below the range is the host's: both go to the stack.
    for frame in [
        frames::tcp6(
            WORLD6,
            443,
            NODE_IP6,
            port.wrapping_add(1).max(NAT_PORT_MIN),
            0x12,
            b"",
        ),
        frames::tcp6(WORLD6, 443, NODE_IP6, 22, 0x02, b""),
    ] {
        assert_eq!(ingress(&mut node, &frame), (TC_ACT_OK, frame.clone()));
    }
    assert_eq!(node.counters()["rev_snat"], 1);
}

#[test]
fn icmpv6_echo_is_masqueraded_with_its_identifier_and_answered() {
    let mut node = node6();
    let (verdict, out) = egress(&mut node, &frames::icmp6_echo(POD6, WORLD6, 128, 0x4242, 1));
    assert_eq!(verdict, TC_ACT_OK);
    let v = view6(&out);
    assert_eq!((v.src, v.dst, v.sport), (NODE_IP6, WORLD6, 0x4242));
    assert!(v.l4_csum_ok, "ICMPv6 checksum covers the pseudo-header");
    let reply = frames::icmp6_echo(WORLD6, NODE_IP6, 129, 0x4242, 1);
    let (verdict, out) = ingress(&mut node, &reply);
    assert_eq!(verdict, TC_ACT_OK, "restored, then to the stack");
    let v = view6(&out);
    assert_eq!((v.src, v.dst, v.sport), (WORLD6, POD6, 0x4242));
    assert!(v.l4_csum_ok);
    // An echo reply a pod sends (answering a ping) is never masqueraded, and a stray echo
    // reply to the node goes to the stack.
    assert_untouched(
        &mut node,
        &frames::icmp6_echo(POD6, WORLD6, 129, 7, 1),
        "snat_skip_reply",
    );
    let stray = frames::icmp6_echo(WORLD6, NODE_IP6, 129, 999, 1);
    assert_eq!(ingress(&mut node, &stray), (TC_ACT_OK, stray));
}

#[test]
fn icmpv6_errors_about_masqueraded_flows_reach_the_pod_with_the_quote_restored() {
    let mut node = node6();
    let (_, syn) = egress(&mut node, &frames::tcp6(POD6, 1234, WORLD6, 443, 0x02, b""));
    let port = view6(&syn).sport;
    assert_ne!(port, 1234, "the SYN left with a node port");
    let router: Ipv6Addr = "2001:db8:ff::1".parse().expect("ip");
    for (icmp_type, code) in [(2, 0), (1, 4), (3, 0)] {
        // Packet too big / port unreachable / time exceeded, quoting the SYN as it left.
        let error = frames::icmp6_error(router, NODE_IP6, icmp_type, code, &syn);
        let (verdict, out) = ingress(&mut node, &error);
        assert_eq!(
            verdict, TC_ACT_OK,
            "type {icmp_type}: restored, then to the stack"
        );
        let outer = view6(&out);
        assert_eq!((outer.src, outer.dst), (router, POD6));
        assert!(outer.l4_csum_ok, "type {icmp_type}: ICMPv6 checksum");
        let quoted = &out[54 + 8..];
        assert_eq!(quoted[8..24], POD6.octets(), "quoted source is the pod");
        assert_eq!(quoted[24..40], WORLD6.octets());
        assert_eq!(
            u16::from_be_bytes([quoted[40], quoted[41]]),
            1234,
            "quoted port"
        );
    }
    // An error quoting a flow nobody mapped goes to the host untouched.
    let stray = frames::tcp6(NODE_IP6, 50999, WORLD6, 443, 0x02, b"");
    let error = frames::icmp6_error(router, NODE_IP6, 2, 0, &stray);
    assert_eq!(ingress(&mut node, &error), (TC_ACT_OK, error));
}

#[test]
fn ipv6_flows_the_outside_opens_to_a_pod_are_replied_unmasqueraded() {
    let mut node = node6();
    let syn = frames::tcp6(WORLD6, 50123, POD6, 80, 0x02, b"");
    assert_eq!(
        ingress(&mut node, &syn),
        (TC_ACT_OK, syn.clone()),
        "to the stack as is"
    );
    assert_eq!(node.counters()["netdev_to_pod"], 1);
    let syn_ack = frames::tcp6(POD6, 80, WORLD6, 50123, 0x12, b"");
    assert_untouched(&mut node, &syn_ack, "snat_skip_reply");
    let (_, out) = egress(
        &mut node,
        &frames::tcp6(POD6, 40000, WORLD6, 50123, 0x02, b""),
    );
    assert_masqueraded6(&out, WORLD6);
}

#[test]
fn ipv6_exhausted_port_space_drops_with_a_reason() {
    let mut node = node6();
    for port in NAT_PORT_MIN..=NAT_PORT_MAX {
        let entry = NatEntry6 {
            created: 0,
            to_addr: POD6_POOL7.octets(),
            to_port: port,
            flags: 0,
            pad: [0; 4],
        };
        node.datapath
            .upsert_nat6(&tuple6(WORLD6, 53, NODE_IP6, port, NAT_DIR_INGRESS), &entry)
            .expect("prefill");
    }
    let (verdict, _) = egress(
        &mut node,
        &frames::udp6_ports(POD6, 40000, WORLD6, 53, b"x"),
    );
    assert_eq!(verdict, TC_ACT_SHOT);
    assert_eq!(node.counters()["drop_nat_no_port"], 1);
    let (verdict, out) = egress(
        &mut node,
        &frames::udp6_ports(POD6, 40000, WORLD6, 54, b"x"),
    );
    assert_eq!(
        verdict, TC_ACT_OK,
        "another peer port is another tuple space"
    );
    assert_masqueraded6(&out, WORLD6);
}

/// `frame` (Ethernet + IPv6 + L4) with an 8-byte extension header of type `ext` (hop-by-hop
/// 0, destination options 60; PadN content) between the IPv6 header and the L4 header.
fn with_ext_header(frame: &[u8], ext: u8) -> Vec<u8> {
    let mut f = frame[..54].to_vec();
    let next = f[14 + 6];
    f[14 + 6] = ext;
    let len = u16::from_be_bytes([f[18], f[19]]) + 8;
    f[18..20].copy_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
    f.extend_from_slice(&frame[54..]);
    f
}

/// The frame without the 8-byte extension header `with_ext_header` added.
fn without_ext_header(frame: &[u8]) -> Vec<u8> {
    let mut f = frame[..54].to_vec();
    f[14 + 6] = frame[54];
    f.extend_from_slice(&frame[62..]);
    f
}

#[test]
fn ipv6_extension_headers_are_stepped_over() {
    let mut node = node6();
    let frame = with_ext_header(&frames::udp6_ports(POD6, 40000, WORLD6, 53, b"q"), 0);
    let (verdict, out) = egress(&mut node, &frame);
    assert_eq!(verdict, TC_ACT_OK);
    assert_eq!(out[14 + 6], 0, "hop-by-hop header kept");
    assert_eq!(out[54..62], frame[54..62], "extension header untouched");
    let v = assert_masqueraded6(&without_ext_header(&out), WORLD6);
    assert_eq!(v.sport, 40000);
    // The reply, behind a destination-options header, is restored and handed on.
    let reply = with_ext_header(&frames::udp6_ports(WORLD6, 53, NODE_IP6, 40000, b"a"), 60);
    let (verdict, out) = ingress(&mut node, &reply);
    assert_eq!(verdict, TC_ACT_OK, "restored, then to the stack");
    let v = view6(&without_ext_header(&out));
    assert_eq!((v.dst, v.dport), (POD6, 40000));
    assert!(v.l4_csum_ok, "UDP checksum after reverse NAT");
    // Five extension headers are more than the datapath walks: NAT cannot follow, dropped.
    let mut deep = frames::udp6_ports(POD6, 40001, WORLD6, 53, b"q");
    for _ in 0..5 {
        deep = with_ext_header(&deep, 60);
    }
    assert_eq!(egress(&mut node, &deep).0, TC_ACT_SHOT);
    assert_eq!(node.counters()["drop_nat_unsupported"], 1);
}

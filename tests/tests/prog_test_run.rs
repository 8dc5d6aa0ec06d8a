//! `from_container` under `BPF_PROG_TEST_RUN`: crafted IPv4, IPv6, ARP and neighbour-
//! solicitation frames against pre-filled maps; each test asserts the verdict and the bytes
//! the program wrote (MACs, TTL, checksums, replies). The skb arrives on `lo` (ifindex 1) of
//! the test's private namespace, so "the pod's interface" is ifindex 1 here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agent_common::{EndpointInfo, maps::PROG_FROM_CONTAINER};
use weft_tests::{
    Node,
    frames::{self, POD_MAC},
    test_run,
};

const TC_ACT_OK: u32 = 0;
const TC_ACT_SHOT: u32 = 2;
const TC_ACT_REDIRECT: u32 = 7;
const LO: u32 = 1;
const PEER_IFINDEX: u32 = 4242;
const PEER_POD_MAC: [u8; 6] = [0x0a, 0xbb, 0, 0, 0, 0x12];
const PEER_NODE_MAC: [u8; 6] = [0x0a, 0xcc, 0, 0, 0, 0x12];
const LO_NODE_MAC: [u8; 6] = [0x0a, 0xcc, 0, 0, 0, 0x01];

const SRC4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 11);
const DST4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 12);
const SRC6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x11);
const DST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x12);

fn endpoint(ifindex: u32, pod_mac: [u8; 6], node_mac: [u8; 6]) -> EndpointInfo {
    EndpointInfo {
        ifindex,
        flags: 0,
        pod_mac,
        pad0: [0; 2],
        node_mac,
        pad1: [0; 2],
        sec_identity: 300,
        pool_id: 0,
    }
}

/// A node whose `lo` plays the sending pod's veth, plus one peer endpoint.
fn node() -> Node {
    let mut node = Node::new();
    let dp = &mut node.datapath;
    let me = endpoint(LO, POD_MAC, LO_NODE_MAC);
    let peer = endpoint(PEER_IFINDEX, PEER_POD_MAC, PEER_NODE_MAC);
    for (ip, ep) in [
        (IpAddr::V4(SRC4), me),
        (IpAddr::V6(SRC6), me),
        (IpAddr::V4(DST4), peer),
        (IpAddr::V6(DST6), peer),
    ] {
        dp.upsert_endpoint(ip, &ep).expect("upsert endpoint");
    }
    dp.upsert_iface(LO, LO_NODE_MAC).expect("upsert iface");
    node
}

#[test]
fn ipv4_to_local_endpoint_is_redirected_with_router_rewrite() {
    let mut node = node();
    let frame = frames::udp4(SRC4, DST4, 64, b"hello weft");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame);
    assert_eq!(verdict, TC_ACT_REDIRECT);
    assert_eq!(out[0..6], PEER_POD_MAC, "destination MAC = destination pod");
    assert_eq!(
        out[6..12],
        PEER_NODE_MAC,
        "source MAC = the router side facing that pod"
    );
    assert_eq!(out[14 + 8], 63, "TTL decremented");
    assert_eq!(
        frames::ipv4_header_csum(&out[14..34]),
        0,
        "IPv4 header checksum still valid"
    );
    // Only the TTL and checksum changed in L3; L4 is untouched.
    assert_eq!(out[34..], frame[34..]);
    assert_eq!(node.counters()["redirect_local"], 1);
}

#[test]
fn ipv4_to_unknown_destination_goes_to_the_stack_unchanged() {
    let mut node = node();
    let frame = frames::udp4(SRC4, Ipv4Addr::new(192, 0, 2, 1), 64, b"x");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame);
    assert_eq!(verdict, TC_ACT_OK);
    assert_eq!(out, frame);
    assert_eq!(node.counters()["pass_stack"], 1);
}

#[test]
fn spoofed_sources_are_dropped() {
    let mut node = node();
    // Not an endpoint at all.
    let frame = frames::udp4(Ipv4Addr::new(10, 77, 0, 99), DST4, 64, b"x");
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame).0,
        TC_ACT_SHOT
    );
    // An endpoint, but behind another interface (DST4 lives on PEER_IFINDEX).
    let frame = frames::udp4(DST4, SRC4, 64, b"x");
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame).0,
        TC_ACT_SHOT
    );
    let frame = frames::udp6(DST6, SRC6, 64, b"x");
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame).0,
        TC_ACT_SHOT
    );
    assert_eq!(node.counters()["drop_invalid_source"], 3);
}

#[test]
fn expiring_ttl_and_non_ip_go_to_the_stack() {
    let mut node = node();
    let frame = frames::udp4(SRC4, DST4, 1, b"x");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame);
    assert_eq!(
        (verdict, out),
        (TC_ACT_OK, frame),
        "TTL 1: the stack sends time-exceeded"
    );
    let mut lldp = frames::udp4(SRC4, DST4, 64, b"x");
    lldp[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &lldp).0,
        TC_ACT_OK
    );
    assert_eq!(node.counters()["pass_stack"], 2);
}

#[test]
fn malformed_headers_are_dropped() {
    let mut node = node();
    // The kernel's test runner refuses IP frames shorter than an IP header, so truncation is
    // exercised with ARP; IP is exercised with impossible version and header-length fields.
    let arp = frames::arp_request(SRC4, Ipv4Addr::new(10, 77, 0, 1));
    let (verdict, _) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &arp[..14 + 20]);
    assert_eq!(verdict, TC_ACT_SHOT);
    let frame = frames::udp4(SRC4, DST4, 64, b"x");
    let mut bad_version = frame.clone();
    bad_version[14] = 0x65;
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &bad_version).0,
        TC_ACT_SHOT
    );
    let mut short_ihl = frame;
    short_ihl[14] = 0x44;
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &short_ihl).0,
        TC_ACT_SHOT
    );
    assert_eq!(node.counters()["drop_malformed"], 3);
}

#[test]
fn ipv6_to_local_endpoint_is_redirected_with_hop_limit_decremented() {
    let mut node = node();
    let frame = frames::udp6(SRC6, DST6, 64, b"hello weft");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame);
    assert_eq!(verdict, TC_ACT_REDIRECT);
    assert_eq!(out[0..6], PEER_POD_MAC);
    assert_eq!(out[6..12], PEER_NODE_MAC);
    assert_eq!(out[14 + 7], 63, "hop limit decremented");
    assert_eq!(
        out[14 + 8..],
        frame[14 + 8..],
        "addresses and payload untouched"
    );

    let unknown = frames::udp6(SRC6, "2001:db8::1".parse().expect("ip"), 64, b"x");
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &unknown).0,
        TC_ACT_OK
    );
    let link_local = frames::udp6("fe80::1".parse().expect("ip"), DST6, 64, b"x");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &link_local);
    assert_eq!(
        (verdict, out),
        (TC_ACT_OK, link_local),
        "link-local sources are never routed"
    );
}

#[test]
fn arp_request_for_the_gateway_is_answered_with_the_veth_mac() {
    let mut node = node();
    let gw = Ipv4Addr::new(10, 77, 0, 1);
    let frame = frames::arp_request(SRC4, gw);
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame);
    assert_eq!(
        verdict, TC_ACT_REDIRECT,
        "reply bounced back out of the veth"
    );
    assert_eq!(out[0..6], POD_MAC);
    assert_eq!(out[6..12], LO_NODE_MAC);
    assert_eq!(out[14 + 6..14 + 8], [0, 2], "op = reply");
    assert_eq!(out[14 + 8..14 + 14], LO_NODE_MAC, "sender MAC = veth MAC");
    assert_eq!(
        out[14 + 14..14 + 18],
        gw.octets(),
        "sender IP = the asked-for address"
    );
    assert_eq!(out[14 + 18..14 + 24], POD_MAC);
    assert_eq!(out[14 + 24..14 + 28], SRC4.octets());
    assert_eq!(node.counters()["neigh_reply"], 1);

    // Gratuitous ARP (asking for itself) and requests from unknown senders: the host decides.
    let gratuitous = frames::arp_request(SRC4, SRC4);
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &gratuitous),
        (TC_ACT_OK, gratuitous)
    );
    let stranger = frames::arp_request(Ipv4Addr::new(10, 77, 0, 99), gw);
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &stranger).0,
        TC_ACT_OK
    );
}

#[test]
fn neighbor_solicitation_is_answered_with_a_valid_advertisement() {
    let mut node = node();
    let gw: Ipv6Addr = "fd00:77::1".parse().expect("ip");
    let frame = frames::neighbor_solicit(SRC6, gw);
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame);
    assert_eq!(verdict, TC_ACT_REDIRECT);
    assert_eq!(out.len(), frame.len());
    assert_eq!(out[0..6], POD_MAC);
    assert_eq!(out[6..12], LO_NODE_MAC);
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&out[22..38]).expect("16"));
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&out[38..54]).expect("16"));
    assert_eq!((src, dst), (gw, SRC6));
    assert_eq!(out[21], 255, "hop limit of ND must stay 255");
    let msg = &out[54..];
    assert_eq!(msg[0], 136, "neighbour advertisement");
    assert_eq!(msg[4], 0xe0, "router, solicited, override");
    assert_eq!(msg[8..24], gw.octets());
    assert_eq!(msg[24..26], [2, 1], "target link-layer address option");
    assert_eq!(msg[26..32], LO_NODE_MAC);
    assert_eq!(
        frames::icmp6_csum(src, dst, msg),
        0,
        "ICMPv6 checksum valid"
    );

    // Duplicate-address detection (source ::) is not answered.
    let dad = frames::neighbor_solicit(Ipv6Addr::UNSPECIFIED, SRC6);
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &dad).0,
        TC_ACT_OK
    );
}

#[test]
fn removed_endpoint_is_no_longer_a_destination() {
    let mut node = node();
    assert!(
        node.datapath
            .remove_endpoint(IpAddr::V4(DST4))
            .expect("remove")
    );
    assert!(
        !node
            .datapath
            .remove_endpoint(IpAddr::V4(DST4))
            .expect("remove twice is a no-op")
    );
    let frame = frames::udp4(SRC4, DST4, 64, b"x");
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &frame),
        (TC_ACT_OK, frame)
    );
}

/// TCP between two local pods: redirected unless either socket has a flow through the stack
/// (a Service flow kube-proxy may have translated), in which case both directions go to the
/// stack untouched so conntrack sees the whole flow.
#[test]
fn a_flow_whose_socket_talked_through_the_stack_takes_the_stack_both_ways() {
    use weft_agent::datapath::stack::StackFlow;
    let mut node = node();
    let request = frames::tcp4(SRC4, 41000, DST4, 8080, 0x02, b"");
    let (verdict, _) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &request);
    assert_eq!(verdict, TC_ACT_REDIRECT, "nobody recorded: the fast path");

    // The pod's socket sends to a Service address: to the stack, and recorded.
    let vip = Ipv4Addr::new(10, 96, 0, 10);
    let to_service = frames::tcp4(SRC4, 41001, vip, 80, 0x02, b"");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &to_service);
    assert_eq!((verdict, &out), (TC_ACT_OK, &to_service));
    let recorded = node.datapath.list_stack_flows().expect("list");
    assert_eq!(
        recorded,
        [StackFlow {
            addr: IpAddr::V4(SRC4),
            port: 41001,
            proto: 6,
            peer: IpAddr::V4(vip),
            peer_port: 80,
        }]
    );

    // kube-proxy sent it to DST4:8080; the backend's reply to that socket takes the stack.
    // (The reply comes from DST4's veth, ifindex PEER_IFINDEX; here every frame enters on lo,
    // so the backend's side is played by swapping the roles of the two endpoints.)
    let mut node = swapped_roles(node);
    let reply = frames::tcp4(DST4, 8080, SRC4, 41001, 0x12, b"");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &reply);
    assert_eq!(
        (verdict, &out),
        (TC_ACT_OK, &reply),
        "reply to the stack untouched"
    );
    // The backend's socket is recorded with it (conntrack may give a later flow of the pair
    // another client port, and that reply must find the stack too) ...
    let recorded = node.datapath.list_stack_flows().expect("list");
    assert!(
        recorded.iter().any(|f| f.addr == IpAddr::V4(DST4)
            && f.port == 8080
            && f.peer == IpAddr::V4(SRC4)
            && f.peer_port == 41001),
        "{recorded:?}"
    );
    let remapped = frames::tcp4(DST4, 8080, SRC4, 1, 0x12, b"");
    let (verdict, _) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &remapped);
    assert_eq!(
        verdict, TC_ACT_OK,
        "from the recorded backend socket: the stack"
    );
    // ... while another socket of the same pods keeps the fast path.
    let other = frames::tcp4(DST4, 9090, SRC4, 41002, 0x12, b"");
    let (verdict, _) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &other);
    assert_eq!(verdict, TC_ACT_REDIRECT);
    assert_eq!(node.counters()["pass_stack_flow"], 2);

    // A socket recorded by hand (as by an earlier flow) sends its flows through the stack.
    node.datapath
        .upsert_stack_flow(&StackFlow {
            addr: IpAddr::V4(DST4),
            port: 9090,
            proto: 6,
            peer: IpAddr::V4(vip),
            peer_port: 80,
        })
        .expect("record");
    let (verdict, _) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &other);
    assert_eq!(verdict, TC_ACT_OK);
    assert_eq!(node.counters()["pass_stack_flow"], 3);
}

/// IPv6, UDP: the same decision; ICMP errors, fragments and IPv6 extension headers between
/// local pods always take the stack, echo requests keep the fast path.
#[test]
fn ipv6_stack_flows_icmp_errors_and_fragments_take_the_stack() {
    let mut node = node();
    let vip: Ipv6Addr = "fd00:96::10".parse().expect("ip");
    let query = frames::udp6_ports(SRC6, 5300, vip, 53, b"q");
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &query).0,
        TC_ACT_OK
    );
    let mut node = swapped_roles(node);
    let answer = frames::udp6_ports(DST6, 53, SRC6, 5300, b"a");
    let (verdict, out) = test_run(&mut node.datapath, PROG_FROM_CONTAINER, &answer);
    assert_eq!((verdict, &out), (TC_ACT_OK, &answer));

    // A hop-by-hop options header hides the ports: the stack decides.
    let plain = frames::udp6_ports(DST6, 8080, SRC6, 5301, b"a");
    let mut hidden = plain[..54].to_vec();
    hidden[14 + 6] = 0; // next header: hop-by-hop options
    let len = u16::from_be_bytes([hidden[18], hidden[19]]) + 8;
    hidden[18..20].copy_from_slice(&len.to_be_bytes());
    hidden.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]); // next: UDP; PadN
    hidden.extend_from_slice(&plain[54..]);
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &hidden).0,
        TC_ACT_OK
    );
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &plain).0,
        TC_ACT_REDIRECT,
        "the same packet without the header is redirected"
    );

    let echo = frames::icmp4_echo(DST4, SRC4, 8, 7, 1);
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &echo).0,
        TC_ACT_REDIRECT
    );
    let quoted = frames::udp4_ports(SRC4, 5301, DST4, 53, b"q");
    let error = frames::icmp4_error(DST4, SRC4, 3, 3, &quoted);
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &error).0,
        TC_ACT_OK
    );
    let mut fragment = frames::udp4_ports(DST4, 53, SRC4, 5302, b"a");
    fragment[14 + 6] = 0x20; // more fragments
    fragment[14 + 10..14 + 12].fill(0);
    let csum = frames::ipv4_header_csum(&fragment[14..34]);
    fragment[14 + 10..14 + 12].copy_from_slice(&csum.to_be_bytes());
    assert_eq!(
        test_run(&mut node.datapath, PROG_FROM_CONTAINER, &fragment).0,
        TC_ACT_OK
    );
    assert_eq!(node.counters()["pass_stack_flow"], 4);
}

/// The same node with DST4/DST6 behind `lo` (the sending veth here) and SRC4/SRC6 behind the
/// peer interface: frames from the other pod pass the anti-spoofing check.
fn swapped_roles(mut node: Node) -> Node {
    let dp = &mut node.datapath;
    let me = endpoint(LO, PEER_POD_MAC, LO_NODE_MAC);
    let peer = endpoint(PEER_IFINDEX, POD_MAC, PEER_NODE_MAC);
    for (ip, ep) in [
        (IpAddr::V4(DST4), me),
        (IpAddr::V6(DST6), me),
        (IpAddr::V4(SRC4), peer),
        (IpAddr::V6(SRC6), peer),
    ] {
        dp.upsert_endpoint(ip, &ep).expect("upsert endpoint");
    }
    node
}

//! `from_netdev`: replies restored to the pod and handed to the stack; flows the outside opens
//! to a pod.

use super::*;

#[test]
fn replies_are_reverse_natted_and_delivered_to_the_pod() {
    let mut node = node();
    let (_, out) = egress(&mut node, &frames::tcp4(POD, 1234, WORLD, 443, 0x02, b""));
    let port = view4(&out).sport;
    let reply = frames::tcp4(WORLD, 443, NODE_IP, port, 0x12, b"hello pod");
    let (verdict, out) = ingress(&mut node, &reply);
    assert_eq!(
        verdict, TC_ACT_OK,
        "handed to the stack, which routes it to the pod"
    );
    let v = view4(&out);
    assert_eq!((v.src, v.sport, v.dst, v.dport), (WORLD, 443, POD, 1234));
    assert!(v.ip_csum_ok, "IPv4 header checksum");
    assert!(v.l4_csum_ok, "TCP checksum");
    assert_eq!(
        v.ttl,
        view4(&reply).ttl,
        "the stack decrements the TTL, not the program"
    );
    assert_eq!(out[0..12], reply[0..12], "MACs untouched");
    assert_eq!(node.counters()["rev_snat"], 1);

    // A reply to a port nobody holds, and traffic below the range, go to the stack as is.
    for frame in [
        frames::tcp4(
            WORLD,
            443,
            NODE_IP,
            port.wrapping_add(1).max(NAT_PORT_MIN),
            0x12,
            b"",
        ),
        frames::tcp4(WORLD, 443, NODE_IP, 22, 0x02, b""),
        frames::icmp4_echo(WORLD, NODE_IP, 0, 999, 1),
    ] {
        assert_eq!(ingress(&mut node, &frame), (TC_ACT_OK, frame.clone()));
    }
    assert_eq!(node.counters()["rev_snat"], 1);
}

#[test]
fn flows_the_outside_opens_to_a_pod_go_to_the_stack_and_are_replied_unmasqueraded() {
    let mut node = node();
    let syn = frames::tcp4(WORLD, 50123, POD, 80, 0x02, b"");
    assert_eq!(
        ingress(&mut node, &syn),
        (TC_ACT_OK, syn.clone()),
        "to the stack as is"
    );
    assert_eq!(node.counters()["netdev_to_pod"], 1);
    let syn_ack = frames::tcp4(POD, 80, WORLD, 50123, 0x12, b"");
    assert_untouched(&mut node, &syn_ack, "snat_skip_reply");
    // A flow the pod opens to the same peer is still masqueraded.
    let (_, out) = egress(
        &mut node,
        &frames::tcp4(POD, 40000, WORLD, 50123, 0x02, b""),
    );
    assert_masqueraded(&out, WORLD);
}

#[test]
fn ipv6_to_a_local_pod_and_other_traffic_go_to_the_stack_untouched() {
    let mut node = node();
    let pod6: Ipv6Addr = "fd00:77::11".parse().expect("ip");
    node.datapath
        .upsert_endpoint(IpAddr::V6(pod6), &endpoint(0, 0))
        .expect("endpoint");
    let frame = frames::udp6("2001:db8::1".parse().expect("ip"), pod6, 64, b"hello");
    assert_eq!(ingress(&mut node, &frame), (TC_ACT_OK, frame.clone()));
    assert_eq!(node.counters()["netdev_to_pod"], 1);
    // Not for a pod, and not IP at all: the host stack gets them untouched.
    let other = frames::udp6(
        "2001:db8::1".parse().expect("ip"),
        "2001:db8::2".parse().expect("ip"),
        64,
        b"x",
    );
    assert_eq!(ingress(&mut node, &other), (TC_ACT_OK, other));
    let arp = frames::arp_request(Ipv4Addr::new(172, 31, 0, 1), NODE_IP);
    assert_eq!(ingress(&mut node, &arp), (TC_ACT_OK, arp));
    let host = frames::tcp4(WORLD, 443, NODE_IP, 22, 0x02, b"");
    assert_eq!(ingress(&mut node, &host), (TC_ACT_OK, host));
}

#[test]
fn icmp_errors_about_masqueraded_flows_reach_the_pod_with_the_quote_restored() {
    let mut node = node();
    let (_, syn) = egress(&mut node, &frames::tcp4(POD, 1234, WORLD, 443, 0x02, b""));
    assert_ne!(view4(&syn).sport, 1234, "the SYN left with a node port");
    let router = Ipv4Addr::new(203, 0, 113, 1);
    // "Fragmentation needed", quoting the masqueraded SYN as it left the node.
    let error = frames::icmp4_error(router, NODE_IP, 3, 4, &syn);
    let (verdict, out) = ingress(&mut node, &error);
    assert_eq!(verdict, TC_ACT_OK, "restored, then to the stack");
    let outer = view4(&out);
    assert_eq!((outer.src, outer.dst), (router, POD));
    assert!(outer.ip_csum_ok, "outer IPv4 checksum");
    assert!(outer.l4_csum_ok, "ICMP checksum over the rewritten quote");
    let quoted = &out[34 + 8..];
    assert_eq!(quoted[12..16], POD.octets(), "quoted source is the pod");
    assert_eq!(quoted[16..20], WORLD.octets());
    assert_eq!(
        frames::ipv4_header_csum(&quoted[..20]),
        0,
        "quoted IPv4 checksum"
    );
    assert_eq!(
        u16::from_be_bytes([quoted[20], quoted[21]]),
        1234,
        "quoted source port is the pod's"
    );
    // An error quoting a flow nobody mapped goes to the host untouched.
    let stray = frames::tcp4(NODE_IP, 50999, WORLD, 443, 0x02, b"");
    let error = frames::icmp4_error(router, NODE_IP, 11, 0, &stray);
    assert_eq!(ingress(&mut node, &error), (TC_ACT_OK, error));
}

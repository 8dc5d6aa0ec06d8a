//! `from_netdev`: replies restored to the pod and delivered; flows the outside opens to a pod.

use super::*;

#[test]
fn replies_are_reverse_natted_and_delivered_to_the_pod() {
    let mut node = node();
    let (_, out) = egress(&mut node, &frames::tcp4(POD, 1234, WORLD, 443, 0x02, b""));
    let port = view4(&out).sport;
    let reply = frames::tcp4(WORLD, 443, NODE_IP, port, 0x12, b"hello pod");
    let (verdict, out) = ingress(&mut node, &reply);
    assert_eq!(verdict, TC_ACT_REDIRECT, "delivered with bpf_redirect_peer");
    let v = view4(&out);
    assert_eq!((v.src, v.sport, v.dst, v.dport), (WORLD, 443, POD, 1234));
    assert!(v.ip_csum_ok, "IPv4 header checksum");
    assert!(v.l4_csum_ok, "TCP checksum");
    assert_eq!(v.ttl, 63, "routed: TTL decremented");
    assert_eq!((&out[0..6], &out[6..12]), (&POD_MAC[..], &POD_NODE_MAC[..]));
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
fn flows_the_outside_opens_to_a_pod_are_delivered_and_replied_unmasqueraded() {
    let mut node = node();
    let syn = frames::tcp4(WORLD, 50123, POD, 80, 0x02, b"");
    let (verdict, out) = ingress(&mut node, &syn);
    assert_eq!(verdict, TC_ACT_REDIRECT);
    assert_eq!(view4(&out).ttl, 63);
    assert!(view4(&out).ip_csum_ok);
    assert_eq!(node.counters()["redirect_local"], 1);
    let syn_ack = frames::tcp4(POD, 80, WORLD, 50123, 0x12, b"");
    assert_untouched(&mut node, &syn_ack, "snat_skip_reply");
    // A flow the pod opens to the same peer is still masqueraded.
    let (_, out) = egress(
        &mut node,
        &frames::tcp4(POD, 40000, WORLD, 50123, 0x02, b""),
    );
    assert_masqueraded(&out, WORLD);
}

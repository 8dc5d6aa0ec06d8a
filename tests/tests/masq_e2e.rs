//! Masquerade end to end on the real kernel. The test thread's node namespace gets a veth to
//! an "external host" namespace (node side `44.77.0.2/24` with `to_netdev`/`from_netdev`
//! attached, external side `44.77.0.1`), IPv4 forwarding on inside the node only. Pods ping and
//! TCP-connect to the external host; the server reports the peer address it saw: the node IP
//! when masqueraded, the pod IP for a no-SNAT endpoint or an excluded destination (the external
//! host then routes the pod CIDR back via the node). Also: a masqueraded connection across ten
//! datapath reloads (TCX and netlink), and 1000 concurrent UDP flows from four pods. The IPv6
//! tests do the same over the link's IPv6 addresses (`2001:db8:44::2` on the node side, pods in
//! `fd00:77::/64`): ICMPv6 echo, TCP and UDP leave as the node's IPv6 address, a no-SNAT pod
//! keeps its own, and an ICMPv6 error about a masqueraded flow reaches the pod's socket.

use std::{
    collections::BTreeSet,
    io::{Read as _, Write as _},
    net::{IpAddr, SocketAddr, TcpStream, UdpSocket},
    time::Duration,
};

use agent_common::endpoint::{ENDPOINT_F_NO_SNAT_V4, ENDPOINT_F_NO_SNAT_V6};
use weft_agent::{
    datapath::{AttachMode, NetdevConfig, PoolIdPerFamily, netns::in_netns},
    masq::{MasqConfig, Masquerade},
};
use weft_tests::{
    Node,
    external::{EXT_IP, EXT_IP6, External, NODE_DEV, NODE_IP, NODE_IP6},
};

/// The external host, with the datapath's native-device programs on the node side.
fn external(node: &mut Node) -> External {
    External::masquerading(node, &["10.77.0.0/24"])
}

/// As [`external`], with IPv6 masquerading to [`NODE_IP6`] too; the external host routes the
/// pods' IPv6 prefix back via the node.
fn external6(node: &mut Node) -> External {
    let ext = External::new(&["10.77.0.0/24", "fd00:77::/64"]);
    let dp = &mut node.datapath;
    dp.attach_netdev(
        NODE_DEV,
        &NetdevConfig {
            masq_v4: Some(NODE_IP),
            masq_v6: Some(NODE_IP6),
        },
    )
    .expect("attach to_netdev/from_netdev");
    dp.ensure_world_ipcache().expect("world");
    dp.sync_host_ips(&[IpAddr::V4(NODE_IP), IpAddr::V6(NODE_IP6)])
        .expect("host ips");
    ext
}

/// Send one UDP datagram from inside `netns` to `to` and wait for its echo; returns the
/// sending socket's port.
fn udp_round_trip(netns: &std::path::Path, to: SocketAddr) -> u16 {
    let socket = in_netns(netns, || UdpSocket::bind("[::]:0"))
        .expect("enter pod netns")
        .expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    socket.send_to(b"ping6", to).expect("send");
    let mut buf = [0u8; 8];
    let (n, from) = socket.recv_from(&mut buf).expect("UDP echo back");
    assert_eq!((&buf[..n], from), (&b"ping6"[..], to));
    socket.local_addr().expect("local address").port()
}

#[test]
fn ipv6_default_pool_pod_reaches_the_outside_as_the_node() {
    let mut node = Node::new();
    let pod = node.add_pod(10);
    let ext = external6(&mut node);
    assert!(
        pod.ping(IpAddr::V6(EXT_IP6), 3, "0.05"),
        "ICMPv6 echo through SNAT"
    );
    let tcp = SocketAddr::new(IpAddr::V6(EXT_IP6), 7120);
    assert_eq!(
        ext.tcp_peer_on(&pod.netns.path(), tcp),
        IpAddr::V6(NODE_IP6),
        "TCP server sees the node IPv6"
    );
    let udp = SocketAddr::new(IpAddr::V6(EXT_IP6), 7121);
    let server = ext.udp_echo_server_on(udp, 1);
    let _ = udp_round_trip(&pod.netns.path(), udp);
    let senders = server.join().expect("server");
    assert_eq!(senders.len(), 1);
    assert_eq!(
        senders[0].ip(),
        IpAddr::V6(NODE_IP6),
        "UDP server sees the node IPv6"
    );
    let counters = node.counters();
    assert!(counters["snat"] >= 7, "{counters:?}");
    assert!(counters["rev_snat"] >= 6, "{counters:?}");
    let nat = node.datapath.list_nat().expect("nat list");
    for proto in ["tcp", "udp", "icmpv6"] {
        assert!(
            nat.iter().any(|r| r.proto == proto
                && r.direction == "egress"
                && r.saddr == IpAddr::V6(pod.v6)
                && r.to_addr == IpAddr::V6(NODE_IP6)),
            "{proto}: {nat:?}"
        );
    }
    // IPv4 from the same pod is still masqueraded to the IPv4 address.
    assert_eq!(ext.tcp_peer(&pod.netns.path(), 7122), IpAddr::V4(NODE_IP));
}

#[test]
fn ipv6_no_snat_endpoint_reaches_the_outside_with_its_own_address() {
    let mut node = Node::new();
    let pod = node.add_pod_with(11, ENDPOINT_F_NO_SNAT_V6, PoolIdPerFamily::both(5));
    let ext = external6(&mut node);
    assert!(pod.ping(IpAddr::V6(EXT_IP6), 2, "0.05"));
    let tcp = SocketAddr::new(IpAddr::V6(EXT_IP6), 7123);
    assert_eq!(
        ext.tcp_peer_on(&pod.netns.path(), tcp),
        IpAddr::V6(pod.v6),
        "server sees the pod IPv6"
    );
    let udp = SocketAddr::new(IpAddr::V6(EXT_IP6), 7124);
    let server = ext.udp_echo_server_on(udp, 1);
    let port = udp_round_trip(&pod.netns.path(), udp);
    assert_eq!(
        server.join().expect("server"),
        [SocketAddr::new(IpAddr::V6(pod.v6), port)],
        "UDP server sees the pod IPv6 and port"
    );
    let counters = node.counters();
    assert_eq!(counters["snat"], 0, "{counters:?}");
    assert!(counters["snat_skip_endpoint"] >= 5, "{counters:?}");
    assert!(counters["netdev_to_pod"] >= 4, "{counters:?}");
}

/// The external host answers a masqueraded UDP datagram to a closed port with ICMPv6 "port
/// unreachable" to the node's IPv6 address: `from_netdev` restores the quote and delivers it.
#[test]
fn icmpv6_errors_about_masqueraded_flows_reach_the_pod_socket() {
    let mut node = Node::new();
    let pod = node.add_pod(12);
    let _ext = external6(&mut node);
    assert_port_unreachable_reaches(&mut node, &pod, IpAddr::V6(EXT_IP6));
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
    let pod = node.add_pod_with(2, ENDPOINT_F_NO_SNAT_V4, PoolIdPerFamily::both(5));
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
        counters["netdev_to_pod"] >= 2,
        "replies handed to the stack for the pod: {counters:?}"
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

/// The external host answers a masqueraded UDP datagram to a closed port with ICMP "port
/// unreachable" addressed to the node: `from_netdev` restores the quote and delivers it, so the
/// pod's connected socket sees `ECONNREFUSED`.
#[test]
fn icmp_errors_about_masqueraded_flows_reach_the_pod_socket() {
    let mut node = Node::new();
    let pod = node.add_pod(9);
    let _ext = external(&mut node);
    assert_port_unreachable_reaches(&mut node, &pod, IpAddr::V4(EXT_IP));
}

/// A UDP datagram from `pod` to a closed port of the external host `ext`: the host's "port
/// unreachable", reverse-translated by `from_netdev`, reaches the pod's connected socket.
fn assert_port_unreachable_reaches(node: &mut Node, pod: &weft_tests::Pod, ext: IpAddr) {
    let any = if ext.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let socket = in_netns(&pod.netns.path(), || UdpSocket::bind(any))
        .expect("enter pod netns")
        .expect("bind");
    socket.connect(SocketAddr::new(ext, 9)).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    socket.send(b"anyone?").expect("send");
    let err = socket
        .recv(&mut [0u8; 16])
        .expect_err("no answer but an error");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    assert!(node.counters()["rev_snat"] >= 1);
}

/// A masqueraded TCP connection keeps working while the datapath is reloaded ten times
/// (links re-adopted, NAT map kept): TCX and netlink attachment.
#[test]
fn masqueraded_connection_survives_datapath_restarts() {
    for mode in [AttachMode::Tcx, AttachMode::Netlink] {
        let mut node = Node::with_attach_mode(mode);
        let pod = node.add_pod(4);
        let ext = external(&mut node);
        let server = ext.tcp_echo_server(7110);
        let addr = SocketAddr::new(IpAddr::V4(EXT_IP), 7110);
        let mut client = in_netns(&pod.netns.path(), || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        })
        .expect("enter pod netns")
        .expect("connect");
        client
            .set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        for round in 0..10u8 {
            node.restart_datapath();
            let msg = [round; 100];
            client.write_all(&msg).expect("send after restart");
            let mut back = [0u8; 100];
            client
                .read_exact(&mut back)
                .unwrap_or_else(|e| panic!("{mode:?}: echo after restart {round}: {e}"));
            assert_eq!(back, msg);
        }
        drop(client);
        let (peer, bytes) = server.join().expect("server");
        assert_eq!((peer, bytes), (IpAddr::V4(NODE_IP), 1000), "{mode:?}");
        let tcp_flows = node
            .datapath
            .list_nat()
            .expect("nat")
            .into_iter()
            .filter(|r| r.proto == "tcp" && r.direction == "egress")
            .count();
        assert_eq!(
            tcp_flows, 1,
            "{mode:?}: one mapping for the whole connection"
        );
    }
}

/// 1000 concurrent UDP flows from four pods (whose ephemeral ports overlap) to one external
/// port: every flow gets its own node port and every reply reaches its socket.
#[test]
fn a_thousand_concurrent_udp_flows_get_distinct_ports_and_all_replies() {
    const PER_POD: usize = 250;
    let mut node = Node::new();
    let pods: Vec<_> = (5..9).map(|n| node.add_pod(n)).collect();
    let ext = external(&mut node);
    // Resolve the neighbours first: packets queued behind an unresolved one are capped.
    assert!(pods[0].ping(IpAddr::V4(EXT_IP), 1, "0.1"));
    let server = ext.udp_echo_server(9000, pods.len() * PER_POD);
    let target = SocketAddr::new(IpAddr::V4(EXT_IP), 9000);
    let mut sockets = Vec::new();
    for pod in &pods {
        for _ in 0..PER_POD {
            let socket = in_netns(&pod.netns.path(), || UdpSocket::bind("0.0.0.0:0"))
                .expect("enter pod netns")
                .expect("bind in the pod");
            socket
                .set_read_timeout(Some(Duration::from_secs(3)))
                .expect("timeout");
            sockets.push(socket);
        }
    }
    for (i, socket) in sockets.iter().enumerate() {
        socket
            .send_to(&u32::try_from(i).expect("small").to_be_bytes(), target)
            .expect("send");
    }
    for (i, socket) in sockets.iter().enumerate() {
        let mut buf = [0u8; 4];
        let (n, from) = socket
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("no reply for flow {i}: {e}"));
        assert_eq!((n, from), (4, target));
        assert_eq!(u32::from_be_bytes(buf), u32::try_from(i).expect("small"));
    }
    let senders = server.join().expect("server");
    assert_eq!(senders.len(), sockets.len());
    assert!(
        senders.iter().all(|s| s.ip() == IpAddr::V4(NODE_IP)),
        "all masqueraded"
    );
    let ports: BTreeSet<u16> = senders.iter().map(SocketAddr::port).collect();
    assert_eq!(ports.len(), sockets.len(), "no two flows share a node port");
    let pod_ports: Vec<u16> = sockets
        .iter()
        .map(|s| s.local_addr().expect("addr").port())
        .collect();
    let distinct: BTreeSet<u16> = pod_ports.iter().copied().collect();
    eprintln!(
        "{} flows, {} distinct pod ports (collisions resolved: {})",
        sockets.len(),
        distinct.len(),
        sockets.len() - distinct.len()
    );
    let counters = node.counters();
    assert_eq!(counters["drop_nat_no_port"], 0, "{counters:?}");
    assert!(counters["rev_snat"] >= 1000, "{counters:?}");
}

//! Services through kube-proxy on the real kernel, in both proxy modes that run here
//! (`iptables` and `nftables`), with the rules written as kube-proxy writes them
//! (`weft_tests::kube_proxy`) on both nodes. Node 1 (the test thread's namespace) has pods A
//! (client) and B (backend), node 2 (`RemoteNode`) pod C (backend); an external host sits
//! behind node 1 (`External`, node address 44.77.0.2, BPF masquerade on that device). Backends
//! answer each TCP connection and UDP datagram with their name, so a client sees who answered
//! and from which address.
//!
//! What must hold: every connection to a ClusterIP is answered whether its backend shares the
//! client's node, sits on the other node, or both; a UDP answer comes from the Service address
//! (kube-proxy's DNAT undone); `sessionAffinity: ClientIP` keeps one backend; a NodePort
//! reached from outside and from a pod; a pod reaching itself through its Service (hairpin);
//! and a direct pod → remote pod flow under kube-proxy's `KUBE-FORWARD` (which drops what
//! conntrack calls `INVALID`).

use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, UdpSocket},
    os::fd::AsRawFd as _,
    path::Path,
    time::Duration,
};

use weft_agent::datapath::netns::in_netns;
use weft_tests::{
    Node, Pod,
    cluster::{NODE1_IP, NODE2_IP, RemoteNode, link, tcp_name_server, udp_name_server},
    external::{External, NODE_IP},
    kube_proxy::{self, Mode, Protocol, Proxy, Service},
};

/// ClusterIP whose only backend is B (same node as the client).
const VIP_LOCAL: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
/// ClusterIP whose only backend is C (the other node).
const VIP_REMOTE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 11);
/// ClusterIP with both B and C.
const VIP_BOTH: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 12);
/// ClusterIP with both, `sessionAffinity: ClientIP`.
const VIP_STICKY: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 13);
/// A second ClusterIP whose only backend is B (two Services sharing a backend).
const VIP_LOCAL2: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 14);
/// NodePorts of the local-only and the remote-only Service.
const NODE_PORT_LOCAL: u16 = 30080;
const NODE_PORT_REMOTE: u16 = 30081;
/// Backend ports (the Services' targetPorts).
const TCP_PORT: u16 = 8080;
const UDP_PORT: u16 = 5353;

/// Both nodes, three pods, the external host, servers running and kube-proxy's rules in place.
struct Cluster {
    /// Node 1; dropped first (its namespace goes with it).
    node: Node,
    /// Node 2, on its own thread.
    _remote: RemoteNode,
    ext: External,
    a: Pod,
    b: Pod,
    c: Pod,
}

fn service(name: &str, protocol: Protocol, vip: Ipv4Addr, backends: &[Ipv4Addr]) -> Service {
    let (port, target) = match protocol {
        Protocol::Tcp => (80, TCP_PORT),
        Protocol::Udp => (53, UDP_PORT),
    };
    Service {
        namespace: "default".into(),
        name: name.into(),
        port_name: match protocol {
            Protocol::Tcp => "http".into(),
            Protocol::Udp => "dns".into(),
        },
        protocol,
        cluster_ip: vip,
        port,
        node_port: None,
        affinity_timeout: None,
        endpoints: backends
            .iter()
            .map(|ip| SocketAddrV4::new(*ip, target))
            .collect(),
    }
}

fn services(b: Ipv4Addr, c: Ipv4Addr) -> Vec<Service> {
    let mut local = service("local", Protocol::Tcp, VIP_LOCAL, &[b]);
    local.node_port = Some(NODE_PORT_LOCAL);
    let mut remote = service("remote", Protocol::Tcp, VIP_REMOTE, &[c]);
    remote.node_port = Some(NODE_PORT_REMOTE);
    let mut sticky = service("sticky", Protocol::Tcp, VIP_STICKY, &[b, c]);
    sticky.affinity_timeout = Some(10800);
    vec![
        local,
        service("local", Protocol::Udp, VIP_LOCAL, &[b]),
        remote,
        service("remote", Protocol::Udp, VIP_REMOTE, &[c]),
        service("both", Protocol::Tcp, VIP_BOTH, &[b, c]),
        sticky,
        service("local2", Protocol::Tcp, VIP_LOCAL2, &[b]),
    ]
}

fn proxy(node_ips: Vec<Ipv4Addr>) -> Proxy {
    Proxy {
        cluster_cidr: "10.77.0.0/16".parse().expect("cluster CIDR"),
        node_ips,
    }
}

fn serve(pod: &Pod, name: &'static str) {
    let ip = IpAddr::V4(pod.v4);
    tcp_name_server(&pod.netns.path(), SocketAddr::new(ip, TCP_PORT), name);
    udp_name_server(&pod.netns.path(), SocketAddr::new(ip, UDP_PORT), name);
}

fn cluster(mode: Mode) -> Cluster {
    let mut node = Node::new();
    let remote = RemoteNode::start();
    let a = node.add_pod(1);
    let b = node.add_pod(2);
    let c = remote.run(|node| node.add_pod(50));
    let ext = External::masquerading(&mut node, &["10.77.0.0/24"]);
    node.datapath
        .sync_host_ips(&[IpAddr::V4(NODE_IP), IpAddr::V4(NODE1_IP)])
        .expect("host ips");
    link(&mut node, &remote, &[a.v4, b.v4], &[c.v4]);
    serve(&b, "B");
    serve(&c, "C");
    let rules = services(b.v4, c.v4);
    kube_proxy::apply(mode, &proxy(vec![NODE_IP, NODE1_IP]), &rules);
    remote.run(move |_| kube_proxy::apply(mode, &proxy(vec![NODE2_IP]), &rules));
    Cluster {
        node,
        _remote: remote,
        ext,
        a,
        b,
        c,
    }
}

/// Open `count` TCP connections from inside `netns` to `to`, one after the other; each sends a
/// line and must be answered. Returns how many answers each backend name gave.
fn tcp_answers(netns: &Path, to: SocketAddr, count: usize) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for i in 0..count {
        let mut conn = in_netns(netns, || {
            TcpStream::connect_timeout(&to, Duration::from_secs(3))
        })
        .expect("enter the client's netns")
        .unwrap_or_else(|e| panic!("connection {i} of {count} to {to}: {e}"));
        conn.set_read_timeout(Some(Duration::from_secs(3)))
            .expect("timeout");
        conn.write_all(b"hello").expect("send");
        let mut name = String::new();
        conn.read_to_string(&mut name)
            .unwrap_or_else(|e| panic!("answer on connection {i} of {count} to {to}: {e}"));
        assert!(!name.is_empty(), "connection {i} to {to} closed unanswered");
        *seen.entry(name).or_insert(0) += 1;
    }
    seen
}

/// Send `count` DNS-like queries from one unconnected UDP socket inside `netns` to `to`; every
/// answer must come from `to` (the Service address, not the backend's). Returns the names.
fn udp_answers(netns: &Path, to: SocketAddr, count: usize) -> BTreeMap<String, usize> {
    let socket = in_netns(netns, || UdpSocket::bind("0.0.0.0:0"))
        .expect("enter the client's netns")
        .expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    let mut seen = BTreeMap::new();
    for i in 0..count {
        socket.send_to(b"query", to).expect("send");
        let mut buf = [0u8; 64];
        let (n, from) = socket
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("answer to query {i} of {count} to {to}: {e}"));
        assert_eq!(
            from, to,
            "query {i}: the answer must come from the Service address"
        );
        *seen
            .entry(String::from_utf8_lossy(&buf[..n]).into_owned())
            .or_insert(0) += 1;
    }
    seen
}

/// One TCP connection from inside `netns`, from source port `port` (`SO_REUSEADDR`), to `to`;
/// the backend's answer.
fn tcp_answer_from_port(netns: &Path, port: u16, to: SocketAddr) -> String {
    use nix::sys::{
        socket::{
            AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, setsockopt, socket,
            sockopt,
        },
        time::TimeVal,
    };
    let SocketAddr::V4(to4) = to else {
        panic!("IPv4 only: {to}")
    };
    let fd = in_netns(netns, || {
        socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
    })
    .expect("enter the client's netns")
    .expect("socket");
    setsockopt(&fd, sockopt::ReuseAddr, &true).expect("SO_REUSEADDR");
    // connect() gives up after SO_SNDTIMEO.
    setsockopt(&fd, sockopt::SendTimeout, &TimeVal::new(3, 0)).expect("SO_SNDTIMEO");
    bind(fd.as_raw_fd(), &SockaddrIn::new(0, 0, 0, 0, port)).expect("bind the source port");
    connect(fd.as_raw_fd(), &SockaddrIn::from(to4))
        .unwrap_or_else(|e| panic!("connect from port {port} to {to}: {e} (no answer in 3 s)"));
    let mut conn = TcpStream::from(fd);
    conn.set_read_timeout(Some(Duration::from_secs(3)))
        .expect("timeout");
    conn.write_all(b"hello").expect("send");
    let mut name = String::new();
    conn.read_to_string(&mut name)
        .unwrap_or_else(|e| panic!("answer from port {port} to {to}: {e}"));
    name
}

fn only(name: &str, count: usize) -> BTreeMap<String, usize> {
    BTreeMap::from([(name.to_owned(), count)])
}

fn at(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(ip), port)
}

fn same_node_cluster_ip_tcp(mode: Mode) {
    let mut k = cluster(mode);
    let a = k.a.netns.path();
    // Pod to pod without a Service keeps the redirect past the stack (before any Service flow:
    // a later direct connection may reuse a Service connection's source port, and then takes
    // the stack, as `a_source_port_reused_between_service_and_direct` shows).
    assert_eq!(tcp_answers(&a, at(k.b.v4, TCP_PORT), 20), only("B", 20));
    assert!(
        k.node.counters()["redirect_local"] >= 20 * 3,
        "the untranslated flows were redirected: {:?}",
        k.node.counters()
    );
    assert_eq!(tcp_answers(&a, at(VIP_LOCAL, 80), 300), only("B", 300));
}

fn same_node_cluster_ip_udp(mode: Mode) {
    let k = cluster(mode);
    assert_eq!(
        udp_answers(&k.a.netns.path(), at(VIP_LOCAL, 53), 50),
        only("B", 50)
    );
}

fn remote_cluster_ip_tcp(mode: Mode) {
    let k = cluster(mode);
    let a = k.a.netns.path();
    assert_eq!(tcp_answers(&a, at(VIP_REMOTE, 80), 300), only("C", 300));
}

fn remote_cluster_ip_udp(mode: Mode) {
    let k = cluster(mode);
    assert_eq!(
        udp_answers(&k.a.netns.path(), at(VIP_REMOTE, 53), 50),
        only("C", 50)
    );
}

fn cluster_ip_with_both_backends(mode: Mode) {
    let k = cluster(mode);
    let seen = tcp_answers(&k.a.netns.path(), at(VIP_BOTH, 80), 300);
    assert_eq!(seen.values().sum::<usize>(), 300, "{seen:?}");
    assert!(
        seen.get("B").is_some_and(|n| *n > 0) && seen.get("C").is_some_and(|n| *n > 0),
        "kube-proxy's random choice reached both backends: {seen:?}"
    );
}

fn session_affinity_keeps_one_backend(mode: Mode) {
    let k = cluster(mode);
    let seen = tcp_answers(&k.a.netns.path(), at(VIP_STICKY, 80), 100);
    assert_eq!(
        seen.len(),
        1,
        "ClientIP affinity keeps one backend: {seen:?}"
    );
    assert_eq!(seen.values().sum::<usize>(), 100);
}

fn node_port_from_outside_and_from_a_pod(mode: Mode) {
    let k = cluster(mode);
    let ext = k.ext.netns.path();
    assert_eq!(
        tcp_answers(&ext, at(NODE_IP, NODE_PORT_LOCAL), 100),
        only("B", 100)
    );
    assert_eq!(
        tcp_answers(&ext, at(NODE_IP, NODE_PORT_REMOTE), 100),
        only("C", 100)
    );
    let a = k.a.netns.path();
    assert_eq!(
        tcp_answers(&a, at(NODE_IP, NODE_PORT_LOCAL), 50),
        only("B", 50)
    );
    assert_eq!(
        tcp_answers(&a, at(NODE_IP, NODE_PORT_REMOTE), 50),
        only("C", 50)
    );
}

fn hairpin(mode: Mode) {
    let k = cluster(mode);
    let b = k.b.netns.path();
    assert_eq!(tcp_answers(&b, at(VIP_LOCAL, 80), 100), only("B", 100));
    assert_eq!(udp_answers(&b, at(VIP_LOCAL, 53), 20), only("B", 20));
}

fn remote_pod_directly_under_kube_forward(mode: Mode) {
    let k = cluster(mode);
    let a = k.a.netns.path();
    assert_eq!(tcp_answers(&a, at(k.c.v4, TCP_PORT), 100), only("C", 100));
    let c = k.c.netns.path();
    assert_eq!(tcp_answers(&c, at(k.b.v4, TCP_PORT), 100), only("B", 100));
}

/// A pod's source port used for a Service connection, then for a direct one to the same
/// backend: conntrack still holds the first (`TIME_WAIT`) with the reply tuple the second would
/// have, so it gives the second another source port; the reply must still be translated back.
/// And the other order.
fn a_source_port_reused_between_service_and_direct(mode: Mode) {
    let k = cluster(mode);
    let a = k.a.netns.path();
    let b = at(k.b.v4, TCP_PORT);
    assert_eq!(tcp_answer_from_port(&a, 40123, at(VIP_LOCAL, 80)), "B");
    assert_eq!(tcp_answer_from_port(&a, 40123, b), "B");
    assert_eq!(tcp_answer_from_port(&a, 40124, b), "B");
    assert_eq!(tcp_answer_from_port(&a, 40124, at(VIP_LOCAL, 80)), "B");
}

/// One source port for two Services that share their backend: the second flow's reply tuple
/// clashes with the first's (still in conntrack), so conntrack gives it another source port,
/// and the backend's reply goes to a port the client never chose; it must be translated back.
fn a_source_port_reused_between_two_services_of_one_backend(mode: Mode) {
    let k = cluster(mode);
    let a = k.a.netns.path();
    assert_eq!(tcp_answer_from_port(&a, 40125, at(VIP_LOCAL, 80)), "B");
    assert_eq!(tcp_answer_from_port(&a, 40125, at(VIP_LOCAL2, 80)), "B");
}

macro_rules! both_modes {
    ($($case:ident),+ $(,)?) => {
        mod iptables {
            $(#[test] fn $case() { super::$case(super::Mode::Iptables) })+
        }
        mod nftables {
            $(#[test] fn $case() { super::$case(super::Mode::Nftables) })+
        }
    };
}

both_modes!(
    same_node_cluster_ip_tcp,
    same_node_cluster_ip_udp,
    remote_cluster_ip_tcp,
    remote_cluster_ip_udp,
    cluster_ip_with_both_backends,
    session_affinity_keeps_one_backend,
    node_port_from_outside_and_from_a_pod,
    hairpin,
    remote_pod_directly_under_kube_forward,
    a_source_port_reused_between_service_and_direct,
    a_source_port_reused_between_two_services_of_one_backend,
);

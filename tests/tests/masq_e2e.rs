//! Masquerade end to end on the real kernel. The test thread's node namespace gets a veth to
//! an "external host" namespace (node side `44.77.0.2/24` with `to_netdev`/`from_netdev`
//! attached, external side `44.77.0.1`), IPv4 forwarding on inside the node only. Pods ping and
//! TCP-connect to the external host; the server reports the peer address it saw: the node IP
//! when masqueraded, the pod IP for a no-SNAT endpoint or an excluded destination (the external
//! host then routes the pod CIDR back via the node).

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream},
    process::Command,
    thread,
    time::Duration,
};

use agent_common::endpoint::ENDPOINT_F_NO_SNAT_V4;
use weft_agent::{
    datapath::{NetdevConfig, netns::in_netns},
    masq::{MasqConfig, Masquerade},
};
use weft_tests::{NamedNetNs, Node, Pod, run};

const NODE_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 2);
const EXT_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 1);
const NODE_DEV: &str = "wnode";
const EXT_DEV: &str = "wext";

/// The external host: a namespace behind `wnode`, with a route back to the pods via the node.
struct External {
    netns: NamedNetNs,
}

fn external(node: &mut Node) -> External {
    let netns = NamedNetNs::new();
    run(Command::new("ip").args([
        "link",
        "add",
        NODE_DEV,
        "type",
        "veth",
        "peer",
        "name",
        EXT_DEV,
        "netns",
        &netns.name,
    ]));
    run(Command::new("ip").args(["addr", "add", "44.77.0.2/24", "dev", NODE_DEV]));
    run(Command::new("ip").args(["link", "set", NODE_DEV, "up"]));
    for args in [
        &["addr", "add", "44.77.0.1/24", "dev", EXT_DEV][..],
        &["link", "set", EXT_DEV, "up"],
        &["link", "set", "lo", "up"],
        &["route", "add", "10.77.0.0/24", "via", "44.77.0.2"],
    ] {
        run(netns.command("ip").args(args));
    }
    run(Command::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
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
    External { netns }
}

impl External {
    /// Accept one TCP connection on `EXT_IP:port` from `pod`, echo a line, return the peer
    /// address the server saw.
    fn tcp_peer(&self, pod: &Pod, port: u16) -> IpAddr {
        let addr = SocketAddr::new(IpAddr::V4(EXT_IP), port);
        let listener = in_netns(&self.netns.path(), || TcpListener::bind(addr))
            .expect("enter external netns")
            .expect("bind on the external host");
        let server = thread::spawn(move || {
            let (mut conn, peer) = listener.accept().expect("accept");
            let mut buf = [0u8; 5];
            conn.read_exact(&mut buf).expect("read");
            conn.write_all(&buf).expect("echo");
            peer.ip()
        });
        let mut client = in_netns(&pod.netns.path(), || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        })
        .expect("enter pod netns")
        .expect("connect from the pod");
        client.write_all(b"hello").expect("send");
        let mut echoed = [0u8; 5];
        client.read_exact(&mut echoed).expect("echo back");
        assert_eq!(&echoed, b"hello");
        server.join().expect("server")
    }
}

#[test]
fn default_pool_pod_reaches_the_outside_as_the_node() {
    let mut node = Node::new();
    let pod = node.add_pod(1);
    let ext = external(&mut node);
    assert!(pod.ping(IpAddr::V4(EXT_IP), 3, "0.05"), "ping through SNAT");
    assert_eq!(
        ext.tcp_peer(&pod, 7100),
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
        ext.tcp_peer(&pod, 7101),
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
        ext.tcp_peer(&pod, 7102),
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
        ext.tcp_peer(&pod, 7103),
        IpAddr::V4(pod.v4),
        "still excluded"
    );

    // Removing the exclusion masquerades new flows again.
    std::fs::write(&file, "nonMasqueradeCIDRs: []\n").expect("write config");
    masq.reload(&mut node.datapath).expect("apply");
    assert_eq!(
        ext.tcp_peer(&pod, 7104),
        IpAddr::V4(NODE_IP),
        "masqueraded again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! pod → ClusterIP → pod on one node, with the Service translated by kube-proxy's own rules
//! (`crate::kube_proxy`, iptables mode, the mode most clusters run): TCP and UDP round-trip
//! latency and single-stream TCP throughput through the Service, for Debian's `bridge` CNI
//! (with `bridge-nf-call-iptables`, without which a bridged reply skips conntrack and the
//! client resets), for weft, and for weft pod to pod without a Service (what the Service costs
//! on the same datapath). The Service forwards qperf's synchronisation and test ports and
//! iperf3's port to the server pod; the setups, rounds and table are `net`'s.

use std::{
    net::{Ipv4Addr, SocketAddrV4},
    process::Command,
};

use anyhow::Result;

use super::net::{
    BridgeNet, IPERF_PORT, NetOptions, Pods, QPERF_DATA_PORT, QPERF_PORT, compare, pods, weft,
};
use crate::{
    NamedNetNs, Node, ThreadNetNs,
    kube_proxy::{self, Mode, Protocol, Proxy, Service},
    run,
};

/// The Service's ClusterIP.
const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 50);

/// Measure the three setups and print the table (weft + kube-proxy last, with its ratios).
///
/// # Errors
/// As `net::run`.
pub fn run_service(opts: &NetOptions) -> Result<()> {
    compare(
        opts,
        "pod -> ClusterIP -> pod (same node, kube-proxy iptables mode)",
        [
            ("bridge + kube-proxy", bridge_service),
            ("weft pod-to-pod", weft),
            ("weft + kube-proxy", weft_service),
        ],
        "weft pass_stack_flow counter",
    )
}

/// One Service with every port the benchmark tools use, backed by `server`.
fn services(server: Ipv4Addr) -> Vec<Service> {
    let port = |name: &str, protocol, port: &str| {
        let port: u16 = port.parse().expect("a port number");
        Service {
            namespace: "bench".into(),
            name: "server".into(),
            port_name: name.into(),
            protocol,
            cluster_ip: VIP,
            port,
            node_port: None,
            affinity_timeout: None,
            endpoints: vec![SocketAddrV4::new(server, port)],
        }
    };
    vec![
        port("qperf", Protocol::Tcp, QPERF_PORT),
        port("qperf-tcp", Protocol::Tcp, QPERF_DATA_PORT),
        port("qperf-udp", Protocol::Udp, QPERF_DATA_PORT),
        port("iperf", Protocol::Tcp, IPERF_PORT),
    ]
}

fn through_service(client: &NamedNetNs, server: &NamedNetNs, ip: Ipv4Addr) -> Pods {
    Pods {
        target: VIP,
        ..pods(client, server, ip)
    }
}

fn kube_proxy_rules(cluster_cidr: &str, server: Ipv4Addr) {
    run(Command::new("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
    let proxy = Proxy {
        cluster_cidr: cluster_cidr.parse().expect("a CIDR"),
        node_ips: Vec::new(),
    };
    kube_proxy::apply(Mode::Iptables, &proxy, &services(server));
}

/// Two pods on the bridge plugin, the client measuring through the Service.
fn bridge_service(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    let _node = ThreadNetNs::new();
    let (client, server) = (NamedNetNs::new(), NamedNetNs::new());
    let mut net = BridgeNet::new(false, true)?;
    net.add(&client)?;
    let server_ip = net.add(&server)?;
    run(Command::new("sysctl").args(["-qw", "net.bridge.bridge-nf-call-iptables=1"]));
    kube_proxy_rules("10.78.0.0/24", server_ip);
    serve(through_service(&client, &server, server_ip))?;
    Ok(0)
}

/// Two weft pods, the client measuring through the Service; the `pass_stack_flow` delta.
fn weft_service(serve: &dyn Fn(Pods) -> Result<()>) -> Result<u64> {
    let mut node = Node::new();
    let client = node.add_pod(1);
    let server = node.add_pod(2);
    kube_proxy_rules("10.77.0.0/24", server.v4);
    let count = |node: &mut Node| node.counters().get("pass_stack_flow").copied();
    let before = count(&mut node).unwrap_or(0);
    serve(through_service(&client.netns, &server.netns, server.v4))?;
    Ok(count(&mut node).unwrap_or(0).saturating_sub(before))
}

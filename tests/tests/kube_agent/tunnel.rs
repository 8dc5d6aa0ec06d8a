//! Tunnel routing (`routing-mode: tunnel`) between two nodes in different subnets: their
//! namespaces reach each other only through a third, "router" namespace that forwards the
//! nodes' addresses and drops (and counts) every packet from or to a pod CIDR. Pods on the two
//! nodes reach each other (ping, TCP, both ways) because their traffic crosses the router as
//! VXLAN (UDP 8472) between the node addresses; the same topology in native routing does not
//! carry it, which proves the tunnel is what does. Agent restarts keep the device and lose no
//! ping across it; `weft-agent cleanup` deletes it.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    process::Command,
    time::Duration,
};

use serde_json::json;
use weft_tests::{
    NamedNetNs, ThreadNetNs, agent::Agent, cluster::tcp_name_server, kube::Emulator, require_root,
    run,
};

use super::{Cluster, add, ping, restarts::Pinger, two_nodes::node_ns, wait_for};

/// Node 1's address (its subnet: 192.0.2.0/24).
const NODE1: &str = "192.0.2.1";
/// Node 2's address (another subnet: 198.51.100.0/24).
const NODE2: &str = "198.51.100.2";

/// Two nodes routed through a router (which routes each pod CIDR to its node but drops what
/// it forwards of them), the API server on node 1, an agent per node.
struct Routed {
    // Fields drop in order: agents first, then the API server, then the namespaces.
    a1: Agent,
    a2: Agent,
    cluster: Cluster,
    remote_kubeconfig: std::path::PathBuf,
    n1: NamedNetNs,
    n2: NamedNetNs,
    router: NamedNetNs,
}

impl Drop for Routed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.remote_kubeconfig);
    }
}

/// The router's nftables: forward everything, but drop and count pod-CIDR packets (`pods`),
/// and count the VXLAN packets (`vxlan`) and every other forwarded packet but the API server's
/// TCP (`other`).
fn router_rules(api_port: u16) -> String {
    format!(
        "table inet weft_router {{
            counter pods {{}}
            counter vxlan {{}}
            counter other {{}}
            chain forward {{
                type filter hook forward priority 0; policy accept;
                ip saddr 10.0.0.0/8 counter name pods drop
                ip daddr 10.0.0.0/8 counter name pods drop
                ip6 saddr fd00::/8 counter name pods drop
                ip6 daddr fd00::/8 counter name pods drop
                ip saddr {{ {NODE1}, {NODE2} }} ip daddr {{ {NODE1}, {NODE2} }} udp dport 8472 counter name vxlan accept
                tcp dport {api_port} accept
                tcp sport {api_port} accept
                counter name other accept
            }}
        }}"
    )
}

/// The packets counter `name` of the router has counted.
fn counted(router: &NamedNetNs, name: &str) -> u64 {
    let out =
        run(router
            .command("nft")
            .args(["-j", "list", "counter", "inet", "weft_router", name]));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("nft JSON");
    doc["nftables"]
        .as_array()
        .and_then(|items| items.iter().find_map(|i| i["counter"]["packets"].as_u64()))
        .unwrap_or_else(|| panic!("no counter {name} in {doc}"))
}

/// The router forwarded no packet of a pod CIDR, and some VXLAN between the nodes.
fn only_vxlan_crossed(router: &NamedNetNs) {
    assert_eq!(
        counted(router, "pods"),
        0,
        "pod-CIDR packets crossed the router"
    );
    assert!(counted(router, "vxlan") > 0, "no VXLAN crossed the router");
}

/// A veth between namespace `a` (`a_dev`, `a_ip`) and `b` (`b_dev`, `b_ip`), both up.
fn wire(a: &NamedNetNs, a_dev: &str, a_ip: &str, b: &NamedNetNs, b_dev: &str, b_ip: &str) {
    run(Command::new("ip").args([
        "link", "add", a_dev, "netns", &a.name, "type", "veth", "peer", "name", b_dev, "netns",
        &b.name,
    ]));
    for (ns, dev, ip) in [(a, a_dev, a_ip), (b, b_dev, b_ip)] {
        run(ns.command("ip").args(["addr", "add", ip, "dev", dev]));
        run(ns.command("ip").args(["link", "set", dev, "up"]));
    }
}

/// A v1.Node with InternalIP `ip` and pod CIDRs `cidrs` (dual-stack when two).
fn add_node(cluster: &Cluster, name: &str, ip: &str, cidrs: &[&str]) {
    cluster.emu.put(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"podCIDR": cidrs[0], "podCIDRs": cidrs},
        "status": {"addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": name},
        ]},
    }));
}

fn routed_nodes(routing: &[&str]) -> Routed {
    routed_nodes_with(routing, false)
}

/// [`routed_nodes`], with IPv6 pods too (`dual`: pod CIDRs fd00:1::/120 and fd00:2::/120; the
/// underlay stays IPv4).
fn routed_nodes_with(routing: &[&str], dual: bool) -> Routed {
    let n1 = node_ns();
    let n2 = node_ns();
    let router = node_ns();
    let cluster = {
        let _in = ThreadNetNs::enter(&n1.path());
        Cluster::with(Emulator::builder().all_interfaces().start())
    };
    let remote_kubeconfig = cluster.kubeconfig.with_extension("node-2");
    cluster.emu.write_kubeconfig_via(
        &remote_kubeconfig,
        &format!("http://{NODE1}:{}", cluster.emu.port()),
    );
    wire(&n1, "w1", "192.0.2.1/24", &router, "r1", "192.0.2.254/24");
    wire(
        &n2,
        "w2",
        "198.51.100.2/24",
        &router,
        "r2",
        "198.51.100.254/24",
    );
    run(n1
        .command("ip")
        .args(["route", "add", "default", "via", "192.0.2.254"]));
    run(n2
        .command("ip")
        .args(["route", "add", "default", "via", "198.51.100.254"]));
    // The router knows where the pod CIDRs are (as a network that routes them would), so
    // what stops their packets is its filter, which counts them.
    run(router
        .command("ip")
        .args(["route", "add", "10.1.0.0/24", "via", NODE1]));
    run(router
        .command("ip")
        .args(["route", "add", "10.2.0.0/24", "via", NODE2]));
    let rules = std::env::temp_dir().join(weft_tests::unique("weft-router-nft-"));
    std::fs::write(&rules, router_rules(cluster.emu.port())).expect("write the nft rules");
    run(router.command("nft").arg("-f").arg(&rules));
    let _ = std::fs::remove_file(&rules);

    if dual {
        add_node(&cluster, "node-1", NODE1, &["10.1.0.0/24", "fd00:1::/120"]);
        add_node(&cluster, "node-2", NODE2, &["10.2.0.0/24", "fd00:2::/120"]);
    } else {
        cluster.add_node_at("node-1", NODE1, "", Some("10.1.0.0/24"));
        cluster.add_node_at("node-2", NODE2, "", Some("10.2.0.0/24"));
    }
    cluster.add_pod_labelled("web", "a", "node-1", &json!({"app": "web"}));
    cluster.add_pod_labelled("web", "b", "node-2", &json!({"app": "web"}));
    let flags = |dev: &'static str| {
        let mut flags = vec!["--ipam", "kubernetes", "--devices", dev];
        flags.extend_from_slice(routing);
        if dual {
            flags.extend_from_slice(&["--enable-ipv6", "true"]);
        }
        flags
    };
    let mut a1 = cluster.agent("node-1", &flags("w1"));
    let mut a2 = cluster.agent("node-2", &flags("w2"));
    a2.kubeconfig = Some(remote_kubeconfig.clone());
    {
        let _in = ThreadNetNs::enter(&n1.path());
        a1.spawn();
    }
    {
        let _in = ThreadNetNs::enter(&n2.path());
        a2.spawn();
    }
    a1.wait_ready(Duration::from_secs(30));
    a2.wait_ready(Duration::from_secs(30));
    Routed {
        a1,
        a2,
        cluster,
        remote_kubeconfig,
        n1,
        n2,
        router,
    }
}

/// Connect from `from`'s namespace to `to`, send a line and read the answer.
fn tcp_ask(from: &NamedNetNs, to: SocketAddr) -> Result<String, String> {
    let _in = ThreadNetNs::enter(&from.path());
    let mut conn =
        TcpStream::connect_timeout(&to, Duration::from_secs(1)).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    conn.write_all(b"hello\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    Ok(answer)
}

#[test]
fn pods_on_two_routed_nodes_reach_each_other_through_the_tunnel_only() {
    require_root();
    let nodes = routed_nodes(&["--routing-mode", "tunnel"]);
    let pa = add(&nodes.a1, "web", "a");
    let pb = add(&nodes.a2, "web", "b");
    let (a, b) = (pa.ips[0], pb.ips[0]);
    assert!(a.to_string().starts_with("10.1.0."), "{:?}", pa.ips);
    assert!(b.to_string().starts_with("10.2.0."), "{:?}", pb.ips);

    // Each node has the tunnel device, its routes to the other's pods through it, and gives
    // its pods the underlay's MTU minus 50.
    for (ns, remote) in [(&nodes.n1, "10.2.0.0/24"), (&nodes.n2, "10.1.0.0/24")] {
        let out = run(ns.command("ip").args(["-d", "link", "show", "weft_vxlan"]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("external") && text.contains("dstport 8472") && text.contains("NOARP"),
            "{text}"
        );
        wait_for(
            "a route to the other node's pods",
            Duration::from_secs(10),
            || {
                let out = run(ns.command("ip").args(["route", "show", remote]));
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                (text.contains("dev weft_vxlan") && text.contains("mtu 1450"))
                    .then_some(())
                    .ok_or(text)
            },
        );
    }
    let out = run(pa.netns.command("ip").args(["link", "show", "eth0"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("mtu 1450"), "{text}");
    let status = run(Command::new(weft_tests::bin_path("weft-agent"))
        .args(["status", "--socket"])
        .arg(&nodes.a1.socket));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("tunnel (weft_vxlan, UDP 8472, ipv4 underlay mtu 1500), pod MTU 1450"),
        "{text}"
    );

    wait_for(
        "pods on the two nodes to reach each other",
        Duration::from_secs(15),
        || {
            (ping(&pa, b) && ping(&pb, a))
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        },
    );
    tcp_name_server(&pb.netns.path(), SocketAddr::new(b, 8080), "b");
    tcp_name_server(&pa.netns.path(), SocketAddr::new(a, 8080), "a");
    assert_eq!(
        tcp_ask(&pa.netns, SocketAddr::new(b, 8080)),
        Ok("b".to_owned())
    );
    assert_eq!(
        tcp_ask(&pb.netns, SocketAddr::new(a, 8080)),
        Ok("a".to_owned())
    );
    // The router saw VXLAN between the node addresses, and no packet of a pod CIDR.
    only_vxlan_crossed(&nodes.router);
    assert_eq!(
        counted(&nodes.router, "other"),
        0,
        "the router forwarded something other than VXLAN and the API server's TCP"
    );
}

#[test]
fn the_same_topology_in_native_routing_does_not_carry_pod_traffic() {
    require_root();
    let nodes = routed_nodes(&[
        "--routing-mode",
        "native",
        "--auto-direct-node-routes",
        "true",
    ]);
    let pa = add(&nodes.a1, "web", "a");
    let pb = add(&nodes.a2, "web", "b");
    // Without a tunnel the pods' packets go to the default route, and the router drops them.
    wait_for(
        "the router to drop pod-CIDR packets",
        Duration::from_secs(15),
        || {
            let answered = ping(&pa, pb.ips[0]);
            let dropped = counted(&nodes.router, "pods");
            (!answered && dropped > 0)
                .then_some(())
                .ok_or_else(|| format!("answered {answered}, dropped {dropped}"))
        },
    );
    let tunnel = nodes
        .n1
        .command("ip")
        .args(["link", "show", "weft_vxlan"])
        .output();
    assert!(
        !tunnel.expect("ip").status.success(),
        "native routing made a tunnel device"
    );
}

/// The tunnel device's ifindex in `ns`.
fn tunnel_index(ns: &NamedNetNs) -> String {
    let out = run(ns.command("cat").arg("/sys/class/net/weft_vxlan/ifindex"));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn agent_restarts_keep_the_tunnel_and_its_flows_and_cleanup_removes_it() {
    require_root();
    let mut nodes = routed_nodes(&["--routing-mode", "tunnel"]);
    let pa = add(&nodes.a1, "web", "a");
    let pb = add(&nodes.a2, "web", "b");
    wait_for(
        "pods on the two nodes to reach each other",
        Duration::from_secs(15),
        || {
            (ping(&pa, pb.ips[0]) && ping(&pb, pa.ips[0]))
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        },
    );
    let devices = (tunnel_index(&nodes.n1), tunnel_index(&nodes.n2));
    // 10 s of pings every 10 ms across the tunnel, while each agent restarts twice (SIGTERM,
    // then SIGKILL).
    let mut pinger = Pinger::start(&pa, pb.ips[0], 1000);
    for round in 0..2 {
        for (agent, ns) in [(&mut nodes.a1, &nodes.n1), (&mut nodes.a2, &nodes.n2)] {
            if round == 0 {
                agent.stop();
            } else {
                agent.kill();
            }
            {
                let _in = ThreadNetNs::enter(&ns.path());
                agent.spawn();
            }
            agent.wait_ready(Duration::from_secs(30));
            assert!(agent.log().contains("how=Adopted"), "{}", agent.log());
        }
    }
    assert!(pinger.running(), "the pings ended before the restarts did");
    let (sent, answered) = pinger.finish();
    println!("across the tunnel: {answered}/{sent} answered during 4 agent restarts");
    assert_eq!(sent, answered, "pings lost while the agents restarted");
    assert_eq!(
        (tunnel_index(&nodes.n1), tunnel_index(&nodes.n2)),
        devices,
        "a restarted agent made a new tunnel device instead of keeping its own"
    );
    assert_eq!(counted(&nodes.router, "pods"), 0);

    // Cleanup (agent stopped) takes the device away.
    nodes.a1.stop();
    let dirs = tempfile_dirs();
    let out = {
        let _in = ThreadNetNs::enter(&nodes.n1.path());
        Command::new(weft_tests::bin_path("weft-agent"))
            .arg("--pin-dir")
            .arg(&nodes.a1.pin_dir)
            .arg("cleanup")
            .arg("--state-dir")
            .arg(&nodes.a1.state)
            .arg("--socket")
            .arg(&nodes.a1.socket)
            .arg("--delete-queue-dir")
            .arg(&nodes.a1.delete_queue)
            .arg("--bin-dir")
            .arg(&dirs)
            .arg("--conf-dir")
            .arg(&dirs)
            .output()
            .expect("weft-agent cleanup")
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("removed tunnel device: weft_vxlan"), "{text}");
    let left = nodes
        .n1
        .command("ip")
        .args(["link", "show", "weft_vxlan"])
        .output();
    assert!(
        !left.expect("ip").status.success(),
        "cleanup left the tunnel device"
    );
    let _ = std::fs::remove_dir_all(&dirs);
}

/// An empty directory for cleanup's CNI directories (nothing of weft's in them).
fn tempfile_dirs() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(weft_tests::unique("weft-cni-dirs-"));
    std::fs::create_dir_all(&dir).expect("create a directory");
    dir
}

#[test]
fn ipv6_pods_reach_each_other_over_the_ipv4_underlay() {
    require_root();
    let nodes = routed_nodes_with(&["--routing-mode", "tunnel"], true);
    let pa = add(&nodes.a1, "web", "a");
    let pb = add(&nodes.a2, "web", "b");
    let v6 = |pod: &super::Pod| {
        pod.ips
            .iter()
            .copied()
            .find(std::net::IpAddr::is_ipv6)
            .unwrap_or_else(|| panic!("no IPv6 address: {:?}", pod.ips))
    };
    let (a, b) = (v6(&pa), v6(&pb));
    wait_for(
        "IPv6 pods on the two nodes to reach each other",
        Duration::from_secs(15),
        || {
            (ping(&pa, b) && ping(&pb, a))
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        },
    );
    tcp_name_server(&pb.netns.path(), SocketAddr::new(b, 8080), "b");
    assert_eq!(
        tcp_ask(&pa.netns, SocketAddr::new(b, 8080)),
        Ok("b".to_owned())
    );
    only_vxlan_crossed(&nodes.router);
}

#[test]
fn a_service_with_its_backend_on_the_other_node_answers_from_its_address() {
    require_root();
    let nodes = routed_nodes(&["--routing-mode", "tunnel"]);
    let pa = add(&nodes.a1, "web", "a");
    let pb = add(&nodes.a2, "web", "b");
    let b = pb.ips[0];
    wait_for(
        "pods on the two nodes to reach each other",
        Duration::from_secs(15),
        || {
            ping(&pa, b)
                .then_some(())
                .ok_or_else(|| "no answer".to_owned())
        },
    );
    tcp_name_server(&pb.netns.path(), SocketAddr::new(b, 8080), "b");
    // kube-proxy's part on node 1: the Service address 10.96.0.10:80 is DNATed to pod b. The
    // reply comes back through the tunnel and must meet node 1's conntrack, or pod a sees it
    // from b's address, not the Service's, and its connection never completes.
    let rules = std::env::temp_dir().join(weft_tests::unique("weft-svc-nft-"));
    std::fs::write(
        &rules,
        format!(
            "table ip weft_svc {{
                chain pre {{
                    type nat hook prerouting priority dstnat; policy accept;
                    ip daddr 10.96.0.10 tcp dport 80 dnat to {b}:8080
                }}
            }}"
        ),
    )
    .expect("write the nft rules");
    run(nodes.n1.command("nft").arg("-f").arg(&rules));
    let _ = std::fs::remove_file(&rules);
    let service: SocketAddr = "10.96.0.10:80".parse().expect("address");
    assert_eq!(tcp_ask(&pa.netns, service), Ok("b".to_owned()));
    assert_eq!(
        counted(&nodes.router, "pods"),
        0,
        "pod-CIDR packets crossed the router"
    );
}

#[test]
fn a_node_that_leaves_takes_its_tunnel_route_and_entries_with_it() {
    require_root();
    let mut nodes = routed_nodes(&["--routing-mode", "tunnel"]);
    let route = |ns: &NamedNetNs| {
        let out = run(ns.command("ip").args(["route", "show", "10.2.0.0/24"]));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_for(
        "node 1's route to node 2's pods",
        Duration::from_secs(10),
        || {
            let text = route(&nodes.n1);
            text.contains("dev weft_vxlan").then_some(()).ok_or(text)
        },
    );
    // Node 2 goes: its agent first (it would create its CiliumNode again), then its objects.
    nodes.a2.stop();
    nodes.cluster.emu.remove("ciliumnodes", None, "node-2");
    nodes.cluster.emu.remove("nodes", None, "node-2");
    wait_for(
        "node 1 to forget node 2's pods",
        Duration::from_secs(10),
        || {
            let text = route(&nodes.n1);
            let rows = super::two_nodes::bpf_list(&nodes.a1, "ipcache");
            let known = rows.iter().any(|r| r["prefix"] == "10.2.0.0/24");
            (text.is_empty() && !known)
                .then_some(())
                .ok_or_else(|| format!("route {text:?}, IPCache entry {known}"))
        },
    );
}

//! End to end on the real kernel: three pods in their own namespaces, wired by the datapath
//! inside a private node namespace whose IP forwarding is off — so any pod-to-pod packet that
//! arrives was delivered by `from_container`'s redirect, never by the host stack. Counters
//! confirm it. Also: TCP, endpoint removal, pod removal, and an agent restart under a 10 ms
//! ping with zero loss.

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, SocketAddr, TcpListener, TcpStream},
    process::{Command, Stdio},
    thread,
    time::Duration,
};

use weft_agent::datapath::{AttachMode, netns::in_netns};
use weft_tests::{Node, Pod, run};

fn forwarding_is_off() {
    let out = run(Command::new("sysctl").args([
        "-n",
        "net.ipv4.ip_forward",
        "net.ipv6.conf.all.forwarding",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["0", "0"]
    );
}

fn three_pods(node: &mut Node) -> [Pod; 3] {
    [node.add_pod(1), node.add_pod(2), node.add_pod(3)]
}

#[test]
fn pods_reach_each_other_only_through_the_redirect() {
    let mut node = Node::new();
    forwarding_is_off();
    let pods = three_pods(&mut node);
    let before = node.counters();
    for (a, b) in [(0, 1), (1, 2), (2, 0)] {
        assert!(
            pods[a].ping(IpAddr::V4(pods[b].v4), 3, "0.05"),
            "IPv4 pod{a} -> pod{b}"
        );
        assert!(
            pods[a].ping(IpAddr::V6(pods[b].v6), 3, "0.05"),
            "IPv6 pod{a} -> pod{b}"
        );
    }
    let after = node.counters();
    // 6 ping runs x 3 echo requests, each answered: at least 36 redirected packets.
    let redirected = after["redirect_local"] - before["redirect_local"];
    assert!(
        redirected >= 36,
        "expected >= 36 redirects, counters: {after:?}"
    );
    assert!(
        after["neigh_reply"] >= 6,
        "gateway ARP/ND answered by the datapath: {after:?}"
    );
    assert_eq!(after["drop_invalid_source"], 0, "{after:?}");
}

#[test]
fn tcp_between_pods() {
    let mut node = Node::new();
    let pods = three_pods(&mut node);
    for dst in [IpAddr::V4(pods[1].v4), IpAddr::V6(pods[1].v6)] {
        let addr = SocketAddr::new(dst, 7000);
        let listener = in_netns(&pods[1].netns.path(), || TcpListener::bind(addr))
            .expect("enter pod netns")
            .expect("bind in pod 1");
        let server = thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut buf = Vec::new();
            conn.read_to_end(&mut buf).expect("read");
            conn.write_all(&buf).expect("echo");
            buf.len()
        });
        let payload = vec![0x5a_u8; 1 << 20];
        let mut client = in_netns(&pods[0].netns.path(), || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        })
        .expect("enter pod netns")
        .expect("connect from pod 0");
        client.write_all(&payload).expect("send");
        client
            .shutdown(std::net::Shutdown::Write)
            .expect("shutdown");
        let mut echoed = Vec::new();
        client.read_to_end(&mut echoed).expect("read echo");
        assert_eq!(server.join().expect("server"), payload.len());
        assert_eq!(echoed, payload, "1 MiB echoed intact over {dst}");
    }
    assert!(node.counters()["redirect_local"] > 100);
}

#[test]
fn removing_an_endpoint_or_a_pod_stops_traffic_to_it() {
    // TCX: the pods' links are pinned, and the removed pod's pin must go.
    let mut node = Node::with_attach_mode(AttachMode::Tcx);
    let pods = three_pods(&mut node);
    assert!(pods[0].ping(IpAddr::V4(pods[1].v4), 1, "0.1"));
    // Endpoint gone from the map: packets go to the host stack, which does not forward here.
    assert!(
        node.datapath
            .remove_endpoint(IpAddr::V4(pods[1].v4))
            .expect("remove")
    );
    let passed = node.counters()["pass_stack"];
    assert!(
        !pods[0].ping(IpAddr::V4(pods[1].v4), 2, "0.1"),
        "removed endpoint still reachable"
    );
    assert!(node.counters()["pass_stack"] >= passed + 2);
    // The other family and the other pods are unaffected.
    assert!(pods[0].ping(IpAddr::V6(pods[1].v6), 1, "0.1"));
    assert!(pods[0].ping(IpAddr::V4(pods[2].v4), 1, "0.1"));

    // Whole pod removed: veth, link pin, interface and endpoint entries go.
    let id = pods[2].id.clone();
    assert!(
        node.runtime
            .block_on(node.datapath.remove_pod(&id, "eth0"))
            .expect("remove pod")
    );
    assert!(
        !node
            .runtime
            .block_on(node.datapath.remove_pod(&id, "eth0"))
            .expect("second remove is a no-op")
    );
    assert!(!pods[0].ping(IpAddr::V4(pods[2].v4), 2, "0.1"));
    let left: Vec<_> = node
        .datapath
        .list_endpoints()
        .expect("list")
        .into_iter()
        .map(|r| r.ip)
        .collect();
    assert!(!left.contains(&IpAddr::V4(pods[2].v4)) && !left.contains(&IpAddr::V6(pods[2].v6)));
    assert_eq!(node.links_named("wft").len(), 2);
    assert_eq!(node.datapath.attached_interfaces().expect("links").len(), 2);
}

#[test]
fn agent_restart_loses_no_packet() {
    restart_under_ping(Node::with_attach_mode(AttachMode::Tcx));
}

#[test]
fn netlink_tc_attach_forwards_and_survives_restart() {
    let (node, _pods) = restart_under_ping(Node::with_attach_mode(AttachMode::Netlink));
    // Ten restarts replaced the filter in place: still exactly one per veth, ours.
    for veth in node.links_named("wft") {
        let out = run(Command::new("tc").args(["-j", "filter", "show", "dev", &veth, "ingress"]));
        let text = String::from_utf8_lossy(&out.stdout);
        let names: Vec<&str> = text
            .match_indices("\"bpf_name\":")
            .map(|(i, _)| &text[i..])
            .collect();
        assert_eq!(names.len(), 1, "one filter on {veth}: {text}");
        assert!(
            names[0].starts_with("\"bpf_name\":\"from_container\""),
            "{veth}: {text}"
        );
    }
    assert!(
        node.datapath
            .attached_interfaces()
            .expect("links")
            .is_empty(),
        "no TCX pins"
    );
}

/// 400 pings every 10 ms (~4 s) while the datapath is dropped and re-adopted ten times.
fn restart_under_ping(mut node: Node) -> (Node, [Pod; 3]) {
    let pods = three_pods(&mut node);
    let ping = pods[0]
        .netns
        .command("ping")
        .args(["-n", "-q", "-c", "400", "-i", "0.01", "-W", "1"])
        .arg(pods[1].v4.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ping");
    thread::sleep(Duration::from_millis(300));
    for _ in 0..10 {
        node.restart_datapath();
        thread::sleep(Duration::from_millis(250));
    }
    let out = ping.wait_with_output().expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("400 received") && text.contains(" 0% packet loss"),
        "packets lost across restarts:\n{text}"
    );
    // The restarted datapath still serves new pods and removals.
    let extra = node.add_pod(4);
    assert!(extra.ping(IpAddr::V6(pods[2].v6), 1, "0.1"));
    (node, pods)
}

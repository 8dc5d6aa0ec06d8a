//! `to_netdev` / `from_netdev` per-packet cost under `BPF_PROG_TEST_RUN`, for IPv4 and IPv6, on
//! a node with 1k pods (endpoints and IPCache entries, both families), 1k established
//! masqueraded flows per family, Cilium's default ip-masq-agent exclusions (with the IPv4 and
//! IPv6 link-local ones the agent adds) and an IPv6 one, and a cluster prefix per family. The
//! test runner repeats a program on one skb, so the programs run inside benchmark wrappers that
//! restore the frame's head (Ethernet + IPv6 + TCP) after each run (`weft_bench_to_netdev` /
//! `weft_bench_from_netdev`); the wrapper alone (`weft_bench_copy`) is the baseline subtracted,
//! `weft_noop` is shown for scale. The flows' mappings are made before the cases run: the
//! numbers are the established-flow path. Every case is checked (verdict, counter reason, the
//! rewrite) before and while it is timed (`prog::time_case`). Trials are interleaved and the
//! median kept.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agent_common::{
    EndpointInfo, NatEntry4, NatEntry6, NatTuple4, NatTuple6,
    maps::{PROG_FROM_NETDEV, PROG_TO_NETDEV},
    masq::{MASQ_F_IP_MASQ_AGENT, POOL_ANY},
    nat::{IPPROTO_UDP, NAT_DIR_EGRESS, NAT_DIR_INGRESS},
    reason,
};
use weft_agent::{
    datapath::{DatapathError, IpcacheEntry, MasqExclusion, NetdevConfig},
    masq::DEFAULT_NON_MASQ_CIDRS,
};

use super::prog::{Case, PAYLOAD, ProgOptions, TC_ACT_OK, TC_ACT_REDIRECT, time_case};
use crate::{Node, frames, report, test_run};

const NODE_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 2);
const WORLD: Ipv4Addr = Ipv4Addr::new(93, 184, 216, 34);
const NODE_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x31, 0, 0, 0, 0, 2);
const WORLD6: Ipv6Addr = Ipv6Addr::new(0x2606, 0x4700, 0, 0, 0, 0, 0, 0x1111);
/// IPv6 exclusions besides the IPv4 defaults: link-local (the agent's default) and one
/// ip-masq-agent entry.
const EXCLUDED_V6: [&str; 2] = ["fe80::/10", "2001:db8:e::/48"];

fn endpoint(last: u8) -> EndpointInfo {
    EndpointInfo {
        ifindex: 4242,
        flags: 0,
        pod_mac: [0x0a, 0xbb, 0, 0, 0, last],
        pad0: [0; 2],
        node_mac: [0x0a, 0xcc, 0, 0, 0, last],
        pad1: [0; 2],
        sec_identity: 300,
        pool_id: 0,
    }
}

fn pod_ip(i: u16) -> Ipv4Addr {
    let [hi, lo] = (i + 2).to_be_bytes();
    Ipv4Addr::new(10, 1, hi, lo)
}

fn pod_ip6(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, i + 2)
}

fn ok<T>(result: Result<T, DatapathError>) -> T {
    result.unwrap_or_else(|e| panic!("{}", report(&e)))
}

/// The IPv4 defaults (and link-local), then [`EXCLUDED_V6`], for every pool.
fn exclusions() -> Vec<MasqExclusion> {
    DEFAULT_NON_MASQ_CIDRS
        .iter()
        .chain(&["169.254.0.0/16"])
        .chain(&EXCLUDED_V6)
        .map(|c| MasqExclusion {
            pool_id: POOL_ANY,
            cidr: c.parse().expect("cidr"),
            flags: MASQ_F_IP_MASQ_AGENT,
        })
        .collect()
}

/// A node with `opts.endpoints` dual-stack pods, as many established flows per family, the
/// exclusions and cluster prefixes.
fn node(opts: &ProgOptions) -> Node {
    let mut node = Node::new();
    let dp = &mut node.datapath;
    ok(dp.upsert_netdev(
        1,
        &NetdevConfig {
            masq_v4: Some(NODE_IP),
            masq_v6: Some(NODE_IP6),
        },
    ));
    ok(dp.ensure_world_ipcache());
    for cluster in ["10.78.0.0/16", "fd00:78::/48"] {
        let prefix = cluster.parse().expect("cidr");
        ok(dp.upsert_ipcache(prefix, &IpcacheEntry::identity(300)));
    }
    ok(dp.sync_masq_exclusions(&exclusions()));
    for i in 0..opts.endpoints {
        let (ip, ip6) = (pod_ip(i), pod_ip6(i));
        for pod in [IpAddr::V4(ip), IpAddr::V6(ip6)] {
            ok(dp.upsert_endpoint(pod, &endpoint(ip.octets()[3])));
            ok(dp.upsert_ipcache(pod.into(), &IpcacheEntry::identity(300)));
        }
        let port = 40000 + i;
        let tuple4 = |saddr: Ipv4Addr, sport, daddr: Ipv4Addr, dport, flags| NatTuple4 {
            daddr: daddr.octets(),
            saddr: saddr.octets(),
            dport,
            sport,
            nexthdr: IPPROTO_UDP,
            flags,
        };
        let to4 = |addr: Ipv4Addr| NatEntry4 {
            created: 0,
            to_addr: addr.octets(),
            to_port: port,
            flags: 0,
        };
        let forward = tuple4(ip, port, WORLD, 443, NAT_DIR_EGRESS);
        ok(dp.upsert_nat4(&forward, &to4(NODE_IP)));
        let reverse = tuple4(WORLD, 443, NODE_IP, port, NAT_DIR_INGRESS);
        ok(dp.upsert_nat4(&reverse, &to4(ip)));
        let tuple6 = |saddr: Ipv6Addr, sport, daddr: Ipv6Addr, dport, flags| NatTuple6 {
            daddr: daddr.octets(),
            saddr: saddr.octets(),
            dport,
            sport,
            nexthdr: IPPROTO_UDP,
            flags,
        };
        let to6 = |addr: Ipv6Addr| NatEntry6 {
            created: 0,
            to_addr: addr.octets(),
            to_port: port,
            flags: 0,
            pad: [0; 4],
        };
        let forward = tuple6(ip6, port, WORLD6, 443, NAT_DIR_EGRESS);
        ok(dp.upsert_nat6(&forward, &to6(NODE_IP6)));
        let reverse = tuple6(WORLD6, 443, NODE_IP6, port, NAT_DIR_INGRESS);
        ok(dp.upsert_nat6(&reverse, &to6(ip6)));
    }
    node
}

/// Run `frame` through the bare `to_netdev` (making its flow's mapping); the source port the
/// packet left with, read at frame offset `at`.
fn masquerade(node: &mut Node, frame: &[u8], at: usize) -> u16 {
    let (verdict, out) = test_run(&mut node.datapath, PROG_TO_NETDEV, frame);
    assert_eq!(verdict, TC_ACT_OK, "making a mapping");
    u16::from_be_bytes([out[at], out[at + 1]])
}

/// A `to_netdev` case that leaves the frame as it is, counted as `why`.
fn untouched(name: &'static str, frame: Vec<u8>, why: u32) -> Case {
    Case {
        name,
        program: PROG_TO_NETDEV,
        frame,
        verdict: TC_ACT_OK,
        reason: why,
        rewrites: Vec::new(),
    }
}

/// A `to_netdev` case that rewrites the source to `node` (at frame offset `at`).
fn snat(name: &'static str, frame: Vec<u8>, at: usize, node: &[u8]) -> Case {
    Case {
        name,
        program: PROG_TO_NETDEV,
        frame,
        verdict: TC_ACT_OK,
        reason: reason::SNAT,
        rewrites: vec![(at, node.to_vec())],
    }
}

/// A `from_netdev` reply whose destination becomes `pod` (at frame offset `at`) and that is
/// delivered into the pod.
fn reply(name: &'static str, frame: Vec<u8>, at: usize, pod: &[u8]) -> Case {
    Case {
        name,
        program: PROG_FROM_NETDEV,
        frame,
        verdict: TC_ACT_REDIRECT,
        reason: reason::REV_SNAT,
        rewrites: vec![(at, pod.to_vec())],
    }
}

/// The IPv4 cases, from pod `pod`; their flows' mappings are made first.
fn cases4(node: &mut Node, pod: Ipv4Addr) -> Vec<Case> {
    let udp = frames::udp4_ports(pod, 33000, WORLD, 53, PAYLOAD);
    let tcp = frames::tcp4(pod, 33001, WORLD, 443, 0x10, PAYLOAD);
    let (uport, tport) = (masquerade(node, &udp, 34), masquerade(node, &tcp, 34));
    let (node_ip, pod_ip) = (NODE_IP.octets(), pod.octets());
    vec![
        snat("to_netdev: established UDP (SNAT)", udp, 26, &node_ip),
        snat("to_netdev: established TCP (SNAT)", tcp, 26, &node_ip),
        untouched(
            "to_netdev: excluded dst (no NAT)",
            frames::udp4_ports(pod, 33002, Ipv4Addr::new(192, 168, 1, 1), 53, PAYLOAD),
            reason::SNAT_SKIP_EXCLUDED,
        ),
        untouched(
            "to_netdev: cluster dst (no NAT)",
            frames::udp4_ports(pod, 33003, Ipv4Addr::new(10, 78, 1, 1), 53, PAYLOAD),
            reason::SNAT_SKIP_CLUSTER,
        ),
        untouched(
            "to_netdev: not from a pod",
            frames::udp4_ports(Ipv4Addr::new(10, 99, 0, 1), 33004, WORLD, 53, PAYLOAD),
            reason::NETDEV_PASS,
        ),
        reply(
            "from_netdev: UDP reply (rev-NAT+peer)",
            frames::udp4_ports(WORLD, 53, NODE_IP, uport, PAYLOAD),
            30,
            &pod_ip,
        ),
        reply(
            "from_netdev: TCP reply (rev-NAT+peer)",
            frames::tcp4(WORLD, 443, NODE_IP, tport, 0x10, PAYLOAD),
            30,
            &pod_ip,
        ),
    ]
}

/// The IPv6 counterparts of [`cases4`], from pod `pod`.
fn cases6(node: &mut Node, pod: Ipv6Addr) -> Vec<Case> {
    let udp = frames::udp6_ports(pod, 33000, WORLD6, 53, PAYLOAD);
    let tcp = frames::tcp6(pod, 33001, WORLD6, 443, 0x10, PAYLOAD);
    let (uport, tport) = (masquerade(node, &udp, 54), masquerade(node, &tcp, 54));
    let (node_ip, pod_ip) = (NODE_IP6.octets(), pod.octets());
    let excluded = Ipv6Addr::new(0x2001, 0xdb8, 0xe, 0, 0, 0, 0, 9);
    let cluster = Ipv6Addr::new(0xfd00, 0x78, 0, 1, 0, 0, 0, 1);
    let stranger = Ipv6Addr::new(0xfd00, 0x99, 0, 0, 0, 0, 0, 1);
    vec![
        snat("to_netdev: established UDP6 (SNAT)", udp, 22, &node_ip),
        snat("to_netdev: established TCP6 (SNAT)", tcp, 22, &node_ip),
        untouched(
            "to_netdev: excluded dst6 (no NAT)",
            frames::udp6_ports(pod, 33002, excluded, 53, PAYLOAD),
            reason::SNAT_SKIP_EXCLUDED,
        ),
        untouched(
            "to_netdev: cluster dst6 (no NAT)",
            frames::udp6_ports(pod, 33003, cluster, 53, PAYLOAD),
            reason::SNAT_SKIP_CLUSTER,
        ),
        untouched(
            "to_netdev: IPv6 not from a pod",
            frames::udp6_ports(stranger, 33004, WORLD6, 53, PAYLOAD),
            reason::NETDEV_PASS,
        ),
        reply(
            "from_netdev: UDP6 reply (rev-NAT+peer)",
            frames::udp6_ports(WORLD6, 53, NODE_IP6, uport, PAYLOAD),
            38,
            &pod_ip,
        ),
        reply(
            "from_netdev: TCP6 reply (rev-NAT+peer)",
            frames::tcp6(WORLD6, 443, NODE_IP6, tport, 0x10, PAYLOAD),
            38,
            &pod_ip,
        ),
    ]
}

/// Fill the maps, check and time every case, print a table.
///
/// # Panics
/// If not root, the datapath cannot be loaded (the harness panics with the reason) or a case
/// does not do what its name says (`prog::time_case`).
pub fn run(opts: &ProgOptions) {
    let mut node = node(opts);
    let (pod, pod6) = (pod_ip(opts.endpoints / 2), pod_ip6(opts.endpoints / 2));
    let mut cases = cases4(&mut node, pod);
    cases.extend(cases6(&mut node, pod6));
    println!(
        "to_netdev/from_netdev under BPF_PROG_TEST_RUN: {} dual-stack pods, {} established flows \
         per family, {} exclusions, repeat {}, median of {} trials",
        opts.endpoints,
        opts.endpoints,
        exclusions().len(),
        opts.repeat,
        opts.trials
    );
    println!(
        "{:<38} {:>8} {:>10} {:>10} {:>14}",
        "case", "noop ns", "copy ns", "weft ns", "weft-copy ns"
    );
    for case in &cases {
        let t = time_case(&mut node, case, opts);
        println!(
            "{:<38} {:>8.1} {:>10.1} {:>10.1} {:>14.1}",
            case.name,
            t.noop,
            t.copy,
            t.ours,
            t.own()
        );
    }
}

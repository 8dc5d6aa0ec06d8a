//! `to_netdev` / `from_netdev` per-packet cost under `BPF_PROG_TEST_RUN`, on a node with 1k
//! pods (endpoints and IPCache entries), 1k established masqueraded flows, Cilium's default
//! ip-masq-agent exclusions and a cluster prefix. The test runner repeats a program on one skb,
//! so the programs run inside benchmark wrappers that restore the frame's head after each run
//! (`weft_bench_to_netdev` / `weft_bench_from_netdev`); the wrapper alone (`weft_bench_copy`)
//! is the baseline subtracted, `weft_noop` is shown for scale. The first run of a case makes
//! its mapping, every later one finds it: the numbers are the established-flow path. Trials
//! are interleaved and the median kept.

use std::net::{IpAddr, Ipv4Addr};

use agent_common::{
    EndpointInfo, NatEntry4, NatTuple4,
    maps::{PROG_BENCH_COPY, PROG_BENCH_FROM_NETDEV, PROG_BENCH_TO_NETDEV, PROG_NOOP},
    masq::{MASQ_F_IP_MASQ_AGENT, POOL_ANY},
    nat::{IPPROTO_UDP, NAT_DIR_EGRESS, NAT_DIR_INGRESS},
};
use weft_agent::{
    datapath::{DatapathError, IpcacheEntry, MasqExclusion, NetdevConfig},
    masq::DEFAULT_NON_MASQ_CIDRS,
};

use super::prog::{ProgOptions, median};
use crate::{Node, frames, report, test_run, test_run_repeat};

const NODE_IP: Ipv4Addr = Ipv4Addr::new(44, 77, 0, 2);
const WORLD: Ipv4Addr = Ipv4Addr::new(93, 184, 216, 34);

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

fn ok<T>(result: Result<T, DatapathError>) -> T {
    result.unwrap_or_else(|e| panic!("{}", report(&e)))
}

/// A node with `opts.endpoints` pods, as many established flows, and the exclusions.
fn node(opts: &ProgOptions) -> Node {
    let mut node = Node::new();
    let dp = &mut node.datapath;
    ok(dp.upsert_netdev(
        1,
        &NetdevConfig {
            masq_v4: Some(NODE_IP),
            masq_v6: None,
        },
    ));
    ok(dp.ensure_world_ipcache());
    ok(dp.upsert_ipcache(
        "10.78.0.0/16".parse().expect("cidr"),
        &IpcacheEntry::identity(300),
    ));
    let exclusions: Vec<MasqExclusion> = DEFAULT_NON_MASQ_CIDRS
        .iter()
        .map(|c| MasqExclusion {
            pool_id: POOL_ANY,
            cidr: c.parse().expect("cidr"),
            flags: MASQ_F_IP_MASQ_AGENT,
        })
        .collect();
    ok(dp.sync_masq_exclusions(&exclusions));
    for i in 0..opts.endpoints {
        let ip = pod_ip(i);
        ok(dp.upsert_endpoint(IpAddr::V4(ip), &endpoint(ip.octets()[3])));
        ok(dp.upsert_ipcache(IpAddr::V4(ip).into(), &IpcacheEntry::identity(300)));
        let port = 40000 + i;
        let forward = NatTuple4 {
            daddr: WORLD.octets(),
            saddr: ip.octets(),
            dport: 443,
            sport: port,
            nexthdr: IPPROTO_UDP,
            flags: NAT_DIR_EGRESS,
        };
        let reverse = NatTuple4 {
            daddr: NODE_IP.octets(),
            saddr: WORLD.octets(),
            dport: port,
            sport: 443,
            nexthdr: IPPROTO_UDP,
            flags: NAT_DIR_INGRESS,
        };
        let to = |addr: Ipv4Addr| NatEntry4 {
            created: 0,
            to_addr: addr.octets(),
            to_port: port,
            flags: 0,
        };
        ok(dp.upsert_nat4(&forward, &to(NODE_IP)));
        ok(dp.upsert_nat4(&reverse, &to(ip)));
    }
    node
}

/// Fill the maps, time every case against `weft_noop`, print a table.
///
/// # Panics
/// If not root or the datapath cannot be loaded (the harness panics with the reason).
pub fn run(opts: &ProgOptions) {
    let mut node = node(opts);
    let pod = pod_ip(opts.endpoints / 2);
    let udp = frames::udp4_ports(pod, 33000, WORLD, 53, &[0; 18]);
    let tcp = frames::tcp4(pod, 33001, WORLD, 443, 0x10, &[0; 18]);
    // Make the two flows' mappings, and learn the port the reply goes to.
    let (_, out) = test_run(&mut node.datapath, PROG_BENCH_TO_NETDEV, &udp);
    test_run(&mut node.datapath, PROG_BENCH_TO_NETDEV, &tcp);
    let port = u16::from_be_bytes([out[34], out[35]]);
    let cases = [
        (
            "to_netdev: established UDP (SNAT)",
            PROG_BENCH_TO_NETDEV,
            udp,
        ),
        (
            "to_netdev: established TCP (SNAT)",
            PROG_BENCH_TO_NETDEV,
            tcp,
        ),
        (
            "to_netdev: excluded dst (no NAT)",
            PROG_BENCH_TO_NETDEV,
            frames::udp4_ports(pod, 33002, Ipv4Addr::new(192, 168, 1, 1), 53, &[0; 18]),
        ),
        (
            "to_netdev: cluster dst (no NAT)",
            PROG_BENCH_TO_NETDEV,
            frames::udp4_ports(pod, 33003, Ipv4Addr::new(10, 78, 1, 1), 53, &[0; 18]),
        ),
        (
            "to_netdev: not from a pod",
            PROG_BENCH_TO_NETDEV,
            frames::udp4_ports(Ipv4Addr::new(10, 99, 0, 1), 33004, WORLD, 53, &[0; 18]),
        ),
        (
            "from_netdev: reply (rev-NAT+peer)",
            PROG_BENCH_FROM_NETDEV,
            frames::udp4_ports(WORLD, 53, NODE_IP, port, &[0; 18]),
        ),
    ];
    println!(
        "to_netdev/from_netdev under BPF_PROG_TEST_RUN: {} pods, {} established flows, {} \
         exclusions, repeat {}, median of {} trials",
        opts.endpoints,
        opts.endpoints,
        DEFAULT_NON_MASQ_CIDRS.len(),
        opts.repeat,
        opts.trials
    );
    println!(
        "{:<36} {:>8} {:>10} {:>10} {:>14}",
        "case", "noop ns", "copy ns", "weft ns", "weft-copy ns"
    );
    for (name, program, frame) in cases {
        let (mut noop, mut copy, mut ours) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..opts.trials {
            for (program, samples) in [
                (PROG_NOOP, &mut noop),
                (PROG_BENCH_COPY, &mut copy),
                (program, &mut ours),
            ] {
                let (_, _, d) = test_run_repeat(&mut node.datapath, program, &frame, opts.repeat);
                samples.push(d.as_secs_f64() * 1e9);
            }
        }
        let (noop, copy, ours) = (median(noop), median(copy), median(ours));
        println!(
            "{name:<36} {noop:>8.1} {copy:>10.1} {ours:>10.1} {:>14.1}",
            ours - copy
        );
    }
}

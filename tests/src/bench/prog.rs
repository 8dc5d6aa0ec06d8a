//! `from_container` per-packet cost under `BPF_PROG_TEST_RUN`, with 1k endpoints in the map,
//! against the empty classifier `weft_noop` loaded from the same object in the same run.
//! Numbers are the kernel's own average per repeat; trials are interleaved and the median kept.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agent_common::{
    EndpointInfo,
    maps::{PROG_FROM_CONTAINER, PROG_NOOP},
};

use crate::{Node, frames, report, test_run_repeat};

/// Knobs of the program benchmark.
#[derive(Clone, Copy, Debug)]
pub struct ProgOptions {
    /// Runs per trial (kernel-side loop).
    pub repeat: u32,
    /// Trials per case; the median is printed.
    pub trials: usize,
    /// Endpoints in the map.
    pub endpoints: u16,
}

impl Default for ProgOptions {
    fn default() -> Self {
        Self {
            repeat: 200_000,
            trials: 5,
            endpoints: 1000,
        }
    }
}

fn endpoint(ifindex: u32, last: u8) -> EndpointInfo {
    EndpointInfo {
        ifindex,
        flags: 0,
        pod_mac: [0x0a, 0xbb, 0, 0, 0, last],
        pad0: [0; 2],
        node_mac: [0x0a, 0xcc, 0, 0, 0, last],
        pad1: [0; 2],
        sec_identity: 300,
        pool_id: 0,
    }
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Fill the maps, time every case against `weft_noop`, print a table.
///
/// # Panics
/// If not root or the datapath cannot be loaded (the harness panics with the reason).
pub fn run(opts: &ProgOptions) {
    let mut node = Node::new();
    let dp = &mut node.datapath;
    // The sender sits on `lo` (ifindex 1), where the test runner puts the skb.
    let src4 = Ipv4Addr::new(10, 0, 0, 1);
    let src6: Ipv6Addr = "fd00::1".parse().expect("literal");
    for ip in [IpAddr::V4(src4), IpAddr::V6(src6)] {
        dp.upsert_endpoint(ip, &endpoint(1, 1))
            .unwrap_or_else(|e| panic!("{}", report(&e)));
    }
    for i in 0..opts.endpoints {
        let [hi, lo] = (i + 2).to_be_bytes();
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo));
        let v6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, i + 2));
        for ip in [v4, v6] {
            dp.upsert_endpoint(ip, &endpoint(1000 + u32::from(i), lo))
                .unwrap_or_else(|e| panic!("{}", report(&e)));
        }
    }
    let dst4 = Ipv4Addr::new(10, 1, 1, 0xf4); // endpoint #500
    let dst6 = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 502);
    let cases = [
        (
            "IPv4 to local pod (redirect)",
            frames::udp4(src4, dst4, 64, &[0; 18]),
        ),
        (
            "IPv6 to local pod (redirect)",
            frames::udp6(src6, dst6, 64, &[0; 18]),
        ),
        (
            "IPv4 to elsewhere (stack)",
            frames::udp4(src4, Ipv4Addr::new(192, 0, 2, 1), 64, &[0; 18]),
        ),
    ];
    println!(
        "from_container under BPF_PROG_TEST_RUN: {} endpoints, repeat {}, median of {} trials",
        opts.endpoints, opts.repeat, opts.trials
    );
    println!(
        "{:<30} {:>12} {:>12} {:>10} {:>12}",
        "case", "noop ns", "weft ns", "ratio", "weft-noop ns"
    );
    for (name, frame) in cases {
        let (mut base, mut ours) = (Vec::new(), Vec::new());
        for _ in 0..opts.trials {
            let (_, _, d) = test_run_repeat(&mut node.datapath, PROG_NOOP, &frame, opts.repeat);
            base.push(d.as_secs_f64() * 1e9);
            let (_, _, d) =
                test_run_repeat(&mut node.datapath, PROG_FROM_CONTAINER, &frame, opts.repeat);
            ours.push(d.as_secs_f64() * 1e9);
        }
        let (base, ours) = (median(base), median(ours));
        println!(
            "{name:<30} {base:>12.1} {ours:>12.1} {:>9.2}x {:>12.1}",
            ours / base,
            ours - base
        );
    }
}

//! `from_container` per-packet cost under `BPF_PROG_TEST_RUN`, with 1k endpoints in the map,
//! and the timing harness `bench masq` shares. The test runner repeats a program on one skb,
//! and `from_container` rewrites what it delivers (TTL or hop limit, MAC addresses): run bare,
//! the 64th run of a "redirect" case would meet an expired TTL and time the pass to the stack.
//! So every case runs inside a benchmark wrapper that restores the frame's head after each run
//! (`weft_bench_from_container`), and the wrapper alone (`weft_bench_copy`) is subtracted; the
//! empty classifier `weft_noop` from the same object, in the same run, is the baseline of the
//! ratio. Each case is checked before it is timed (the bare program's verdict, counter reason
//! and rewrite) and while it is (each trial's verdict and restored frame, and that every timed
//! run counted the case's reason). Numbers are the kernel's own average per repeat; trials are
//! interleaved and the median kept.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agent_common::{
    EndpointInfo,
    maps::{
        BENCH_HEAD, PROG_BENCH_COPY, PROG_BENCH_FROM_CONTAINER, PROG_BENCH_FROM_NETDEV,
        PROG_BENCH_TO_NETDEV, PROG_FROM_CONTAINER, PROG_FROM_NETDEV, PROG_NOOP, PROG_TO_NETDEV,
    },
    reason,
};

use crate::{Node, frames, report, test_run, test_run_repeat};

/// tc verdict: continue (to the stack, or out of the device).
pub(crate) const TC_ACT_OK: u32 = 0;
/// tc verdict: redirected (`bpf_redirect_peer`).
pub(crate) const TC_ACT_REDIRECT: u32 = 7;
/// Payload of every benchmark frame: long enough that the shortest (IPv4 + UDP) still holds the
/// wrappers' [`BENCH_HEAD`] bytes.
pub(crate) const PAYLOAD: &[u8] = &[0; 40];

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

/// One benchmark case: a frame, the program it goes through and what that program must do.
pub(crate) struct Case {
    /// The row's label.
    pub name: &'static str,
    /// The program measured (`from_container`, `to_netdev`, `from_netdev`); it is timed inside
    /// its benchmark wrapper.
    pub program: &'static str,
    pub frame: Vec<u8>,
    /// The verdict every run must return.
    pub verdict: u32,
    /// The counter reason every run must count.
    pub reason: u32,
    /// Bytes the bare program must have written at these frame offsets; empty: the frame
    /// leaves unchanged.
    pub rewrites: Vec<(usize, Vec<u8>)>,
}

/// Medians in ns per run: the empty classifier, the wrapper alone, the wrapped program.
pub(crate) struct Timing {
    pub noop: f64,
    pub copy: f64,
    pub ours: f64,
}

impl Timing {
    /// The program's own cost: the wrapped program minus the wrapper alone.
    pub fn own(&self) -> f64 {
        self.ours - self.copy
    }
}

/// The benchmark wrapper of `program`.
fn wrapper(program: &str) -> &'static str {
    match program {
        PROG_FROM_CONTAINER => PROG_BENCH_FROM_CONTAINER,
        PROG_TO_NETDEV => PROG_BENCH_TO_NETDEV,
        PROG_FROM_NETDEV => PROG_BENCH_FROM_NETDEV,
        other => panic!("no benchmark wrapper for {other}"),
    }
}

fn packets(node: &mut Node, why: u32) -> u64 {
    node.counters().get(reason::name(why)).copied().unwrap_or(0)
}

/// Check `case` once on the bare program, then time it in its wrapper, the wrapper alone and
/// `weft_noop`, interleaved, `opts.trials` times `opts.repeat` runs.
///
/// # Panics
/// If the bare program does not return the case's verdict, count its reason and make its
/// rewrites, or if a trial of the wrapped program ends with another verdict or a changed frame,
/// or not every timed run counted the reason: the case would not measure what its name says.
pub(crate) fn time_case(node: &mut Node, case: &Case, opts: &ProgOptions) -> Timing {
    let name = case.name;
    assert!(
        case.frame.len() >= BENCH_HEAD,
        "{name}: a {}-byte frame, shorter than the wrappers' {BENCH_HEAD}-byte head",
        case.frame.len()
    );
    let counted = packets(node, case.reason);
    let (verdict, out) = test_run(&mut node.datapath, case.program, &case.frame);
    assert_eq!(verdict, case.verdict, "{name}: verdict of {}", case.program);
    assert_eq!(
        packets(node, case.reason),
        counted + 1,
        "{name}: {} not counted as {}",
        case.program,
        reason::name(case.reason)
    );
    if case.rewrites.is_empty() {
        assert_eq!(out, case.frame, "{name}: the frame must leave unchanged");
    }
    for (offset, bytes) in &case.rewrites {
        let got = out.get(*offset..offset + bytes.len());
        assert_eq!(got, Some(&bytes[..]), "{name}: bytes at offset {offset}");
    }

    let wrapped = wrapper(case.program);
    let counted = packets(node, case.reason);
    let (mut noop, mut copy, mut ours) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..opts.trials {
        for (program, samples) in [
            (PROG_NOOP, &mut noop),
            (PROG_BENCH_COPY, &mut copy),
            (wrapped, &mut ours),
        ] {
            let (verdict, out, d) =
                test_run_repeat(&mut node.datapath, program, &case.frame, opts.repeat);
            if program == wrapped {
                assert_eq!(verdict, case.verdict, "{name}: verdict of {wrapped}");
                assert_eq!(
                    out, case.frame,
                    "{name}: {wrapped} did not restore the frame"
                );
            }
            samples.push(d.as_secs_f64() * 1e9);
        }
    }
    let runs = u64::from(opts.repeat) * u64::try_from(opts.trials).unwrap_or(u64::MAX);
    assert_eq!(
        packets(node, case.reason) - counted,
        runs,
        "{name}: not every timed run counted as {}",
        reason::name(case.reason)
    );
    Timing {
        noop: median(noop),
        copy: median(copy),
        ours: median(ours),
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

/// The `from_container` cases: a pod on `lo` (`src4`, `src6`) sending to a local pod (endpoint
/// #500 of the map) and to an address off the node, per family.
fn cases(src4: Ipv4Addr, src6: Ipv6Addr) -> Vec<Case> {
    let dst4 = Ipv4Addr::new(10, 1, 1, 0xf4); // endpoint #500 (mac ..:f4)
    let dst6 = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 0x1f6); // endpoint #502 (mac ..:f6)
    let redirect = |last: u8, hops_at: usize| {
        vec![
            (0, vec![0x0a, 0xbb, 0, 0, 0, last]),
            (6, vec![0x0a, 0xcc, 0, 0, 0, last]),
            (hops_at, vec![63]),
        ]
    };
    let case = |name, frame, verdict, reason, rewrites| Case {
        name,
        program: PROG_FROM_CONTAINER,
        frame,
        verdict,
        reason,
        rewrites,
    };
    vec![
        case(
            "IPv4 to local pod (redirect)",
            frames::udp4(src4, dst4, 64, PAYLOAD),
            TC_ACT_REDIRECT,
            reason::REDIRECT_LOCAL,
            redirect(0xf4, 22),
        ),
        case(
            "IPv6 to local pod (redirect)",
            frames::udp6(src6, dst6, 64, PAYLOAD),
            TC_ACT_REDIRECT,
            reason::REDIRECT_LOCAL,
            redirect(0xf6, 21),
        ),
        case(
            "IPv4 to elsewhere (stack)",
            frames::udp4(src4, Ipv4Addr::new(192, 0, 2, 1), 64, PAYLOAD),
            TC_ACT_OK,
            reason::PASS_STACK,
            Vec::new(),
        ),
        case(
            "IPv6 to elsewhere (stack)",
            frames::udp6(src6, "2001:db8::1".parse().expect("literal"), 64, PAYLOAD),
            TC_ACT_OK,
            reason::PASS_STACK,
            Vec::new(),
        ),
    ]
}

/// Fill the maps, check and time every case, print a table.
///
/// # Panics
/// If not root, the datapath cannot be loaded (the harness panics with the reason) or a case
/// does not do what its name says ([`time_case`]).
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
    println!(
        "from_container under BPF_PROG_TEST_RUN: {} endpoints, repeat {}, median of {} trials; \
         in the head-restoring wrapper, the wrapper alone (copy) subtracted",
        opts.endpoints, opts.repeat, opts.trials
    );
    println!(
        "{:<30} {:>8} {:>8} {:>8} {:>13} {:>8}",
        "case", "noop ns", "copy ns", "weft ns", "weft-copy ns", "ratio"
    );
    for case in cases(src4, src6) {
        let t = time_case(&mut node, &case, opts);
        println!(
            "{:<30} {:>8.1} {:>8.1} {:>8.1} {:>13.1} {:>7.2}x",
            case.name,
            t.noop,
            t.copy,
            t.ours,
            t.own(),
            (t.own() + t.noop) / t.noop
        );
    }
    println!(
        "ratio: (weft-copy + noop) / noop, the program as if run bare against the empty \
         classifier; every case's verdict, counter and rewrite checked"
    );
}

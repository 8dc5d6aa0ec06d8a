//! The tables `bench ipam` prints: per scenario p50 and p99 of the bridge plugin and of weft
//! with ratios, the batch wall time of the concurrent scenario, weft as installed against TCX
//! attachment of pods, and the p50 of each ADD phase.

use std::time::Duration;

use super::{CniOptions, Latencies, ms, percentile};

/// Print every table on stdout.
pub(super) fn print(opts: &CniOptions, bridge: &Latencies, weft: &Latencies, tcx: &Latencies) {
    let threads = opts.concurrency.min(opts.pods);
    println!(
        "CNI latency, ms: wall-clock of one plugin process; {} operations per scenario, after 1 \
         untimed warm-up ADD",
        opts.pods
    );
    println!(
        "{:<26}{:>12}{:>12}{:>10}{:>10}{:>17}{:>17}",
        "scenario",
        "bridge p50",
        "bridge p99",
        "weft p50",
        "weft p99",
        "weft/bridge p50",
        "weft/bridge p99"
    );
    let rows = [
        (
            format!("ADD sequential x{}", opts.pods),
            &bridge.sequential,
            &weft.sequential,
        ),
        (
            format!("ADD concurrent {threads} thr"),
            &bridge.concurrent,
            &weft.concurrent,
        ),
        (
            format!("DEL sequential x{}", opts.pods),
            &bridge.del,
            &weft.del,
        ),
        (
            format!("ADD beside {} pods", opts.crowd),
            &bridge.crowded,
            &weft.crowded,
        ),
    ];
    for (scenario, bridge, weft) in rows {
        let [b50, b99, w50, w99] = [(bridge, 50), (bridge, 99), (weft, 50), (weft, 99)]
            .map(|(samples, pct)| ms(percentile(samples, pct)));
        println!(
            "{scenario:<26}{b50:>12.2}{b99:>12.2}{w50:>10.2}{w99:>10.2}{:>16.2}x{:>16.2}x",
            w50 / b50,
            w99 / b99
        );
    }
    let rank = (99 * opts.pods).div_ceil(100);
    println!(
        "ratios: weft / bridge, lower is better; p99 is nearest-rank: sample {rank} of {} \
         sorted{}",
        opts.pods,
        if rank == opts.pods {
            " (the maximum)"
        } else {
            ""
        }
    );
    println!();
    println!(
        "concurrent batch wall time, ms ({} ADDs from {threads} threads), against {} x the \
         sequential ADD p50 (1.00 = no overlap at all):",
        opts.pods, opts.pods
    );
    for (name, l) in [("bridge", bridge), ("weft", weft)] {
        let serial = percentile(&l.sequential, 50) * u32::try_from(opts.pods).unwrap_or(u32::MAX);
        println!(
            "  {name:<8}{:>10.2}  ({:.2} of {:.2})",
            ms(l.concurrent_wall),
            l.concurrent_wall.as_secs_f64() / serial.as_secs_f64(),
            ms(serial)
        );
    }
    println!(
        "weft ADD p50 beside {} pods / on the empty node: {:.2}",
        opts.crowd,
        ms(percentile(&weft.crowded, 50)) / ms(percentile(&weft.sequential, 50))
    );
    println!();
    attach_modes(weft, tcx);
    println!();
    phases(weft);
}

/// weft's pods attached by netlink tc filters (`auto`) against TCX links, p50 per scenario.
fn attach_modes(netlink: &Latencies, tcx: &Latencies) {
    println!(
        "weft pod attach, p50 ms:{:>16}{:>10}{:>15}",
        "auto (tc)", "tcx", "tcx/auto"
    );
    let rows: [(&str, &[Duration], &[Duration]); 3] = [
        ("ADD sequential", &netlink.sequential, &tcx.sequential),
        ("ADD concurrent", &netlink.concurrent, &tcx.concurrent),
        ("DEL sequential", &netlink.del, &tcx.del),
    ];
    for (scenario, netlink, tcx) in rows {
        let (n, t) = (ms(percentile(netlink, 50)), ms(percentile(tcx, 50)));
        println!("  {scenario:<23}{n:>16.2}{t:>10.2}{:>14.2}x", t / n);
    }
}

/// The p50 of each ADD phase in weft's sequential scenario, as the agent logged them.
fn phases(weft: &Latencies) {
    if weft.phases.is_empty() {
        println!("weft ADD phases: none logged (is the agent's log level below info?)");
        return;
    }
    let total: f64 = weft.phases.values().map(|d| ms(percentile(d, 50))).sum();
    println!(
        "weft ADD phases in the agent, p50 ms (sequential; the rest of an ADD is weft-cni's \
         process and the socket):"
    );
    for (phase, samples) in &weft.phases {
        println!("  {phase:<10}{:>8.3}", ms(percentile(samples, 50)));
    }
    println!(
        "  {:<10}{total:>8.3}  of an ADD p50 of {:.3}",
        "sum",
        ms(percentile(&weft.sequential, 50))
    );
}

//! `cargo xtask bench masq [prog|net|all]`: per-packet cost of `to_netdev` on established
//! masqueraded flows and of the other masquerade decisions, and of `from_netdev`'s reverse NAT,
//! for IPv4 and IPv6, inside the head-restoring benchmark wrappers with the wrapper subtracted
//! (`BPF_PROG_TEST_RUN`); and latency/throughput from a pod to an external host through weft's
//! SNAT against Debian's bridge plugin with `ipMasq: true` (iptables MASQUERADE). Needs root.

use anyhow::bail;
use weft_tests::bench::{masq, net, prog::ProgOptions};

const USAGE: &str =
    "use [prog|net|all] [--repeat N] [--trials N] (prog) [--seconds N] [--rounds N] (net)";

fn main() -> anyhow::Result<()> {
    let mut which = "all".to_owned();
    let mut prog = ProgOptions::default();
    let mut net = net::NetOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "prog" | "net" | "all" => which = arg,
            "--repeat" | "--trials" | "--seconds" | "--rounds" => {
                let n: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if n == 0 {
                    bail!("{arg} needs a positive integer");
                }
                match arg.as_str() {
                    "--repeat" => prog.repeat = n,
                    "--trials" => prog.trials = n as usize,
                    "--seconds" => net.seconds = n,
                    _ => net.rounds = n,
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}: {USAGE}"),
        }
    }
    weft_tests::require_root();
    if which != "net" {
        masq::run(&prog);
        println!();
    }
    if which != "prog" {
        net::run_masq(&net)?;
    }
    Ok(())
}

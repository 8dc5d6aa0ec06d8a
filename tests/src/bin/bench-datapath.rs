//! `cargo xtask bench datapath [prog|net|all]`: per-packet cost of `from_container`
//! (`BPF_PROG_TEST_RUN`, inside the head-restoring benchmark wrapper, the wrapper subtracted,
//! against the empty classifier) and pod-to-pod latency/throughput through weft against
//! Debian's bridge CNI and a bare veth pair; pod → ClusterIP → pod through kube-proxy's rules
//! against the bridge CNI with the same rules. `prog`, `net` and `service` run one part each.

use anyhow::bail;
use weft_tests::bench::{net, prog, service};

fn main() -> anyhow::Result<()> {
    let mut which = "all".to_owned();
    let mut opts = net::NetOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "prog" | "net" | "service" | "all" => which = arg,
            "--seconds" | "--rounds" => {
                let n = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if n == 0 {
                    bail!("{arg} needs a positive integer");
                }
                if arg == "--seconds" {
                    opts.seconds = n;
                } else {
                    opts.rounds = n;
                }
            }
            other => {
                bail!(
                    "unknown argument {other:?}: use [prog|net|service|all] [--seconds N] [--rounds N]"
                )
            }
        }
    }
    let all = which == "all";
    if all || which == "prog" {
        prog::run(&prog::ProgOptions::default());
        println!();
    }
    if all || which == "net" {
        net::run(&opts)?;
        println!();
    }
    if all || which == "service" {
        service::run_service(&opts)?;
    }
    Ok(())
}

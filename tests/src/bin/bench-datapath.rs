//! `cargo xtask bench datapath`: per-packet cost of `from_container` (`BPF_PROG_TEST_RUN`) and
//! pod-to-pod latency/throughput through weft against Debian's bridge CNI and a bare veth pair.

use anyhow::bail;
use weft_tests::bench::{net, prog};

fn main() -> anyhow::Result<()> {
    let mut which = "all".to_owned();
    let mut seconds = net::NetOptions::default().seconds;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "prog" | "net" | "all" => which = arg,
            "--seconds" => {
                seconds = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if seconds == 0 {
                    bail!("--seconds needs a positive integer");
                }
            }
            other => bail!("unknown argument {other:?}: use [prog|net|all] [--seconds N]"),
        }
    }
    if which != "net" {
        prog::run(&prog::ProgOptions::default());
        println!();
    }
    if which != "prog" {
        net::run(&net::NetOptions { seconds })?;
    }
    Ok(())
}

//! `cargo xtask bench ipam`: CNI ADD latency (p50, p99; sequential and concurrent) through
//! weft against Debian's bridge + host-local plugins, and the throughput of weft's IPAM
//! allocators against a `Vec<bool>` first-free baseline. Needs root and the agent binaries
//! (`cargo build --release -p weft-agent --bins`).

use anyhow::bail;
use weft_tests::bench::{alloc, ipam};

const USAGE: &str = "use [cni|alloc|all] [--pods N] [--concurrency C]";

fn main() -> anyhow::Result<()> {
    let mut which = "all".to_owned();
    let mut opts = ipam::CniOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "cni" | "alloc" | "all" => which = arg,
            "--pods" | "--concurrency" => {
                let n = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if n == 0 {
                    bail!("{arg} needs a positive integer");
                }
                if arg == "--pods" {
                    opts.pods = n;
                } else {
                    opts.concurrency = n;
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
    if which != "alloc" {
        ipam::run_cni(&opts)?;
        println!();
    }
    if which != "cni" {
        alloc::run_alloc()?;
    }
    Ok(())
}

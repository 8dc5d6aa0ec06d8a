//! `cargo xtask bench ipam`: CNI latency (p50, p99; ADD sequential, concurrent and beside
//! `--crowd` pods, DEL sequential; TCX against netlink attachment; ADD phases) through weft
//! against Debian's bridge + host-local plugins, and the throughput of weft's IPAM
//! allocators against a `Vec<bool>` first-free baseline. Needs root and the agent binaries
//! (`cargo build --release -p weft-agent --bins`).

use anyhow::bail;
use weft_tests::bench::{alloc, ipam};

const USAGE: &str = "use [cni|alloc|all] [--pods N] [--concurrency C] [--crowd K]";

fn main() -> anyhow::Result<()> {
    let mut which = "all".to_owned();
    let mut opts = ipam::CniOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "cni" | "alloc" | "all" => which = arg,
            "--pods" | "--concurrency" | "--crowd" => {
                let n = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if n == 0 {
                    bail!("{arg} needs a positive integer");
                }
                match arg.as_str() {
                    "--pods" => opts.pods = n,
                    "--concurrency" => opts.concurrency = n,
                    _ => opts.crowd = n,
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

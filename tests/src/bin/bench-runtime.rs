//! `cargo xtask bench runtime`: `ctr run --cni --rm … true` round trips on Debian's containerd
//! through weft against Debian's bridge + host-local plugins (and without a network), p50/p99
//! and the ratio. Needs root, containerd, runc, busybox-static and the agent binaries
//! (`cargo build --release -p weft-agent --bins`; `cargo xtask bench runtime` builds them).

use anyhow::bail;
use weft_tests::bench::runtime;

const USAGE: &str = "use [--runs N]";

fn main() -> anyhow::Result<()> {
    let mut opts = runtime::RuntimeOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                opts.runs = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if opts.runs == 0 {
                    bail!("--runs needs a positive integer");
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
    runtime::run(&opts)
}

//! `cargo xtask bench memory`: `weft-agent`'s RSS at idle, with 110 pods and with 100k remote
//! IPCache entries fed through the Kubernetes API emulator, against the idle agent and
//! cilium-agent's documented footprint. Needs root and the release agent binaries
//! (`cargo build --release -p weft-agent --bins`; `cargo xtask bench memory` builds them).

use anyhow::bail;
use weft_tests::bench::memory;

const USAGE: &str = "use [--pods N] [--entries N] [--nodes N]";

fn main() -> anyhow::Result<()> {
    let mut opts = memory::MemoryOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || -> anyhow::Result<usize> {
            match args.next().and_then(|s| s.parse().ok()) {
                Some(n) => Ok(n),
                None => bail!("{arg} needs a number: {USAGE}"),
            }
        };
        match arg.as_str() {
            "--pods" => opts.pods = number()?,
            "--entries" => opts.remote_entries = number()?,
            "--nodes" => opts.remote_nodes = number()?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}: {USAGE}"),
        }
    }
    weft_tests::require_root();
    memory::run(&opts)
}

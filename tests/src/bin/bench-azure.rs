//! `cargo xtask bench azure`: the release `weft-operator --ipam azure` serving 100 and 1000
//! VMSS nodes created at once through the ARM and Kubernetes API emulators, against the floor
//! the rate limit sets. Needs the release operator binary (`cargo xtask bench azure` builds it);
//! no root.

use anyhow::{Context as _, bail};
use weft_tests::bench::azure;

const USAGE: &str = "use [--nodes N[,N…]] [--qps Q] [--burst B] [--timeout SECONDS]";

fn main() -> anyhow::Result<()> {
    let mut opts = azure::AzureOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value: {USAGE}"))
        };
        match arg.as_str() {
            "--nodes" => {
                opts.nodes = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .context("--nodes")?;
            }
            "--qps" => opts.qps = value()?.parse().context("--qps")?,
            "--burst" => opts.burst = value()?.parse().context("--burst")?,
            "--timeout" => {
                opts.timeout =
                    std::time::Duration::from_secs(value()?.parse().context("--timeout")?);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}: {USAGE}"),
        }
    }
    azure::run(&opts)
}

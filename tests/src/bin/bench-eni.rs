//! `cargo xtask bench eni`: the release `weft-operator --ipam eni` serving 100 and 1000 nodes
//! created at once through the EC2 and Kubernetes API emulators, each needing a new ENI (and,
//! second case, each with room on its primary ENI), against the floor the rate limit sets.
//! Needs the release operator binary (`cargo xtask bench eni` builds it); no root.

use anyhow::{Context as _, bail};
use weft_tests::bench::eni::{self, Case};

const USAGE: &str = "use [--nodes N[,N…]] [--case new-eni|primary-room[,…]] [--qps Q] [--burst B] \
                     [--ec2-limit QPS,BURST] [--timeout SECONDS]";

fn main() -> anyhow::Result<()> {
    let mut opts = eni::EniOptions::default();
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
            "--case" => {
                opts.cases = value()?
                    .split(',')
                    .map(|c| Case::parse(c).with_context(|| format!("--case {c:?}: {USAGE}")))
                    .collect::<Result<_, _>>()?;
            }
            "--qps" => opts.qps = value()?.parse().context("--qps")?,
            "--burst" => opts.burst = value()?.parse().context("--burst")?,
            "--ec2-limit" => {
                let v = value()?;
                let (qps, burst) = v
                    .split_once(',')
                    .with_context(|| format!("--ec2-limit {v:?}: {USAGE}"))?;
                opts.ec2_limit = Some((
                    qps.parse().context("--ec2-limit qps")?,
                    burst.parse().context("--ec2-limit burst")?,
                ));
            }
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
    eni::run(&opts)
}

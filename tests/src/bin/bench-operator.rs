//! `cargo xtask bench operator`: the release `weft-operator` serving N CiliumNodes created at
//! once (cluster-pool and multi-pool; `--nodes 1000,10000` by default, every size in the same
//! run) through the Kubernetes API emulator, then 100 deleted and 100 added, against the
//! emulator alone as the floor, and the operator's cost per node between the sizes. Needs the release operator binary
//! (`cargo build --release -p weft-operator`; `cargo xtask bench operator` builds it); no root.

use anyhow::{Context as _, bail};
use weft_tests::bench::operator;

const USAGE: &str = "use [--nodes N[,N...]] [--churn N] [--cluster-cidr CIDR] [--timeout SECONDS]";

fn main() -> anyhow::Result<()> {
    let mut opts = operator::OperatorOptions::default();
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
                    .map(|n| n.trim().parse().context("--nodes: a list of numbers"))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--churn" => opts.churn = value()?.parse().context("--churn")?,
            "--cluster-cidr" => opts.cluster_cidr = value()?.parse().context("--cluster-cidr")?,
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
    operator::run(&opts)
}

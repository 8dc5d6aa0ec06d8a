//! `arm-emulator`: the Azure Resource Manager + IMDS + AAD emulator of `weft_tests::azure` as a
//! program, for tests whose clients run in other processes (the operator). It loads a scenario
//! file (YAML or JSON), prints its base URL as the first line of stdout (one URL for
//! `--azure-arm-endpoint`, `--azure-imds-endpoint` and `AZURE_AUTHORITY_HOST`), logs every
//! request to stderr, and serves until SIGTERM or SIGINT, when it stops and exits 0. The estate
//! lives in memory: every start is the scenario as written.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::Context as _;
use clap::Parser;
use weft_tests::{
    azure::{ArmEmulator, Scenario},
    emulator::program::{self, Program},
};

/// Serve the ARM + IMDS + AAD emulator until SIGTERM or SIGINT.
#[derive(Debug, Parser)]
#[command(name = "arm-emulator", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (the first line of stdout names it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The scenario file (YAML or JSON; see `weft_tests::azure::Scenario`).
    #[arg(long, value_name = "FILE")]
    scenario: PathBuf,
    /// Do not log requests to stderr.
    #[arg(long)]
    quiet: bool,
}

fn main() -> anyhow::Result<()> {
    program::run(run(Args::parse()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let program = Program::new("arm-emulator")?;
    let scenario = Scenario::from_file(&args.scenario).map_err(anyhow::Error::msg)?;
    let mut builder = ArmEmulator::builder(scenario).listen(args.listen);
    if !args.quiet {
        builder = builder.log_requests();
    }
    let emulator = builder.try_start().context("starting the emulator")?;
    program.announce(&emulator.url())?;
    program.serve_until_stopped(emulator).await;
    Ok(())
}

//! `ec2-emulator`: the EC2 + STS + IMDS emulator of `weft_tests::ec2` as a program, for tests
//! and demos whose clients run in other processes (the operator). It loads a scenario file
//! (YAML or JSON), prints its base URL as the first line of stdout (one URL for
//! `--ec2-api-endpoint`, `--aws-imds-endpoint` and the STS endpoint), logs every request to
//! stderr, and serves until SIGTERM or SIGINT, when it stops and exits 0. The estate lives in
//! memory: every start is the scenario as written.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::Context as _;
use clap::Parser;
use weft_tests::{
    ec2::{Ec2Emulator, Scenario},
    emulator::program::{self, Program},
};

/// Serve the EC2 + STS + IMDS emulator until SIGTERM or SIGINT.
#[derive(Debug, Parser)]
#[command(name = "ec2-emulator", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (the first line of stdout names it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The scenario file (YAML or JSON; see `weft_tests::ec2::Scenario`).
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
    let program = Program::new("ec2-emulator")?;
    let scenario = Scenario::from_file(&args.scenario)?;
    let mut builder = Ec2Emulator::builder(scenario).listen(args.listen);
    if !args.quiet {
        builder = builder.log_requests();
    }
    let emulator = builder.try_start().context("starting the emulator")?;
    program.announce(&emulator.url())?;
    program.serve_until_stopped(emulator).await;
    Ok(())
}

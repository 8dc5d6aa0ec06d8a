//! `cargo xtask bench <target>`: runs setup and then a benchmark binary from `weft-tests`
//! in release mode, passing any further arguments through. The benchmark prints its own
//! results (ratios against a baseline). New benchmarks get a [`BenchTarget`] variant.

use std::{ffi::OsString, process::Command};

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::{run, setup, workspace_root};

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark to run.
    pub target: BenchTarget,
    /// Arguments passed through to the benchmark binary (a leading `--` is optional).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<OsString>,
}

/// A benchmark that `cargo xtask bench` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchTarget {
    /// Datapath throughput and latency between pods (`weft-tests` binary `bench-datapath`).
    Datapath,
}

impl BenchTarget {
    /// The package and binary that implement this benchmark.
    pub fn package_and_bin(self) -> (&'static str, &'static str) {
        match self {
            Self::Datapath => ("weft-tests", "bench-datapath"),
        }
    }
}

/// Runs setup, then the chosen benchmark binary with `cargo run --release`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    setup::setup()?;
    let (package, bin) = args.target.package_and_bin();
    // A literal `--` may reach us as the first passthrough argument; cargo adds its own.
    let passthrough = match args.args.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => &args.args[..],
    };
    run::echo_run(
        Command::new("cargo")
            .current_dir(workspace_root())
            .args(["run", "--release", "-p", package, "--bin", bin, "--"])
            .args(passthrough),
    )
}

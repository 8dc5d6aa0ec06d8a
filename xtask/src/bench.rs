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
    /// Per-packet cost of `from_container` under `BPF_PROG_TEST_RUN` against an empty program,
    /// and datapath latency and throughput between pods (`weft-tests` binary `bench-datapath`).
    Datapath,
    /// CNI ADD latency against the bridge plugin and IPAM allocator throughput
    /// (`weft-tests` binary `bench-ipam`).
    Ipam,
    /// Per-packet cost of masquerading (`to_netdev`, `from_netdev`, IPv4 and IPv6) under
    /// `BPF_PROG_TEST_RUN` against an empty program, and pod → external host latency and
    /// throughput through weft's SNAT against the bridge plugin's `ipMasq` (`weft-tests`
    /// binary `bench-masq`).
    Masq,
    /// `ctr run --cni --rm … true` round trips on Debian's containerd through weft against
    /// the bridge plugin (`weft-tests` binary `bench-runtime`).
    Runtime,
    /// `weft-agent`'s RSS at idle, with 110 pods and with 100k IPCache entries fed through the
    /// Kubernetes API emulator (`weft-tests` binary `bench-memory`).
    Memory,
    /// `weft-operator` handing out blocks to 1000 CiliumNodes created at once (cluster-pool and
    /// multi-pool), then 100 deleted and 100 added, through the Kubernetes API emulator
    /// (`weft-tests` binary `bench-operator`).
    Operator,
    /// `weft-operator --ipam azure` serving 100 and 1000 VMSS nodes created at once through
    /// the ARM and Kubernetes API emulators, against the rate limit's floor (`weft-tests`
    /// binary `bench-azure`).
    Azure,
    /// `weft-operator --ipam eni` serving 100 and 1000 nodes created at once through the EC2
    /// and Kubernetes API emulators, each needing a new ENI and each with room on its primary
    /// ENI, against the rate limit's floor (`weft-tests` binary `bench-eni`).
    Eni,
}

impl BenchTarget {
    /// The package and binary that implement this benchmark.
    pub fn package_and_bin(self) -> (&'static str, &'static str) {
        match self {
            Self::Datapath => ("weft-tests", "bench-datapath"),
            Self::Ipam => ("weft-tests", "bench-ipam"),
            Self::Masq => ("weft-tests", "bench-masq"),
            Self::Runtime => ("weft-tests", "bench-runtime"),
            Self::Memory => ("weft-tests", "bench-memory"),
            Self::Operator => ("weft-tests", "bench-operator"),
            Self::Azure => ("weft-tests", "bench-azure"),
            Self::Eni => ("weft-tests", "bench-eni"),
        }
    }

    /// The package and the release binaries of it the benchmark runs, which `cargo run -p
    /// weft-tests` does not build.
    pub fn needs_binaries(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            Self::Runtime | Self::Memory => Some(("weft-agent", &["weft-agent", "weft-cni"])),
            Self::Operator | Self::Azure | Self::Eni => Some(("weft-operator", &["weft-operator"])),
            Self::Datapath | Self::Ipam | Self::Masq => None,
        }
    }
}

/// Runs setup, then the chosen benchmark binary with `cargo run --release`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    setup::setup()?;
    let (package, bin) = args.target.package_and_bin();
    if let Some((needed, binaries)) = args.target.needs_binaries() {
        // One invocation with the benchmark's package, so that the dependencies the two share
        // are built with one feature set, which the `cargo run` below finds fresh (built alone,
        // the binaries' package unifies features differently, and each run rebuilt them).
        let mut build = Command::new("cargo");
        build.current_dir(workspace_root()).args([
            "build",
            "--release",
            "-p",
            needed,
            "-p",
            package,
        ]);
        for name in binaries.iter().chain([&bin]) {
            build.args(["--bin", name]);
        }
        run::echo_run(&mut build)?;
    }
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

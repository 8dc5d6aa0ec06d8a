//! Developer tasks for weft, run as `cargo xtask <command>` (see `.cargo/config.toml`).
//!
//! This crate deliberately depends on nothing from the workspace: it has to build on a
//! fresh machine, before the nightly toolchain and `bpf-linker` that `weft-agent` needs
//! exist, because installing those is its first job (`cargo xtask setup`).

mod bench;
mod demo;
mod demo_cluster;
mod demo_containerd;
mod fuzz;
mod gen_config_ref;
mod gen_crds;
mod image;
mod run;
mod setup;
mod test;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::{Parser, Subcommand};

/// Developer tasks for weft: toolchain setup, the full check suite, live demos, benchmarks, the
/// container image and CRD generation.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install everything the build and tests need (idempotent): the nightly toolchain
    /// with rust-src, bpf-linker built against nightly's LLVM, and the Debian packages
    /// used by the datapath tests.
    Setup,
    /// Run setup, then fmt check, clippy (-D warnings), build, the image and the workspace tests.
    ///
    /// Must run as root: the datapath tests load eBPF and create network namespaces.
    Test(test::TestArgs),
    /// Run setup, build the release agent, start it on `examples/store/` and add three pods
    /// through `weft-cni` as a container runtime would; they ping each other.
    ///
    /// Must run as root. Every command is echoed before it runs.
    Demo(demo::DemoArgs),
    /// Run setup, build the release agent, start a private containerd (Debian's) and run
    /// three busybox containers with `ctr run --cni` on weft; they ping each other, then stop.
    ///
    /// Must run as root. Every command is echoed before it runs. Nothing of the host changes.
    DemoContainerd,
    /// Run setup, build the release agent, operator and the API server emulator, and run a
    /// two-node cluster in network namespaces: the operator hands out multi-pool blocks, pods on
    /// both nodes in two pools ping each other, kubectl shows the CiliumNodes.
    ///
    /// The API server is weft's Kubernetes API emulator, not a real one. Must run as root.
    /// Every command is echoed before it runs.
    DemoCluster(demo_cluster::DemoClusterArgs),
    /// As `demo-cluster`, in Azure IPAM: the nodes are scale set instances in weft's ARM +
    /// IMDS emulator (not Azure), the operator adds addresses to their NICs, pods on each node
    /// take them and ping each other.
    ///
    /// Must run as root. Every command is echoed before it runs.
    DemoAzure(demo_cluster::DemoClusterArgs),
    /// As `demo-cluster`, in ENI IPAM: the nodes are instances in weft's EC2 + IMDS emulator
    /// (not AWS), the operator creates and attaches an ENI per node, the demo plugs it in as
    /// the hypervisor would, and pods on the ENIs ping each other through a VPC namespace that
    /// enforces the source/destination check.
    ///
    /// Must run as root. Every command is echoed before it runs.
    DemoAws(demo_cluster::DemoClusterArgs),
    /// Run setup, then a benchmark in release mode.
    Bench(bench::BenchArgs),
    /// Regenerate the CustomResourceDefinitions in `deploy/crds/` and the Helm chart's `crds/`
    /// from the Rust types (check the result in; the `crds` and `deploy_manifests` tests fail
    /// while it is stale). Needs `cargo xtask setup` once.
    GenCrds,
    /// Regenerate the configuration reference `docs/configuration.md` from the code (check
    /// the result in; the `docs` tests fail while it is stale). Needs `cargo xtask setup` once.
    GenConfigRef,
    /// Run setup, build the release binaries statically and weft's container image from
    /// `Containerfile` with buildah (no registry needed), written as an OCI archive.
    ///
    /// Must run as root (buildah uses root's container storage).
    Image(image::ImageArgs),
    /// Fuzz the input parsers (CNI config and env, socket requests, CiliumNode and
    /// CiliumPodIPPool documents, the ip-masq-agent file) with cargo-fuzz on nightly, for a
    /// bounded time per target. Not part of `test`; installs cargo-fuzz on first use.
    Fuzz(fuzz::FuzzArgs),
}

/// Reports errors as `error: ...` plus their causes, without anyhow's backtrace (which
/// `RUST_BACKTRACE` would otherwise add): the messages already name the failing command.
fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Setup => setup::setup(),
        Command::Test(args) => test::test(&args),
        Command::Demo(args) => demo::demo(&args),
        Command::DemoContainerd => demo_containerd::demo_containerd(),
        Command::DemoCluster(args) => {
            demo_cluster::demo_cluster(&args, demo_cluster::Mode::MultiPool)
        }
        Command::DemoAzure(args) => demo_cluster::demo_cluster(&args, demo_cluster::Mode::Azure),
        Command::DemoAws(args) => demo_cluster::demo_cluster(&args, demo_cluster::Mode::Aws),
        Command::Bench(args) => bench::bench(&args),
        Command::GenCrds => gen_crds::gen_crds(),
        Command::GenConfigRef => gen_config_ref::gen_config_ref(),
        Command::Image(args) => image::image(&args),
        Command::Fuzz(args) => fuzz::fuzz(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate's directory); all commands run from there.
///
/// # Panics
///
/// Never in practice: this crate's manifest directory always has a parent.
#[must_use]
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` if set, else `<workspace>/target`.
#[must_use]
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || workspace_root().join("target"),
        |dir| workspace_root().join(dir),
    )
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command, bench::BenchTarget};

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn test_passes_everything_after_the_separator_to_cargo_test() {
        let cli = Cli::try_parse_from(["xtask", "test", "--", "netns", "--", "--nocapture"]);
        let Command::Test(args) = cli.expect("parses").command else {
            panic!("not the test command");
        };
        assert_eq!(args.cargo_test_args, ["netns", "--", "--nocapture"]);
    }

    #[test]
    fn bench_takes_a_target_and_passthrough_args() {
        for argv in [
            &["xtask", "bench", "datapath", "--seconds", "5"][..],
            &["xtask", "bench", "datapath", "--", "--seconds", "5"][..],
        ] {
            let Command::Bench(args) = Cli::try_parse_from(argv).expect("parses").command else {
                panic!("not the bench command");
            };
            assert_eq!(args.target, BenchTarget::Datapath);
            assert!(args.args.ends_with(&["--seconds".into(), "5".into()]));
        }
    }
}

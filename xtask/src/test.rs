//! `cargo xtask test`: the full local check suite, in the order CI would run it: setup,
//! then formatting, clippy with warnings denied, a build of every target, the container image
//! (`cargo xtask image`, which a test runs) and the workspace tests. Output streams live; the first failing step stops the run and is named in the
//! error. The datapath tests load eBPF and create network namespaces, so this needs root.

use std::{
    ffi::OsString,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use clap::Args;

use crate::{image, run, setup, workspace_root};

/// Arguments of `cargo xtask test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Extra arguments for `cargo test --workspace` (after `--`), e.g. `-- netns -- --nocapture`.
    #[arg(last = true, value_name = "CARGO_TEST_ARGS")]
    pub cargo_test_args: Vec<OsString>,
}

/// Runs setup and then each check step, failing fast; prints the total wall time.
pub fn test(args: &TestArgs) -> Result<()> {
    run::require_root("the datapath tests load eBPF and create network namespaces")?;
    let start = Instant::now();
    let result = run_steps(args);
    let elapsed = format_duration(start.elapsed());
    match &result {
        Ok(()) => println!("==> all steps passed in {elapsed}"),
        Err(_) => println!("==> failed after {elapsed}"),
    }
    result
}

fn run_steps(args: &TestArgs) -> Result<()> {
    step("setup", setup::setup)?;
    let cargo = |args: &[&str]| {
        let mut cmd = Command::new("cargo");
        cmd.current_dir(workspace_root()).args(args);
        cmd
    };
    let mut tests = cargo(&["test", "--workspace"]);
    tests.args(&args.cargo_test_args);
    let mut steps = [
        ("fmt", cargo(&["fmt", "--all", "--", "--check"])),
        (
            "clippy",
            cargo(&[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]),
        ),
        ("build", cargo(&["build", "--workspace", "--all-targets"])),
        ("test", tests),
    ];
    let (checks, tests) = steps.split_at_mut(3);
    for (name, cmd) in checks {
        step(name, || run::echo_run(cmd))?;
    }
    // tests/tests/image.rs runs the DaemonSet from the image this builds.
    step("image", || image::build(&image::ImageArgs { output: None }))?;
    for (name, cmd) in tests {
        step(name, || run::echo_run(cmd))?;
    }
    Ok(())
}

fn step(name: &str, body: impl FnOnce() -> Result<()>) -> Result<()> {
    println!("==> {name}");
    body().with_context(|| format!("step `{name}` failed"))
}

fn format_duration(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    let tenths = elapsed.subsec_millis() / 100;
    if secs >= 60 {
        format!("{}m {:02}.{tenths}s", secs / 60, secs % 60)
    } else {
        format!("{secs}.{tenths}s")
    }
}

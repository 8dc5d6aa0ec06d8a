//! `cargo xtask gen-config-ref`: regenerates the configuration reference `docs/configuration.md`
//! from the code (the agent's and the operator's key tables and clap flags). The generator lives
//! in `weft-tests` (binary `gen-config-ref`), because this crate must not depend on workspace
//! crates; this only runs it. Building it builds `weft-agent` and so its eBPF object: on a fresh
//! machine run `cargo xtask setup` first.

use std::process::Command;

use anyhow::Result;

use crate::{run, workspace_root};

/// Runs `cargo run -p weft-tests --bin gen-config-ref -- <workspace>/docs/configuration.md`.
pub fn gen_config_ref() -> Result<()> {
    let file = workspace_root().join("docs").join("configuration.md");
    run::echo_run(
        Command::new("cargo")
            .current_dir(workspace_root())
            .args([
                "run",
                "--quiet",
                "-p",
                "weft-tests",
                "--bin",
                "gen-config-ref",
                "--",
            ])
            .arg(file),
    )
}

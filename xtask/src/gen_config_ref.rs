//! `cargo xtask gen-config-ref`: regenerates the configuration reference `docs/configuration.md`
//! from the code (the agent's and the operator's key tables and clap flags). The generator lives
//! in `weft-tests` (binary `gen-config-ref`), because this crate must not depend on workspace
//! crates; this only runs it. Building it builds `weft-agent` and so its eBPF object: on a fresh
//! machine run `cargo xtask setup` first.

use anyhow::Result;

use crate::{gen_crds::run_generator, workspace_root};

/// Runs `cargo run -p weft-tests --bin gen-config-ref -- <workspace>/docs/configuration.md`.
pub fn gen_config_ref() -> Result<()> {
    run_generator(
        "gen-config-ref",
        &workspace_root().join("docs").join("configuration.md"),
    )
}

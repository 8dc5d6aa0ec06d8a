//! `cargo xtask gen-crds`: regenerates the checked-in CustomResourceDefinitions under
//! `deploy/crds/` and the same files in the Helm chart's `deploy/helm/weft/crds/` from the
//! Rust crd types. The generator lives in `weft-tests` (binary
//! `gen-crds`), because this crate must not depend on workspace crates; this only runs it.
//! Building it builds `weft-agent` and so its eBPF object: on a fresh machine run
//! `cargo xtask setup` first (not done here: setup also installs Debian packages, as root).

use std::{path::Path, process::Command};

use anyhow::Result;

use crate::{run, workspace_root};

/// Runs `cargo run -p weft-tests --bin gen-crds -- <dir>` for `deploy/crds` and the Helm
/// chart's `deploy/helm/weft/crds`.
pub fn gen_crds() -> Result<()> {
    let deploy = workspace_root().join("deploy");
    run_generator("gen-crds", &deploy.join("crds"))?;
    run_generator("gen-crds", &deploy.join("helm").join("weft").join("crds"))
}

/// Runs the generator binary `bin` of `weft-tests` on `target` (the file or directory it
/// writes): `cargo run --quiet -p weft-tests --bin <bin> -- <target>`.
pub fn run_generator(bin: &str, target: &Path) -> Result<()> {
    run::echo_run(
        Command::new("cargo")
            .current_dir(workspace_root())
            .args(["run", "--quiet", "-p", "weft-tests", "--bin", bin, "--"])
            .arg(target),
    )
}

//! `cargo xtask gen-config-ref`: writes the configuration reference generated from the code
//! (`weft_tests::docs::config_ref`) to the file given as the only argument, by default
//! `docs/configuration.md` of the workspace, and the page of Cilium's features
//! (`weft_tests::docs::features`) beside it as `cilium-features.md`. `tests/tests/docs/` fails while the checked-in file
//! differs from a fresh rendering.

use std::{fs, path::PathBuf};

use anyhow::{Context as _, bail};
use weft_tests::docs;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let path = args
        .next()
        .map_or_else(docs::config_ref_path, PathBuf::from);
    if args.next().is_some() {
        bail!("usage: gen-config-ref [FILE]");
    }
    fs::write(&path, docs::config_ref::render())
        .with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    // The page of Cilium's features goes beside it.
    let features = path.with_file_name("cilium-features.md");
    fs::write(&features, docs::features::render())
        .with_context(|| format!("writing {}", features.display()))?;
    println!("wrote {}", features.display());
    Ok(())
}

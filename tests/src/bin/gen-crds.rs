//! `cargo xtask gen-crds`: writes weft's generated CustomResourceDefinitions (one file per
//! resource, named after its plural) into the directory given as the only argument, by default
//! `deploy/crds/` of the workspace. `tests/tests/crds.rs` fails while the checked-in files differ
//! from a fresh generation.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use weft_tests::crds;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let dir = args.next().map_or_else(crds::deploy_dir, PathBuf::from);
    if args.next().is_some() {
        bail!("usage: gen-crds [DIR]");
    }
    let written = crds::write_all(&dir).context("generating the CRDs")?;
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

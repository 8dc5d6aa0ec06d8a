//! The user's documentation as code sees it: the generated configuration reference
//! (`docs/configuration.md`, [`config_ref`]), the page of Cilium's features weft has and has not
//! (`docs/cilium-features.md`, [`features`]) and the checks that keep README.md and `docs/`
//! honest ([`check`]: links stay inside the repository and resolve, shown commands, flags and
//! map names exist). Pure text work over the repository's files; nothing here runs a binary.

pub mod check;
pub mod config_ref;
pub mod features;

use std::path::PathBuf;

/// The workspace root (the repository).
#[must_use]
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf)
}

/// The checked-in page of Cilium's features (`docs/cilium-features.md`).
#[must_use]
pub fn features_path() -> PathBuf {
    repo_root().join("docs").join("cilium-features.md")
}

/// The checked-in configuration reference.
#[must_use]
pub fn config_ref_path() -> PathBuf {
    repo_root().join("docs").join("configuration.md")
}

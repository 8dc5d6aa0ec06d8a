//! Replacing a file atomically: the new content goes to a hidden temporary file beside it
//! (`.<name>.weft-tmp`, ignored by every reader here), optionally fsynced, then renamed over the
//! old one, so a reader sees the old or the new file and never a partial one. A symlink is
//! written through to its target, and the existing file's permissions are kept, except for the
//! agent's private state ([`write_private`]), which is always readable by its owner only.

use std::{
    fs, io,
    io::Write as _,
    os::unix::fs::{DirBuilderExt as _, PermissionsExt as _},
    path::Path,
};

/// The mode of the agent's private state: pod names, container ids, namespaces and addresses.
pub const PRIVATE_FILE: u32 = 0o600;
/// The mode of the directories that hold it.
pub const PRIVATE_DIR: u32 = 0o700;

/// Create `dir` (and its parents) if missing and make it its owner's only ([`PRIVATE_DIR`]),
/// also when an older version made it open to everyone.
///
/// # Errors
/// Creating it or changing its mode failed.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(PRIVATE_DIR))
}

/// Replace `path` with `bytes` as [`write_atomic`] does, readable by its owner only
/// ([`PRIVATE_FILE`]) whatever the old file's mode was.
///
/// # Errors
/// As [`write_atomic`].
pub fn write_private(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    replace(
        path,
        bytes,
        durable,
        Some(fs::Permissions::from_mode(PRIVATE_FILE)),
    )
}

/// Replace `path` with `bytes`. `durable`: also fsync the file and its directory (for state
/// that must survive a machine crash, such as store documents).
///
/// # Errors
/// Writing, syncing or renaming failed; the old file is then untouched and no temporary file
/// is left behind.
pub fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    replace(path, bytes, durable, None)
}

/// Replace `path` with `bytes`, with `mode` or else the old file's permissions.
fn replace(
    path: &Path,
    bytes: &[u8],
    durable: bool,
    mode: Option<fs::Permissions>,
) -> io::Result<()> {
    let resolved = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = resolved.as_path();
    let mode = mode.or_else(|| fs::metadata(path).ok().map(|m| m.permissions()));
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.weft-tmp"));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        if let Some(mode) = mode {
            file.set_permissions(mode)?;
        }
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if durable {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

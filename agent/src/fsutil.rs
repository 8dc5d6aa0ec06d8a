//! Replacing a file atomically: the new content goes to a hidden temporary file beside it
//! (`.<name>.weft-tmp`, ignored by every reader here), optionally fsynced, then renamed over the
//! old one, so a reader sees the old or the new file and never a partial one. A symlink is
//! written through to its target, and the existing file's permissions are kept.

use std::{fs, io, io::Write as _, path::Path};

/// Replace `path` with `bytes`. `durable`: also fsync the file and its directory (for state
/// that must survive a machine crash, such as store documents).
///
/// # Errors
/// Writing, syncing or renaming failed; the old file is then untouched and no temporary file
/// is left behind.
pub fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let resolved = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = resolved.as_path();
    let mode = fs::metadata(path).ok().map(|m| m.permissions());
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

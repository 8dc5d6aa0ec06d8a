//! bpffs housekeeping: make sure a bpf filesystem is mounted and weft's pin directories exist.
//! Owns no maps or programs; `loader` and `attach` decide what gets pinned where.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use nix::{
    mount::{MsFlags, mount},
    sys::statfs::{BPF_FS_MAGIC, statfs},
};

use super::DatapathError;

/// Mount a bpffs on the mount point above `pin_dir` if there is none, then create `pin_dir`.
///
/// The mount point is the first ancestor of `pin_dir` that exists (normally `/sys/fs/bpf`).
pub fn prepare(pin_dir: &Path) -> Result<(), DatapathError> {
    let mount_point = pin_dir
        .ancestors()
        .skip(1)
        .find(|p| p.exists())
        .map_or_else(|| PathBuf::from("/sys/fs/bpf"), Path::to_path_buf);
    if !is_bpffs(&mount_point) {
        mount(
            Some("bpf"),
            &mount_point,
            Some("bpf"),
            MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|source| DatapathError::BpffsMount {
            path: mount_point.clone(),
            source,
        })?;
    }
    create_dir(pin_dir)
}

/// Create `dir` (and parents) with mode 0755.
pub fn create_dir(dir: &Path) -> Result<(), DatapathError> {
    fs::create_dir_all(dir).map_err(|source| {
        if source.kind() == io::ErrorKind::PermissionDenied {
            DatapathError::PinPermission {
                path: dir.into(),
                source,
            }
        } else {
            DatapathError::Pin {
                path: dir.into(),
                source,
            }
        }
    })
}

fn is_bpffs(path: &Path) -> bool {
    statfs(path).is_ok_and(|s| s.filesystem_type() == BPF_FS_MAGIC)
}

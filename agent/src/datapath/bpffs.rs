//! bpffs housekeeping: make sure a bpf filesystem is mounted and weft's pin directories exist.
//! Owns no maps or programs; `loader` and `attach` decide what gets pinned where.

use std::{
    fs, io,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use nix::{
    mount::{MsFlags, mount},
    sys::statfs::{BPF_FS_MAGIC, statfs},
};
use tracing::{info, warn};

use super::DatapathError;

/// Mount a bpffs on the mount point above `pin_dir` if there is none, then create `pin_dir`.
///
/// The mount point is the first ancestor of `pin_dir` that exists (normally `/sys/fs/bpf`).
///
/// # Errors
/// Mounting the bpffs or creating `pin_dir` failed.
pub fn prepare(pin_dir: &Path) -> Result<(), DatapathError> {
    let mount_point = pin_dir
        .ancestors()
        .skip(1)
        .find(|p| p.exists())
        .map_or_else(|| PathBuf::from("/sys/fs/bpf"), Path::to_path_buf);
    if !is_bpffs(&mount_point) {
        // Two agents (or parallel tests) starting together must not both mount: a second bpffs
        // stacked on the first would hide every pin made in it. Check again under a lock.
        let _lock = mount_lock();
        if is_bpffs(&mount_point) {
            return create_dir(pin_dir);
        }
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
        say_mounted(&mount_point);
    }
    create_dir(pin_dir)
}

/// Say that the agent mounted a bpffs itself, and warn when that mount cannot outlive the
/// process: in a mount namespace of its own (`ip netns exec` makes one, with a fresh /sys) the
/// mount, and every pin in it, is gone when the agent exits, so the next start finds none.
fn say_mounted(mount_point: &Path) {
    let ns = |pid: &str| {
        fs::metadata(format!("/proc/{pid}/ns/mnt"))
            .map(|m| m.ino())
            .ok()
    };
    if ns("self") == ns("1") {
        info!(path = %mount_point.display(), "no bpf filesystem was mounted here: mounted one");
    } else {
        warn!(
            path = %mount_point.display(),
            "no bpf filesystem was mounted here, and this process runs in a mount namespace of \
             its own (as under `ip netns exec`): the bpffs mounted here goes with the process, so \
             pins will not survive a restart (the agent then rebuilds every pod's datapath). \
             Mount bpffs on the host (`mount -t bpf bpf /sys/fs/bpf`) and enter the node's \
             network namespace with `nsenter --net=…` rather than `ip netns exec`"
        );
    }
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

/// An exclusive lock shared by every weft process on this machine, held while mounting.
/// Best effort: without it (no writable /run) the mount still happens.
fn mount_lock() -> Option<nix::fcntl::Flock<fs::File>> {
    let dir = if Path::new("/run").is_dir() {
        PathBuf::from("/run")
    } else {
        std::env::temp_dir()
    };
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("weft-bpffs.lock"))
        .ok()?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()
}

fn is_bpffs(path: &Path) -> bool {
    statfs(path).is_ok_and(|s| s.filesystem_type() == BPF_FS_MAGIC)
}

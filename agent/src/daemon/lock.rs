//! One agent per node: `weft-agent run` holds an exclusive `flock` on its state directory and
//! on its pin directory for as long as it runs, taken before it touches either. A second agent
//! on the same state (the same endpoint records and `status.ipam.used`) or the same pins (the
//! same IPCache and endpoints) would undo the first one's work every second; it exits at once
//! naming the holder's PID (from `/proc/locks`) and the directory. The kernel drops the lock
//! when the process ends, however it ends, so a SIGKILLed agent never blocks its successor.

use std::{
    fs, io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use nix::fcntl::{Flock, FlockArg};

/// Why this agent may not run on these directories.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock.
    #[error(
        "another weft-agent{} already runs with this {what} ({}): stop it first, or give this \
         one its own --{what}; two agents on one node would hand out the same addresses and \
         overwrite each other's CiliumNode, endpoints and IPCache",
        holder.map(|pid| format!(" (PID {pid})")).unwrap_or_default(),
        dir.display()
    )]
    Held {
        /// `state-dir` or `pin-dir`.
        what: &'static str,
        /// The directory.
        dir: PathBuf,
        /// The holder's PID, when `/proc/locks` names it.
        holder: Option<u32>,
    },
    /// The directory cannot be created, opened or locked.
    #[error("cannot lock the {what} {}", dir.display())]
    Io {
        /// `state-dir` or `pin-dir`.
        what: &'static str,
        /// The directory.
        dir: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
}

/// The held locks; dropping them (or exiting) releases them.
#[derive(Debug)]
pub struct Locks {
    _held: Vec<Flock<fs::File>>,
}

/// Lock `state_dir` (created if missing) and `pin_dir` (which must exist: the datapath's
/// bpffs preparation makes it).
///
/// # Errors
/// Another process holds one of them, or one cannot be opened.
pub fn take(state_dir: &Path, pin_dir: &Path) -> Result<Locks, LockError> {
    crate::fsutil::private_dir(state_dir).map_err(|source| LockError::Io {
        what: "state-dir",
        dir: state_dir.into(),
        source,
    })?;
    let state = lock("state-dir", state_dir)?;
    let pins = lock("pin-dir", pin_dir)?;
    Ok(Locks {
        _held: vec![state, pins],
    })
}

fn lock(what: &'static str, dir: &Path) -> Result<Flock<fs::File>, LockError> {
    let io_error = |source| LockError::Io {
        what,
        dir: dir.into(),
        source,
    };
    let file = fs::File::open(dir).map_err(io_error)?;
    let inode = file.metadata().map_err(io_error)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(held) => Ok(held),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(LockError::Held {
            what,
            dir: dir.into(),
            holder: holder(inode.dev(), inode.ino()),
        }),
        Err((_, errno)) => Err(io_error(io::Error::from(errno))),
    }
}

/// The PID `/proc/locks` gives for the FLOCK on device `dev`, inode `ino`.
fn holder(dev: u64, ino: u64) -> Option<u32> {
    let locks = fs::read_to_string("/proc/locks").ok()?;
    holder_in(&locks, dev, ino)
}

/// [`holder`] on the text of `/proc/locks`: `1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF`
/// (device as hexadecimal major:minor).
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let wanted = format!(
        "{:02x}:{:02x}:{ino}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev)
    );
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let flock = fields.get(1) == Some(&"FLOCK");
        let inode = fields.iter().position(|f| *f == wanted)?;
        (flock && inode >= 1).then(|| fields.get(inode - 1)?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::{fs, holder_in, take};

    #[test]
    fn the_state_dir_is_root_s_only() {
        let base = std::env::temp_dir().join(format!("weft-lock-mode-{}", std::process::id()));
        let (state, pins) = (base.join("state"), base.join("pins"));
        fs::create_dir_all(&pins).expect("mkdir");
        // An older agent's state directory, open to everyone.
        fs::create_dir_all(&state).expect("mkdir");
        fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).expect("chmod");
        let locks = take(&state, &pins).expect("lock");
        let mode = fs::metadata(&state).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        drop(locks);
        fs::remove_dir_all(&base).expect("clean up");
    }

    #[test]
    fn the_holder_is_read_from_proc_locks() {
        let dev = nix::sys::stat::makedev(0, 0x2d);
        let locks = "1: POSIX  ADVISORY  WRITE 99 00:2d:5678 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 77 00:2e:5678 0 EOF\n";
        assert_eq!(holder_in(locks, dev, 5678), Some(1234));
        assert_eq!(holder_in(locks, dev, 5679), None);
    }
}

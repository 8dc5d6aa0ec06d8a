//! Network namespace helpers: open a netns file and temporarily switch the
//! *calling thread* into it with `setns(CLONE_NEWNET)`, switching back on drop.
//!
//! This module owns nothing but the calling thread's network namespace, and
//! only for the lifetime of a [`NetNsGuard`]. It must not create, delete or
//! mount namespaces, and must not be held across an `.await`: the guard is
//! `!Send` so a tokio task cannot carry it to another worker thread. Keep the
//! code run inside a namespace synchronous and short (e.g. opening a socket,
//! which stays bound to that namespace afterwards).

use std::{
    fs::File,
    io,
    marker::PhantomData,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use nix::{errno::Errno, sched::CloneFlags};

/// The calling thread's own network namespace file.
pub(crate) const THREAD_SELF_NETNS: &str = "/proc/thread-self/ns/net";

/// Errors from opening or switching network namespaces.
#[derive(Debug, thiserror::Error)]
pub enum NetNsError {
    /// The namespace file does not exist.
    #[error("network namespace {} does not exist: the pod sandbox is gone or the path is wrong", path.display())]
    NotFound {
        /// The namespace file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The namespace file exists but could not be opened.
    #[error("cannot open network namespace {}: check that the agent runs as root with the host /proc and /var/run/netns mounted", path.display())]
    Open {
        /// The namespace file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `setns` into the target namespace failed.
    #[error("cannot enter network namespace {}: check that it is a network namespace file and that the agent has CAP_SYS_ADMIN", path.display())]
    Enter {
        /// The namespace file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: Errno,
    },
    /// The path opens something other than a namespace file.
    #[error("{} is not a namespace file (no nsfs bind mount or /proc/<pid>/ns/net): pass the pod sandbox's network namespace", path.display())]
    NotNamespace {
        /// The path given.
        path: PathBuf,
    },
    /// The path is the agent's own (the host's) network namespace.
    #[error("{} is the agent's own network namespace, not a pod's: wiring it would move host networking into a pod", path.display())]
    HostNamespace {
        /// The path given.
        path: PathBuf,
    },
    /// `setns` back into the original namespace failed; the thread is stranded.
    #[error("cannot return from network namespace {} to the thread's original one: this thread is now in the wrong namespace", path.display())]
    Restore {
        /// The namespace file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: Errno,
    },
}

/// Opens a network namespace file (`/proc/<pid>/ns/net`, `/var/run/netns/<name>`).
///
/// The returned file keeps the namespace alive while it is open and can be
/// passed as a netns fd to netlink (`IFLA_NET_NS_FD`).
///
/// # Errors
/// [`NetNsError::NotFound`] if the path does not exist, [`NetNsError::Open`]
/// for any other I/O failure.
pub fn open_netns(path: &Path) -> Result<File, NetNsError> {
    File::open(path).map_err(|source| {
        let path = path.to_path_buf();
        if source.kind() == io::ErrorKind::NotFound {
            NetNsError::NotFound { path, source }
        } else {
            NetNsError::Open { path, source }
        }
    })
}

/// The agent's own network namespace (its process's, normally the host's).
const PROCESS_NETNS: &str = "/proc/self/ns/net";

/// Checks that `path` opens a namespace file other than the agent's own network namespace,
/// so a request can neither point the agent at an arbitrary file nor at host networking.
/// (That it is a *network* namespace is checked by `setns` when it is entered.)
///
/// # Errors
/// [`NetNsError::NotFound`] / [`NetNsError::Open`] as [`open_netns`],
/// [`NetNsError::NotNamespace`] or [`NetNsError::HostNamespace`].
pub fn check_pod_netns(path: &Path) -> Result<(), NetNsError> {
    let file = open_netns(path)?;
    let open_error = |source: io::Error| NetNsError::Open {
        path: path.to_path_buf(),
        source,
    };
    let fs = nix::sys::statfs::fstatfs(&file).map_err(|e| open_error(e.into()))?;
    if fs.filesystem_type() != nix::sys::statfs::NSFS_MAGIC {
        return Err(NetNsError::NotNamespace {
            path: path.to_path_buf(),
        });
    }
    let own = std::fs::metadata(PROCESS_NETNS).map_err(open_error)?;
    let given = file.metadata().map_err(open_error)?;
    if (own.dev(), own.ino()) == (given.dev(), given.ino()) {
        return Err(NetNsError::HostNamespace {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// While alive, the calling thread is inside another network namespace.
///
/// Dropping it switches the thread back to the namespace it was in before
/// [`NetNsGuard::enter`]. It is thread-bound and therefore `!Send`.
#[derive(Debug)]
pub struct NetNsGuard {
    /// The thread's original namespace; `None` once restored.
    saved: Option<File>,
    /// The namespace that was entered, for error messages.
    path: PathBuf,
    /// Makes the guard `!Send` and `!Sync`: `setns` affects one thread only.
    _thread_bound: PhantomData<*const ()>,
}

impl NetNsGuard {
    /// Switches the calling thread into the network namespace at `path`.
    ///
    /// # Errors
    /// Fails if `path` cannot be opened or entered, or if the thread's current
    /// namespace cannot be saved (then the thread has not moved).
    pub fn enter(path: &Path) -> Result<Self, NetNsError> {
        let target = open_netns(path)?;
        let saved = File::open(THREAD_SELF_NETNS).map_err(|source| NetNsError::Open {
            path: PathBuf::from(THREAD_SELF_NETNS),
            source,
        })?;
        nix::sched::setns(&target, CloneFlags::CLONE_NEWNET).map_err(|source| {
            NetNsError::Enter {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok(Self {
            saved: Some(saved),
            path: path.to_path_buf(),
            _thread_bound: PhantomData,
        })
    }

    /// Switches the thread back now and reports whether that worked.
    ///
    /// # Errors
    /// [`NetNsError::Restore`] if the thread could not return; it is then
    /// left in the entered namespace.
    pub fn leave(mut self) -> Result<(), NetNsError> {
        self.restore()
    }

    /// Switches back to the saved namespace, at most once.
    fn restore(&mut self) -> Result<(), NetNsError> {
        let Some(saved) = self.saved.take() else {
            return Ok(());
        };
        nix::sched::setns(&saved, CloneFlags::CLONE_NEWNET).map_err(|source| NetNsError::Restore {
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for NetNsGuard {
    fn drop(&mut self) {
        if let Err(err) = self.restore() {
            let cause = std::error::Error::source(&err).map(ToString::to_string);
            tracing::error!(cause = cause.unwrap_or_default(), "{err}");
        }
    }
}

/// Runs `f` on the calling thread while it is inside the netns at `path`.
///
/// `f` should be synchronous and short; the thread is switched back before
/// this returns (also if `f` panics).
///
/// # Errors
/// Fails if the namespace cannot be entered or left; see [`NetNsGuard`].
pub fn in_netns<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, NetNsError> {
    let guard = NetNsGuard::enter(path)?;
    let value = f();
    guard.leave()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::{os::unix::fs::MetadataExt, thread};

    use super::*;

    fn require_root() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "netns tests need root (CAP_SYS_ADMIN) to call unshare/setns; run them as root"
        );
    }

    /// Inode of the calling thread's network namespace.
    fn current_netns_ino() -> u64 {
        std::fs::metadata(THREAD_SELF_NETNS).unwrap().ino()
    }

    #[test]
    fn enter_and_leave_switches_only_for_the_guard_lifetime() {
        require_root();
        thread::spawn(|| {
            // Give this thread a private namespace so the root netns is never touched.
            nix::sched::unshare(CloneFlags::CLONE_NEWNET).unwrap();
            let home = current_netns_ino();
            // A second private namespace to visit, kept alive by a helper thread.
            let (tx, rx) = std::sync::mpsc::channel();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let helper = thread::spawn(move || {
                nix::sched::unshare(CloneFlags::CLONE_NEWNET).unwrap();
                let tid = nix::unistd::gettid();
                tx.send(PathBuf::from(format!("/proc/self/task/{tid}/ns/net")))
                    .unwrap();
                done_rx.recv().unwrap();
            });
            let other = rx.recv().unwrap();
            let other_ino = std::fs::metadata(&other).unwrap().ino();
            assert_ne!(home, other_ino);

            let seen = in_netns(&other, current_netns_ino).unwrap();
            assert_eq!(seen, other_ino);
            assert_eq!(current_netns_ino(), home);

            {
                let _guard = NetNsGuard::enter(&other).unwrap();
                assert_eq!(current_netns_ino(), other_ino);
            }
            assert_eq!(current_netns_ino(), home);

            done_tx.send(()).unwrap();
            helper.join().unwrap();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn missing_netns_is_reported_as_not_found() {
        require_root();
        let path = Path::new("/var/run/netns/weft-does-not-exist");
        let err = in_netns(path, || ()).unwrap_err();
        assert!(matches!(err, NetNsError::NotFound { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("/var/run/netns/weft-does-not-exist")
        );
    }

    #[test]
    fn pod_netns_must_be_a_namespace_other_than_the_agents() {
        require_root();
        let err = check_pod_netns(Path::new("/proc/self/status")).unwrap_err();
        assert!(matches!(err, NetNsError::NotNamespace { .. }), "{err:?}");
        let err = check_pod_netns(Path::new(PROCESS_NETNS)).unwrap_err();
        assert!(matches!(err, NetNsError::HostNamespace { .. }), "{err:?}");
        thread::spawn(|| {
            nix::sched::unshare(CloneFlags::CLONE_NEWNET).unwrap();
            let own = format!("/proc/self/task/{}/ns/net", nix::unistd::gettid());
            check_pod_netns(Path::new(&own)).unwrap();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn non_netns_file_is_rejected_by_setns() {
        require_root();
        let err = NetNsGuard::enter(Path::new("/proc/self/status")).unwrap_err();
        assert!(matches!(err, NetNsError::Enter { .. }), "{err:?}");
    }
}

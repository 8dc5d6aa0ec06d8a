//! `weft-agent cleanup`: uninstall from one node everything `weft-agent run` and
//! `weft-agent cni install` put there. First the CNI configuration and plugin (so the runtime
//! stops calling weft), then the datapath ([`teardown`]: veths, tc filters, pins), then the
//! agent's files: the socket, the DEL queue, the endpoint records, the router addresses, the
//! IPAM mode, and the state directory when nothing else is in it.
//!
//! Refuses while an agent answers on the socket: it would recreate what is removed. Removes
//! only what weft names ([`CONFLIST_NAME`], [`PLUGIN`], [`RECORDS_DIR`], ...), never another
//! file of those directories; a second run finds nothing and succeeds.

use std::{
    fmt, fs, io,
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
};

use crate::{
    cni::install::{CONFLIST_NAME, PLUGIN},
    daemon::{MODE_FILE, POOL_IDS_FILE, RECORDS_DIR, ROUTER_FILE},
    datapath::teardown::{self, Removed, TeardownError},
};

/// Why `weft-agent cleanup` stopped.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// An agent serves on the socket.
    #[error(
        "weft-agent is running (it answers on {}): stop it first (delete the weft-agent \
         DaemonSet, or stop the service), then run cleanup again", socket.display()
    )]
    AgentRunning {
        /// The socket.
        socket: PathBuf,
    },
    /// The datapath could not be taken off the node.
    #[error("removing the datapath")]
    Datapath {
        /// What failed.
        #[source]
        source: TeardownError,
    },
    /// A file or directory of weft's cannot be removed.
    #[error("cannot remove {}: run as root, with the host's directory mounted read-write", path.display())]
    Remove {
        /// The path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: io::Error,
    },
}

/// Where weft's things are on this node (the agent's and `cni install`'s flags).
#[derive(Clone, Debug)]
pub struct Options {
    /// bpffs directory of the pins (`--pin-dir`).
    pub pin_dir: PathBuf,
    /// The agent's state directory (`--state-dir`).
    pub state_dir: PathBuf,
    /// The agent's socket (`--socket`).
    pub socket: PathBuf,
    /// The DEL queue (`--delete-queue-dir`).
    pub delete_queue: PathBuf,
    /// The CNI binary directory (`--bin-dir`).
    pub bin_dir: PathBuf,
    /// The CNI configuration directory (`--conf-dir`).
    pub conf_dir: PathBuf,
}

/// What `cleanup` removed, in order; empty when there was nothing to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The removed things.
    pub removed: Vec<Removed>,
    /// The state directory, if it stays because it holds files that are not weft's.
    pub kept: Option<PathBuf>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.removed.is_empty() {
            writeln!(f, "nothing of weft on this node: nothing to do")?;
        }
        for removed in &self.removed {
            writeln!(f, "{removed}")?;
        }
        if let Some(dir) = &self.kept {
            writeln!(
                f,
                "kept {}: it holds files weft did not write",
                dir.display()
            )?;
        }
        Ok(())
    }
}

/// Remove weft from this node (see the module docs).
///
/// # Errors
/// An agent is running, or a removal failed (what came before it is removed; fix the cause
/// and run again).
pub async fn cleanup(options: &Options) -> Result<Report, CleanupError> {
    if UnixStream::connect(&options.socket).is_ok() {
        return Err(CleanupError::AgentRunning {
            socket: options.socket.clone(),
        });
    }
    let mut report = Report::default();
    let removed = &mut report.removed;
    remove(
        &options.conf_dir.join(CONFLIST_NAME),
        "CNI configuration",
        removed,
    )?;
    remove(&options.bin_dir.join(PLUGIN), "CNI plugin", removed)?;
    removed.extend(
        teardown::teardown(&options.pin_dir)
            .await
            .map_err(|source| CleanupError::Datapath { source })?,
    );
    let state = &options.state_dir;
    for (path, what) in [
        (options.socket.clone(), "socket"),
        (options.delete_queue.clone(), "DEL queue"),
        (state.join(RECORDS_DIR), "endpoint records"),
        (state.join(ROUTER_FILE), "router addresses"),
        (state.join(POOL_IDS_FILE), "pool ids"),
        (state.join(MODE_FILE), "IPAM mode record"),
    ] {
        remove(&path, what, removed)?;
    }
    match fs::remove_dir(state) {
        Ok(()) => removed.push(Removed {
            what: "state directory",
            name: state.display().to_string(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => report.kept = Some(state.clone()),
        Err(source) => {
            return Err(CleanupError::Remove {
                path: state.clone(),
                source,
            });
        }
    }
    Ok(report)
}

/// Remove the file or directory tree at `path`; absent: nothing to do.
fn remove(path: &Path, what: &'static str, removed: &mut Vec<Removed>) -> Result<(), CleanupError> {
    let error = |source| CleanupError::Remove {
        path: path.to_path_buf(),
        source,
    };
    let result = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
    };
    result.map_err(error)?;
    removed.push(Removed {
        what,
        name: path.display().to_string(),
    });
    Ok(())
}

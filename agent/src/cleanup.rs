//! `weft-agent cleanup`: uninstall from one node everything `weft-agent run` and
//! `weft-agent cni install` put there. First the CNI configuration and plugin (so the runtime
//! stops calling weft), then the datapath ([`teardown`]: veths; the tunnel device; the cloud modes' rules, tables
//! and ENI addresses; tc filters, pins), then the
//! agent's files: the socket, the DEL queue, the endpoint records, the router addresses, the
//! IPAM mode, and the state directory when nothing else is in it.
//!
//! Refuses while an agent answers on the socket: it would recreate what is removed. Removes
//! only what weft names ([`CONFLIST_NAME`], [`PLUGIN`], [`RECORDS_DIR`], ...), never another
//! file of those directories; a second run finds nothing and succeeds. A step that fails stops
//! no other: every step runs, and the [`Report`] says of each what it removed, that there was
//! nothing to remove, or how it failed (after what it removed before failing).

use std::{
    fmt, fs, io,
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
};

use crate::{
    cni::install::{CONFLIST_NAME, PLUGIN},
    daemon::{
        MODE_FILE, POOL_IDS_FILE, RECORDS_DIR, ROUTER_FILE,
        cloud::{self, CloudCleanupError, devices::DEVICES_FILE},
    },
    datapath::teardown::{self, Removed, TeardownError},
    error::chain,
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
    /// A part of the datapath could not be taken off the node.
    #[error("removing the datapath's {part}")]
    Datapath {
        /// Which part: veths, tc filters, pins.
        part: &'static str,
        /// What failed.
        #[source]
        source: TeardownError,
    },
    /// The cloud modes' rules, tables or ENI addresses could not be removed.
    #[error("removing the pods' source routing and the ENI addresses")]
    Cloud(#[source] Box<CloudCleanupError>),
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

/// How one step of `cleanup` went.
#[derive(Debug)]
pub enum Outcome {
    /// It removed these things (at least one).
    Removed(Vec<Removed>),
    /// None of what it removes was there.
    NothingToRemove,
    /// It failed: `removed` went before the error.
    Failed {
        /// What it removed before failing.
        removed: Vec<Removed>,
        /// Why it stopped.
        error: CleanupError,
    },
    /// The state directory stays: it holds files weft did not write.
    Kept,
}

/// One step of `cleanup` and how it went.
#[derive(Debug)]
pub struct Step {
    /// What the step removes (`CNI configuration /etc/cni/net.d/05-weft.conflist`, `veths`).
    pub what: String,
    /// How it went.
    pub outcome: Outcome,
}

/// What `cleanup` did, step by step, in order.
#[derive(Debug, Default)]
pub struct Report {
    /// Every step, each tried whatever the others did.
    pub steps: Vec<Step>,
}

impl Report {
    /// Everything removed, in order.
    pub fn removed(&self) -> impl Iterator<Item = &Removed> {
        self.steps.iter().flat_map(|step| match &step.outcome {
            Outcome::Removed(removed) | Outcome::Failed { removed, .. } => removed.as_slice(),
            Outcome::NothingToRemove | Outcome::Kept => &[],
        })
    }

    /// The steps that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Step> {
        self.steps
            .iter()
            .filter(|step| matches!(step.outcome, Outcome::Failed { .. }))
    }

    fn push(&mut self, what: String, removed: Vec<Removed>, result: Result<(), CleanupError>) {
        let outcome = match result {
            Err(error) => Outcome::Failed { removed, error },
            Ok(()) if removed.is_empty() => Outcome::NothingToRemove,
            Ok(()) => Outcome::Removed(removed),
        };
        self.steps.push(Step { what, outcome });
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for step in &self.steps {
            match &step.outcome {
                Outcome::Removed(removed) => {
                    for removed in removed {
                        writeln!(f, "{removed}")?;
                    }
                }
                Outcome::NothingToRemove => writeln!(f, "nothing to remove: {}", step.what)?,
                Outcome::Failed { removed, error } => {
                    for removed in removed {
                        writeln!(f, "{removed}")?;
                    }
                    writeln!(f, "failed: {}: {}", step.what, chain(error))?;
                }
                Outcome::Kept => {
                    writeln!(f, "kept {}: it holds files weft did not write", step.what)?;
                }
            }
        }
        if self.removed().next().is_none() && self.failed().next().is_none() {
            writeln!(f, "nothing of weft on this node: nothing to do")?;
        }
        Ok(())
    }
}

/// Remove weft from this node (see the module docs): every step is tried, whatever the ones
/// before it did; the report says how each went.
///
/// # Errors
/// An agent is running (then nothing is removed). A step that fails is in the report
/// ([`Report::failed`]), not an error.
pub async fn cleanup(options: &Options) -> Result<Report, CleanupError> {
    if UnixStream::connect(&options.socket).is_ok() {
        return Err(CleanupError::AgentRunning {
            socket: options.socket.clone(),
        });
    }
    let mut report = Report::default();
    for (path, what) in [
        (options.conf_dir.join(CONFLIST_NAME), "CNI configuration"),
        (options.bin_dir.join(PLUGIN), "CNI plugin"),
    ] {
        file_step(&mut report, &path, what);
    }
    let datapath = |part| move |source| CleanupError::Datapath { part, source };
    let mut removed = Vec::new();
    let result = teardown::remove_veths(&mut removed)
        .await
        .map_err(datapath("veths"));
    report.push("weft's veths".to_owned(), removed, result);
    let mut removed = Vec::new();
    let result = teardown::remove_tunnel(&mut removed)
        .await
        .map_err(datapath("tunnel device"));
    report.push("weft's tunnel device".to_owned(), removed, result);
    let mut removed = Vec::new();
    let result = cloud::remove_all(&options.state_dir, &mut removed)
        .await
        .map_err(|e| CleanupError::Cloud(Box::new(e)));
    report.push(
        "weft's ip rules, tables and ENI addresses".to_owned(),
        removed,
        result,
    );
    let mut removed = Vec::new();
    let result = teardown::remove_tc(&mut removed)
        .await
        .map_err(datapath("tc filters"));
    report.push(
        "weft's tc filters and clsact qdiscs".to_owned(),
        removed,
        result,
    );
    let mut removed = Vec::new();
    let result = teardown::remove_pin_dir(&options.pin_dir, &mut removed).map_err(datapath("pins"));
    report.push(
        format!("pins {}", options.pin_dir.display()),
        removed,
        result,
    );
    let state = &options.state_dir;
    for (path, what) in [
        (options.socket.clone(), "socket"),
        (options.delete_queue.clone(), "DEL queue"),
        (state.join(RECORDS_DIR), "endpoint records"),
        (state.join(ROUTER_FILE), "router addresses"),
        (state.join(POOL_IDS_FILE), "pool ids"),
        (state.join(MODE_FILE), "IPAM mode record"),
        (state.join(DEVICES_FILE), "ENI device record"),
    ] {
        file_step(&mut report, &path, what);
    }
    let what = format!("state directory {}", state.display());
    match fs::remove_dir(state) {
        Ok(()) => report.push(
            what,
            vec![Removed {
                what: "state directory",
                name: state.display().to_string(),
            }],
            Ok(()),
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => report.push(what, Vec::new(), Ok(())),
        Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => report.steps.push(Step {
            what: state.display().to_string(),
            outcome: Outcome::Kept,
        }),
        Err(source) => report.push(
            what,
            Vec::new(),
            Err(CleanupError::Remove {
                path: state.clone(),
                source,
            }),
        ),
    }
    Ok(report)
}

/// The step that removes the file or directory tree at `path` (`what` it is).
fn file_step(report: &mut Report, path: &Path, what: &'static str) {
    let mut removed = Vec::new();
    let result = remove(path, what, &mut removed);
    report.push(format!("{what} {}", path.display()), removed, result);
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

#[cfg(test)]
mod tests {
    use std::io;

    use super::{CleanupError, Outcome, Removed, Report, Step};

    fn step(what: &str, outcome: Outcome) -> Step {
        Step {
            what: what.to_owned(),
            outcome,
        }
    }

    #[test]
    fn each_step_says_how_it_went_a_failure_with_its_error() {
        let report = Report {
            steps: vec![
                step(
                    "CNI configuration /c/05-weft.conflist",
                    Outcome::Failed {
                        removed: Vec::new(),
                        error: CleanupError::Remove {
                            path: "/c/05-weft.conflist".into(),
                            source: io::Error::from(io::ErrorKind::ReadOnlyFilesystem),
                        },
                    },
                ),
                step(
                    "pins /p",
                    Outcome::Removed(vec![Removed {
                        what: "pin",
                        name: "/p/weft_eps_v1".to_owned(),
                    }]),
                ),
                step("socket /s", Outcome::NothingToRemove),
                step("/state", Outcome::Kept),
            ],
        };
        assert_eq!(
            report.to_string(),
            "failed: CNI configuration /c/05-weft.conflist: cannot remove /c/05-weft.conflist: run \
             as root, with the host's directory mounted read-write: read-only filesystem or \
             storage medium\n\
             removed pin: /p/weft_eps_v1\n\
             nothing to remove: socket /s\n\
             kept /state: it holds files weft did not write\n"
        );
        assert_eq!(report.failed().count(), 1);
        assert_eq!(report.removed().count(), 1);
    }

    #[test]
    fn nothing_removed_and_nothing_failed_is_nothing_to_do() {
        let report = Report {
            steps: vec![step("socket /s", Outcome::NothingToRemove)],
        };
        assert_eq!(
            report.to_string(),
            "nothing to remove: socket /s\nnothing of weft on this node: nothing to do\n"
        );
        assert_eq!(report.failed().count(), 0);
    }
}

//! The program side of an emulator (`kube-emulator`, `arm-emulator`, …): signal handlers
//! installed before anything is printed, files a client reads (kubeconfig, port) written
//! whole before the first line of stdout announces the server, then serving until SIGTERM or
//! SIGINT, when the program stops its emulator and exits 0. Which flags and files a program
//! has is its own.

use std::{future::Future, io::Write as _, path::Path};

use anyhow::Context as _;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Run `main` on a current-thread tokio runtime (an emulator program's `main`).
///
/// # Errors
/// The runtime cannot be built, or `main` fails.
pub fn run<F: Future<Output = anyhow::Result<()>>>(main: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the tokio runtime")?
        .block_on(main)
}

/// A program's stop signals, caught from the moment it is made.
#[derive(Debug)]
pub struct Program {
    name: &'static str,
    terminate: Signal,
    interrupt: Signal,
}

impl Program {
    /// Catch SIGTERM and SIGINT now: one sent as soon as the first line is read must be
    /// caught. Call inside the runtime, before starting the emulator.
    ///
    /// # Errors
    /// A handler cannot be installed.
    pub fn new(name: &'static str) -> anyhow::Result<Self> {
        Ok(Self {
            name,
            terminate: signal(SignalKind::terminate()).context("handling SIGTERM")?,
            interrupt: signal(SignalKind::interrupt()).context("handling SIGINT")?,
        })
    }

    /// Print `line` as a line of stdout and flush it (the first one announces the server).
    ///
    /// # Errors
    /// Stdout cannot be written.
    pub fn announce(&self, line: &str) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .context("writing the first line to stdout")
    }

    /// Serve until SIGTERM or SIGINT, then log which and drop `emulator` (a graceful stop).
    pub async fn serve_until_stopped<E>(mut self, emulator: E) {
        let received = tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        };
        eprintln!("{}: {received}: stopping", self.name);
        drop(emulator);
    }
}

/// Write `text` to `path` through a temporary file beside it, so a reader never sees half
/// (a kubeconfig, a port file).
///
/// # Errors
/// `path` names no file, or writing or renaming fails.
pub fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?
        .to_owned();
    name.push(".tmp");
    let temporary = path.with_file_name(name);
    std::fs::write(&temporary, text).with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("renaming {} to {}", temporary.display(), path.display()))
}

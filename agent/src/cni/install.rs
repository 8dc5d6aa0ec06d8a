//! `weft-agent cni install`: puts the plugin where a container runtime finds it: the `weft-cni`
//! binary into the CNI binary directory, then `05-weft.conflist` into the configuration
//! directory (in that order, so a runtime never reads a configuration whose plugin is missing).
//! Each file is replaced atomically (temporary file in the same directory, fsync, rename, fsync
//! of the directory), so a runtime executing or reading the old one never sees a partial file,
//! and only when its content or mode differs, so a restart on an up-to-date node writes
//! nothing. Owns exactly those two files; must not touch anything else in those directories.

use std::{
    fmt, fs,
    io::{self, Write as _},
    os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

use serde_json::{Value, json};

use super::proto::{DEFAULT_DELETE_QUEUE, DEFAULT_SOCKET};

/// File name of weft's network configuration list (sorts before most others: runtimes use
/// the first configuration in lexical order).
pub const CONFLIST_NAME: &str = "05-weft.conflist";
/// The plugin's binary name, which is also its `type` in the configuration.
pub const PLUGIN: &str = "weft-cni";
/// The network's name.
pub const NETWORK_NAME: &str = "weft";
/// `cniVersion` of the configuration: 1.0.0, because containerd 1.6's libcni rejects 1.1.0
/// results.
pub const CNI_VERSION: &str = "1.0.0";

/// Mode of the installed plugin binary.
const BIN_MODE: u32 = 0o755;
/// Mode of the installed configuration.
const CONF_MODE: u32 = 0o644;

/// Errors of `weft-agent cni install`; each names the path and the fix.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The running executable's path is unknown, so `weft-cni` beside it cannot be found.
    #[error(
        "cannot locate the running weft-agent executable to find weft-cni beside it: pass --bin-src"
    )]
    CurrentExe {
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The plugin binary to install cannot be read.
    #[error("cannot read the CNI plugin {}: the image must ship weft-cni beside weft-agent, or pass --bin-src", path.display())]
    Source {
        /// The binary.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A target directory does not exist and cannot be created.
    #[error("cannot create the directory {}: mount the host's CNI directory there read-write (hostPath) or pass --bin-dir/--conf-dir", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// An installed file exists but cannot be read to compare it with the new one.
    #[error("cannot read the installed {} to compare it: fix its permissions or remove it", path.display())]
    ReadTarget {
        /// The installed file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Writing the new file or renaming it into place failed.
    #[error("cannot write {}: its directory must be writable by root (a read-write hostPath mount) and the path must not be a directory", path.display())]
    Write {
        /// The file being installed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// What to install where.
#[derive(Clone, Debug)]
pub struct Options {
    /// The plugin binary (default: `weft-cni` beside the running executable).
    pub bin_src: Option<PathBuf>,
    /// The runtime's CNI binary directory.
    pub bin_dir: PathBuf,
    /// The runtime's CNI configuration directory.
    pub conf_dir: PathBuf,
}

/// Whether a file was replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The file was missing or differed and has been replaced.
    Written,
    /// The file already had this content and mode; nothing was written.
    Unchanged,
}

/// One installed file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// Where it is.
    pub path: PathBuf,
    /// Whether this run wrote it.
    pub change: Change,
}

/// What `install` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The plugin binary.
    pub plugin: Installed,
    /// The configuration list.
    pub conflist: Installed,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in [&self.plugin, &self.conflist] {
            let what = match file.change {
                Change::Written => "installed",
                Change::Unchanged => "unchanged",
            };
            writeln!(f, "{what}: {}", file.path.display())?;
        }
        Ok(())
    }
}

/// The network configuration list: one plugin, `weft-cni`, with the socket and DEL queue
/// paths spelt out (their defaults) so an operator sees where the plugin looks.
#[must_use]
pub fn conflist() -> Value {
    json!({
        "cniVersion": CNI_VERSION,
        "name": NETWORK_NAME,
        "plugins": [{
            "type": PLUGIN,
            "agent-socket": DEFAULT_SOCKET,
            "delete-queue-dir": DEFAULT_DELETE_QUEUE,
        }],
    })
}

/// [`conflist`] as the bytes written to disk (pretty JSON and a final newline).
#[must_use]
pub fn conflist_bytes() -> Vec<u8> {
    let mut text = serde_json::to_string_pretty(&conflist()).unwrap_or_default();
    text.push('\n');
    text.into_bytes()
}

/// `weft-cni` beside the running executable.
///
/// # Errors
/// The running executable's path cannot be read.
pub fn default_bin_src() -> Result<PathBuf, InstallError> {
    let exe = std::env::current_exe().map_err(|source| InstallError::CurrentExe { source })?;
    Ok(exe.with_file_name(PLUGIN))
}

/// Install the plugin binary, then the configuration list, each only if it differs.
///
/// # Errors
/// The source cannot be read, or a target directory or file cannot be created or written.
pub fn install(options: &Options) -> Result<Report, InstallError> {
    let src = match &options.bin_src {
        Some(path) => path.clone(),
        None => default_bin_src()?,
    };
    let binary = fs::read(&src).map_err(|source| InstallError::Source {
        path: src.clone(),
        source,
    })?;
    let plugin = put(&options.bin_dir.join(PLUGIN), &binary, BIN_MODE)?;
    let conflist = put(
        &options.conf_dir.join(CONFLIST_NAME),
        &conflist_bytes(),
        CONF_MODE,
    )?;
    Ok(Report { plugin, conflist })
}

/// Make `path` a regular file with `bytes` and `mode`, writing only if it is not one already.
fn put(path: &Path, bytes: &[u8], mode: u32) -> Result<Installed, InstallError> {
    let done = |change| {
        Ok(Installed {
            path: path.to_path_buf(),
            change,
        })
    };
    let read_error = |source| InstallError::ReadTarget {
        path: path.to_path_buf(),
        source,
    };
    match fs::symlink_metadata(path) {
        // A symlink or another mode is replaced by a regular file of our own.
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o7777 == mode => {
            if fs::read(path).map_err(read_error)? == bytes {
                return done(Change::Unchanged);
            }
        }
        Ok(_) => {}
        // Not there, or a file where a directory should be (creating the directory says so).
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) => {}
        Err(e) => return Err(read_error(e)),
    }
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir).map_err(|source| InstallError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    replace(path, dir, bytes, mode).map_err(|source| InstallError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    done(Change::Written)
}

/// Temporary file beside `path` with `mode` (whatever the umask), fsync, rename over `path`,
/// fsync of `dir`. Renaming works while a runtime executes the old binary ("text file busy"
/// only applies to writing into it). On failure the temporary file is removed.
fn replace(path: &Path, dir: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.weft-tmp"));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashMap,
        sync::atomic::{AtomicU32, Ordering},
    };

    use super::*;
    use crate::cni::{
        client,
        types::{NetConf, SUPPORTED_VERSIONS, code},
    };

    /// The configuration of plugin `index` as libcni hands it to the plugin on stdin: the
    /// list's `cniVersion` and `name` merged into the plugin's own object.
    fn plugin_stdin(list: &Value, index: usize) -> Vec<u8> {
        let mut plugin = list["plugins"][index].clone();
        plugin["cniVersion"] = list["cniVersion"].clone();
        plugin["name"] = list["name"].clone();
        serde_json::to_vec(&plugin).expect("json")
    }

    #[test]
    fn conflist_is_one_weft_cni_plugin_that_weft_cni_accepts() {
        let list: Value = serde_json::from_slice(&conflist_bytes()).expect("conflist is JSON");
        assert_eq!(list["cniVersion"], "1.0.0");
        assert_eq!(list["name"], "weft");
        assert_eq!(list["plugins"].as_array().map(Vec::len), Some(1));

        let stdin = plugin_stdin(&list, 0);
        let conf: NetConf = serde_json::from_slice(&stdin).expect("weft-cni's NetConf parses it");
        assert_eq!(conf.plugin_type, PLUGIN);
        assert!(SUPPORTED_VERSIONS.contains(&conf.cni_version.as_str()));
        assert_eq!(conf.agent_socket.as_deref(), Some(DEFAULT_SOCKET));
        assert_eq!(conf.delete_queue_dir.as_deref(), Some(DEFAULT_DELETE_QUEUE));

        // The plugin's own logic: the configuration decodes and its version is accepted, so
        // an ADD without CNI_CONTAINERID fails on the environment (4), not on decoding (6) or
        // the version (1), and before any attempt to reach the agent.
        let env = HashMap::from([("CNI_COMMAND".to_owned(), "ADD".to_owned())]);
        let outcome = client::run(&env, &stdin);
        let error: Value = serde_json::from_str(&outcome.stdout).expect("CNI error JSON");
        assert_eq!(error["code"], code::INVALID_ENV, "{error}");
        assert_eq!(error["cniVersion"], CNI_VERSION);
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "weft-install-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            fs::create_dir_all(&dir).expect("create temp dir");
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn options(tmp: &TempDir) -> Options {
        let src = tmp.0.join("src-weft-cni");
        fs::write(&src, b"#!/bin/sh\necho plugin\n").expect("write source");
        Options {
            bin_src: Some(src),
            bin_dir: tmp.0.join("opt/cni/bin"),
            conf_dir: tmp.0.join("etc/cni/net.d"),
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).expect("stat").permissions().mode() & 0o7777
    }

    #[test]
    fn installs_once_then_only_what_changed() {
        let tmp = TempDir::new();
        let opts = options(&tmp);
        let first = install(&opts).expect("first install");
        assert_eq!(first.plugin.change, Change::Written);
        assert_eq!(first.conflist.change, Change::Written);
        assert_eq!(first.plugin.path, opts.bin_dir.join("weft-cni"));
        assert_eq!(first.conflist.path, opts.conf_dir.join("05-weft.conflist"));
        assert_eq!(mode(&first.plugin.path), 0o755);
        assert_eq!(mode(&first.conflist.path), 0o644);
        assert_eq!(
            fs::read(&first.conflist.path).expect("read"),
            conflist_bytes()
        );

        let again = install(&opts).expect("second install");
        assert_eq!(again.plugin.change, Change::Unchanged);
        assert_eq!(again.conflist.change, Change::Unchanged);

        // A stale configuration, a plugin with the wrong mode: each is replaced on its own.
        fs::write(&first.conflist.path, b"{}").expect("tamper");
        fs::set_permissions(&first.plugin.path, fs::Permissions::from_mode(0o700)).expect("chmod");
        let repaired = install(&opts).expect("third install");
        assert_eq!(repaired.plugin.change, Change::Written);
        assert_eq!(repaired.conflist.change, Change::Written);
        assert_eq!(mode(&repaired.plugin.path), 0o755);
        let leftovers: Vec<_> = fs::read_dir(&opts.bin_dir)
            .expect("list")
            .chain(fs::read_dir(&opts.conf_dir).expect("list"))
            .map(|e| e.expect("entry").file_name())
            .filter(|n| n.to_string_lossy().ends_with(".weft-tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_symlinked_plugin_is_replaced_not_written_through() {
        let tmp = TempDir::new();
        let opts = options(&tmp);
        let elsewhere = tmp.0.join("elsewhere");
        fs::write(&elsewhere, b"other").expect("write");
        fs::create_dir_all(&opts.bin_dir).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, opts.bin_dir.join(PLUGIN)).expect("symlink");
        install(&opts).expect("install");
        assert_eq!(fs::read(&elsewhere).expect("read"), b"other");
        let meta = fs::symlink_metadata(opts.bin_dir.join(PLUGIN)).expect("stat");
        assert!(meta.is_file());
    }

    #[test]
    fn errors_name_the_path_and_the_fix() {
        let tmp = TempDir::new();
        let mut opts = options(&tmp);
        opts.bin_src = Some(tmp.0.join("missing"));
        let e = install(&opts).expect_err("no source").to_string();
        assert!(e.contains("missing") && e.contains("--bin-src"), "{e}");

        // A file where the configuration directory should be.
        let mut opts = options(&tmp);
        let blocker = tmp.0.join("blocker");
        fs::write(&blocker, b"").expect("write");
        opts.conf_dir = blocker.join("net.d");
        let e = install(&opts)
            .expect_err("conf dir under a file")
            .to_string();
        assert!(e.contains("blocker/net.d") && e.contains("hostPath"), "{e}");
    }
}

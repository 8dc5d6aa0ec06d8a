//! The agent's unix socket for `weft-cni`: root-only permissions, one JSON request line and one
//! JSON response line per connection. What a request does is the handler's business (the
//! daemon); this module only speaks the protocol, and treats the socket as a trust boundary:
//! a request line is bounded in size and time, and the identifiers the daemon turns into file
//! and interface names are checked against the CNI spec before the handler sees them.

use std::{
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream},
};
use tracing::{debug, warn};

use super::{
    proto::{Request, Response},
    types::{CniError, allowed_netns_path, code, netns_refused, valid_container_id, valid_ifname},
};

/// Longest request line the agent reads (a GC request lists every attachment of the node,
/// a few hundred bytes each).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// How long a client may take to send its request line.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Executes plugin requests.
pub trait Handler: Send + Sync + 'static {
    /// Answer one request.
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send;
}

/// Why the socket could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding or securing the socket failed.
    #[error(
        "cannot serve the CNI socket {path}: check that its directory exists and is writable by root"
    )]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
}

/// Bind `path` (replacing a stale socket), restrict it to root, and return the listener.
///
/// # Errors
/// The directory cannot be created or the socket cannot be bound.
pub fn bind(path: &Path) -> Result<UnixListener, ServerError> {
    let err = |source| ServerError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    Ok(listener)
}

/// The socket file [`bind`] made: removed when this is dropped (the agent's shutdown), so a
/// stopped agent leaves no socket behind; left alone if something else has replaced it since.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    identity: Option<FileIdentity>,
}

/// Device, inode and change time: an inode number alone may be reused by a new file.
type FileIdentity = (u64, u64, i64, i64);

impl SocketFile {
    /// The socket file at `path`, as [`bind`] just made it.
    #[must_use]
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            identity: identity(path),
        }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.identity.is_none() || identity(&self.path) != self.identity {
            return;
        }
        if let Err(error) = std::fs::remove_file(&self.path) {
            warn!(%error, path = %self.path.display(), "removing the CNI socket");
        }
    }
}

fn identity(path: &Path) -> Option<FileIdentity> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

/// Accept connections forever, each answered on its own task.
pub async fn serve<H: Handler>(listener: UnixListener, handler: Arc<H>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let handler = Arc::clone(&handler);
                tokio::spawn(async move {
                    if let Err(error) = answer(stream, handler.as_ref()).await {
                        warn!(%error, "CNI connection");
                    }
                });
            }
            Err(error) => warn!(%error, "accepting a CNI connection"),
        }
    }
}

async fn answer<H: Handler>(stream: UnixStream, handler: &H) -> std::io::Result<()> {
    // The socket file is 0600, but it exists with the umask's mode for a moment after bind
    // and may sit in a directory others can reach: only the agent's own user is served.
    let peer = stream.peer_cred()?;
    let own = nix::unistd::geteuid().as_raw();
    let refused = (peer.uid() != own).then(|| {
        warn!(uid = peer.uid(), pid = ?peer.pid(), "refused a CNI connection from another user");
        CniError::new(
            "",
            code::INVALID_ENV,
            "the agent only serves its own user",
            format!(
                "connecting uid {} is not {own}; run the CNI plugin as root",
                peer.uid()
            ),
        )
    });
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    // A refused peer's request is still read (bounded as any other) so that it gets the
    // answer instead of a reset connection.
    let decoded = tokio::time::timeout(REQUEST_TIMEOUT, read_request(&mut reader))
        .await
        .unwrap_or_else(|_| {
            Err(CniError::new(
                "",
                code::IO_FAILURE,
                "the plugin's request did not arrive in time",
                format!("no complete request line within {REQUEST_TIMEOUT:?}"),
            ))
        });
    let response = match refused.map_or(decoded, Err) {
        Ok(request) => {
            debug!(?request, "CNI request");
            handler.handle(request).await
        }
        Err(error) => Response::Error(error),
    };
    let mut out = serde_json::to_string(&response).map_err(std::io::Error::other)?;
    out.push('\n');
    write.write_all(out.as_bytes()).await?;
    write.shutdown().await
}

/// Read one request line (up to `\n` or the end of the stream, at most
/// [`MAX_REQUEST_BYTES`]) and decode it with [`decode_request`].
///
/// # Errors
/// The CNI error to answer with: the read failed, the line is too long, or it does not decode.
pub async fn read_request<R: AsyncBufRead + Unpin>(reader: R) -> Result<Request, CniError> {
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_REQUEST_BYTES).unwrap_or(u64::MAX) + 1;
    reader
        .take(limit)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| {
            CniError::new(
                "",
                code::IO_FAILURE,
                "cannot read the plugin's request",
                e.to_string(),
            )
        })?;
    if line.len() > MAX_REQUEST_BYTES {
        return Err(CniError::new(
            "",
            code::DECODE_FAILURE,
            "the plugin's request is too long",
            format!("a request line has at most {MAX_REQUEST_BYTES} bytes"),
        ));
    }
    decode_request(&line)
}

/// Decode one request line and check what the daemon will build names from: the container id
/// and interface name of ADD, DEL and CHECK must follow the CNI spec's rules (they become
/// endpoint record file names and host interface names).
///
/// # Errors
/// The CNI error to answer with (code 6 for undecodable JSON, 4 for a bad identifier).
pub fn decode_request(line: &[u8]) -> Result<Request, CniError> {
    let request = serde_json::from_slice::<Request>(line).map_err(|e| {
        CniError::new(
            "",
            code::DECODE_FAILURE,
            "the agent could not decode the plugin's request",
            format!("{e}; are weft-cni and weft-agent the same version?"),
        )
    })?;
    if let Request::Add(pod) | Request::Del(pod) | Request::Check(pod) = &request {
        if !valid_container_id(&pod.container_id) {
            return Err(CniError::new(
                &pod.cni_version,
                code::INVALID_ENV,
                "invalid container id",
                format!(
                    "got {:?}; it must start with a letter or digit and contain only letters, digits, '_', '.' and '-'",
                    pod.container_id
                ),
            ));
        }
        let checks_netns = matches!(request, Request::Add(_) | Request::Check(_));
        if checks_netns && !allowed_netns_path(&pod.netns.to_string_lossy()) {
            return Err(netns_refused(
                &pod.cni_version,
                &pod.netns.to_string_lossy(),
            ));
        }
        if !valid_ifname(&pod.ifname) {
            return Err(CniError::new(
                &pod.cni_version,
                code::INVALID_ENV,
                "invalid interface name",
                format!(
                    "got {:?}; an interface name has 1 to 15 characters and no '/', ':' or spaces",
                    pod.ifname
                ),
            ));
        }
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<T>(f: impl Future<Output = T>) -> T {
        futures::executor::block_on(f)
    }

    #[test]
    fn the_socket_file_goes_with_its_guard_unless_replaced() {
        let dir = std::env::temp_dir().join(format!("weft-sock-{}", std::process::id()));
        let path = dir.join("weft.sock");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let listener = bind(&path).expect("bind");
            drop(SocketFile::new(&path));
            assert!(!path.exists(), "the socket file stays after its guard");
            drop(listener);
            let _first = bind(&path).expect("bind");
            let guard = SocketFile::new(&path);
            let _second = bind(&path).expect("bind again: another agent's socket");
            drop(guard);
            assert!(path.exists(), "the guard removed a socket it did not make");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn identifiers_that_would_escape_the_state_dir_are_refused() {
        for (field, value) in [
            ("container_id", "../../etc/x"),
            ("container_id", ""),
            ("ifname", "a/b"),
            ("ifname", "sixteen-chars-xx"),
            ("netns", "/etc/passwd"),
            ("netns", "/var/run/netns/../../etc/passwd"),
            ("netns", "/proc/self/ns/net"),
        ] {
            let mut doc = serde_json::json!({
                "command": "add", "cni_version": "1.0.0", "container_id": "c1", "ifname": "eth0",
                "netns": "/var/run/netns/x", "pod_namespace": "", "pod_name": "", "mtu": null
            });
            doc[field] = value.into();
            let line = serde_json::to_vec(&doc).expect("json");
            let error = decode_request(&line).expect_err(value);
            assert_eq!(error.code, code::INVALID_ENV, "{value}");
            assert!(error.details.contains(&format!("{value:?}")), "{error}");
        }
    }

    #[test]
    fn framing_is_bounded_and_reads_one_line() {
        let ok = b"{\"command\":\"status\",\"cni_version\":\"1.1.0\"}\ntrailing junk";
        assert_eq!(
            block_on(read_request(&ok[..])).expect("decodes"),
            Request::Status {
                cni_version: "1.1.0".into()
            }
        );
        let long = vec![b' '; MAX_REQUEST_BYTES + 10];
        let error = block_on(read_request(&long[..])).expect_err("too long");
        assert_eq!(error.msg, "the plugin's request is too long");
        let error = block_on(read_request(&b"\xff\xfe\n"[..])).expect_err("not UTF-8");
        assert_eq!(error.code, code::DECODE_FAILURE);
    }
}

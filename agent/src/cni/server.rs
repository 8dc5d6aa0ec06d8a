//! The agent's unix socket for `weft-cni`: root-only permissions, one JSON request line and one
//! JSON response line per connection. What a request does is the handler's business (the
//! daemon); this module only speaks the protocol.

use std::{
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream},
};
use tracing::{debug, warn};

use super::{
    proto::{Request, Response},
    types::{CniError, code},
};

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
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let response = match serde_json::from_str::<Request>(&line) {
        Ok(request) => {
            debug!(?request, "CNI request");
            handler.handle(request).await
        }
        Err(e) => Response::Error(CniError::new(
            "",
            code::DECODE_FAILURE,
            "the agent could not decode the plugin's request",
            format!("{e}; are weft-cni and weft-agent the same version?"),
        )),
    };
    let mut out = serde_json::to_string(&response).map_err(std::io::Error::other)?;
    out.push('\n');
    write.write_all(out.as_bytes()).await?;
    write.shutdown().await
}

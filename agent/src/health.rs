//! `/healthz` and `/readyz` for the kubelet's probes (`--health-addr`, default
//! `127.0.0.1:9879`, Cilium's agent health port). Live as soon as the process serves; ready
//! once start-up finished (datapath loaded, store synced, endpoints restored, CNI socket up).
//! A deliberately small HTTP/1.1 responder: one GET per connection, no body read.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};
use tracing::warn;

/// Cilium's agent health address.
pub const DEFAULT_HEALTH_ADDR: &str = "127.0.0.1:9879";

/// Whether the agent is ready; shared with the server.
#[derive(Debug, Default, Clone)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Mark ready (or not).
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// Is the agent ready?
    #[must_use]
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Bind `addr` and serve the probes on the current runtime.
///
/// # Errors
/// The address cannot be bound (in use, or not local).
pub async fn serve(addr: SocketAddr, ready: Readiness) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(answer(stream, ready.clone()));
                }
                Err(error) => warn!(%error, "health endpoint accept"),
            }
        }
    });
    Ok(local)
}

async fn answer(mut stream: TcpStream, ready: Readiness) {
    let mut buf = [0u8; 1024];
    let mut len = 0;
    // Read until the end of the request line (probes send tiny requests).
    while len < buf.len() {
        match stream.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
        if buf[..len].contains(&b'\n') {
            break;
        }
    }
    let line = String::from_utf8_lossy(&buf[..len]);
    let path = line.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = match path {
        "/healthz" => ("200 OK", "ok\n"),
        "/readyz" if ready.get() => ("200 OK", "ok\n"),
        "/readyz" => ("503 Service Unavailable", "starting\n"),
        _ => ("404 Not Found", "not found: try /healthz or /readyz\n"),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

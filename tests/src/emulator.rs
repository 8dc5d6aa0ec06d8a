//! The scaffold every API emulator shares (Kubernetes, ARM/IMDS, and the next one): bind the
//! listen address, serve HTTP/1.1 connections with the emulator's handler from a thread and
//! tokio runtime of its own, name the URL a client uses (loopback when it listens on every
//! address, for either family), and stop gracefully on drop, cutting every connection. The
//! program side (signals, the first line of stdout, kubeconfig and port files) is
//! [`program`]. What a request means is each emulator's own; nothing here routes or answers.

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    thread::JoinHandle,
};

use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

pub mod program;

/// Why an emulator's server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listen address could not be bound (in use, not local, not permitted).
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The bound socket could not be set up for the server (address, non-blocking mode).
    #[error("cannot set up the socket bound to {addr}")]
    Socket {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The server's tokio runtime could not be built.
    #[error("cannot build the server's tokio runtime")]
    Runtime {
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The server's thread could not be spawned.
    #[error("cannot spawn the server's thread")]
    Thread {
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// `http://<address>:<port>` for a server bound to `addr`: loopback of the same family when it
/// listens on every address (`0.0.0.0` → `127.0.0.1`, `::` → `::1`).
#[must_use]
pub fn url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// A bound listen socket, not served yet (its address is known before the state is built).
#[derive(Debug)]
pub struct Bound {
    listener: std::net::TcpListener,
    addr: SocketAddr,
}

/// Bind `listen` (port 0 picks a free port).
///
/// # Errors
/// [`StartError::Bind`] or [`StartError::Socket`].
pub fn bind(listen: SocketAddr) -> Result<Bound, StartError> {
    let listener = std::net::TcpListener::bind(listen).map_err(|source| StartError::Bind {
        addr: listen,
        source,
    })?;
    let socket = |source| StartError::Socket {
        addr: listen,
        source,
    };
    let addr = listener.local_addr().map_err(socket)?;
    listener.set_nonblocking(true).map_err(socket)?;
    Ok(Bound { listener, addr })
}

impl Bound {
    /// The address bound (a port 0 asked for is the port chosen).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve every connection with `handle` from a thread named `name` with a runtime of its
    /// own, until the [`Server`] is dropped.
    ///
    /// # Errors
    /// [`StartError::Runtime`] or [`StartError::Thread`].
    pub fn serve<H, F, B>(self, name: &str, handle: H) -> Result<Server, StartError>
    where
        H: Fn(Request<Incoming>) -> F + Clone + Send + 'static,
        F: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| StartError::Runtime { source })?;
        let (stop, stopped) = oneshot::channel();
        let Self { listener, addr } = self;
        let label = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .unwrap_or_else(|e| panic!("{label}: listener: {e}"));
                    accept(listener, handle, stopped).await;
                });
            })
            .map_err(|source| StartError::Thread { source })?;
        Ok(Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// The client's address, in every request's extensions (an IMDS answers for the instance
/// that asks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

/// Accept connections until `shutdown` fires; dropping the runtime then cuts them.
async fn accept<H, F, B>(
    listener: tokio::net::TcpListener,
    handle: H,
    mut shutdown: oneshot::Receiver<()>,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + 'static,
    F: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => continue,
            },
            _ = &mut shutdown => return,
        };
        let (stream, peer) = stream;
        let handle = handle.clone();
        let service = service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(Peer(peer));
            handle(req)
        });
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A running server; stops (and cuts every connection) on drop.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// The address it listens on (as bound).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL a client uses ([`url`]).
    #[must_use]
    pub fn url(&self) -> String {
        url(self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_names_loopback_of_the_family_for_every_address() {
        let v4: SocketAddr = "0.0.0.0:80".parse().expect("addr");
        let v6: SocketAddr = "[::]:80".parse().expect("addr");
        let own: SocketAddr = "192.0.2.1:8".parse().expect("addr");
        assert_eq!(url(v4), "http://127.0.0.1:80");
        assert_eq!(url(v6), "http://[::1]:80");
        assert_eq!(url(own), "http://192.0.2.1:8");
    }
}

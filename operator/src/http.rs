//! The operator's HTTP listeners (hyper, HTTP/1.1): `/healthz` on `--operator-api-serve-addr`
//! (200 `ok` while the API server can be used, 503 with the reason while it cannot — as
//! Cilium's operator checks its Kubernetes connection) and `/metrics` (text format 0.0.4) on
//! `--operator-prometheus-serve-addr` with `--enable-metrics`. Each scrape first sets the gauges
//! of state from the node manager's latest counts.

use std::{convert::Infallible, net::SocketAddr, sync::Arc};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::metrics::Metrics;

/// The Prometheus text format 0.0.4 (what Cilium's operator serves).
const TEXT_FORMAT: &str = weft_k8s::metrics_naming::CONTENT_TYPE;

/// A listener could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("listening on {addr} ({flag})")]
pub struct ListenError {
    /// The address.
    pub addr: SocketAddr,
    /// The flag that set it.
    pub flag: &'static str,
    /// What went wrong.
    #[source]
    pub source: std::io::Error,
}

/// Called before each scrape.
pub type Refresh = Arc<dyn Fn() + Send + Sync>;

/// Asked by each `/healthz`: why the operator is unhealthy, `None` when it is not.
pub type Health = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// What one listener serves.
#[expect(
    missing_debug_implementations,
    reason = "holds closures and a registry"
)]
pub enum Serves {
    /// `/healthz`.
    Health(Health),
    /// `/metrics` from the registry, refreshed before each scrape, under the names of
    /// `--metrics-naming`.
    Metrics(Registry, Box<Metrics>, Refresh),
}

/// What the listeners serve.
#[derive(Clone)]
enum Routes {
    Health(Health),
    Metrics(Arc<Registry>, Arc<Metrics>, Refresh),
}

/// Bind `addr` and serve `what` until the runtime stops; returns the bound address (port 0
/// picks one).
///
/// # Errors
/// [`ListenError`] when the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    flag: &'static str,
    what: Serves,
) -> Result<SocketAddr, ListenError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError { addr, flag, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    info!(addr = %bound, flag, "serving HTTP");
    let routes = match what {
        Serves::Health(health) => Routes::Health(health),
        Serves::Metrics(registry, names, refresh) => {
            Routes::Metrics(Arc::new(registry), Arc::from(names), refresh)
        }
    };
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let routes = routes.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let routes = routes.clone();
                    async move { Ok::<_, Infallible>(routes.answer(&req)) }
                });
                if let Err(error) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    debug!(%error, "HTTP connection ended");
                }
            });
        }
    });
    Ok(bound)
}

impl Routes {
    fn answer(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let reply = |status: StatusCode, content_type: &str, body: String| {
            Response::builder()
                .status(status)
                .header(header::CONTENT_TYPE, content_type)
                .body(Full::new(Bytes::from(body)))
                .unwrap_or_default()
        };
        if req.method() != Method::GET {
            return reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "GET only\n".into(),
            );
        }
        match (req.uri().path(), self) {
            ("/healthz", Self::Health(health)) => match health() {
                None => reply(StatusCode::OK, "text/plain", "ok\n".into()),
                Some(reason) => reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    format!("{reason}\n"),
                ),
            },
            ("/metrics", Self::Metrics(registry, names, refresh)) => {
                refresh();
                match names.encode(registry) {
                    Ok(body) => reply(StatusCode::OK, TEXT_FORMAT, body),
                    Err(e) => reply(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "text/plain",
                        format!("{e}\n"),
                    ),
                }
            }
            _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
        }
    }
}

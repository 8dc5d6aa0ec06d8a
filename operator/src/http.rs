//! The operator's HTTP listeners (hyper, HTTP/1.1): `/healthz` on `--operator-api-serve-addr`
//! (200 while the process serves; as Cilium's operator API) and `/metrics` (text format 0.0.4) on
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

/// What the listeners serve.
#[derive(Clone)]
struct Routes {
    metrics: Option<(Arc<Registry>, Metrics, Refresh)>,
}

/// Bind `addr` and serve `/healthz` (and `/metrics` when `metrics` is given) until the
/// runtime stops; returns the bound address (port 0 picks one).
///
/// # Errors
/// [`ListenError`] when the address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    flag: &'static str,
    metrics: Option<(Registry, Metrics, Refresh)>,
) -> Result<SocketAddr, ListenError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError { addr, flag, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    info!(addr = %bound, flag, "serving HTTP");
    let routes = Routes {
        metrics: metrics.map(|(registry, names, refresh)| (Arc::new(registry), names, refresh)),
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
        match (req.uri().path(), &self.metrics) {
            ("/healthz", _) => reply(StatusCode::OK, "text/plain", "ok\n".into()),
            ("/metrics", Some((registry, names, refresh))) => {
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

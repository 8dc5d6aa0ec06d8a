//! The agent's HTTP endpoint (hyper, HTTP/1.1): `/healthz` (200 while the process serves),
//! `/readyz` (200 once start-up finished: datapath loaded, store synced, endpoints restored,
//! CNI socket up) and `/metrics` (Prometheus text format 0.0.4). One router serves every
//! listener: `--health-addr` (default `127.0.0.1:9879`, Cilium's agent health port) and, when
//! given, `--prometheus-serve-addr`. Before each scrape the registered [`Refresh`] source (the
//! daemon) updates the gauges that are read at scrape time; scrapes are serialized, so two
//! concurrent scrapes never interleave a refresh.

use std::{
    convert::Infallible,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::{Metrics, MetricsError};

/// Cilium's agent health address.
pub const DEFAULT_HEALTH_ADDR: &str = "127.0.0.1:9879";

/// The Prometheus text format 0.0.4 (what Cilium's agent serves).
const TEXT_FORMAT: &str = weft_k8s::metrics_naming::CONTENT_TYPE;

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

/// Brings scrape-time metrics up to date (the daemon: IPAM usage, the datapath's pins, the
/// writer's counters).
pub trait Refresh: Send + Sync + 'static {
    /// Update the gauges; called before every scrape.
    fn refresh(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// What the listeners serve; cheap to clone.
#[derive(Clone)]
pub struct Endpoint {
    metrics: Arc<Metrics>,
    ready: Readiness,
    source: Arc<OnceLock<Arc<dyn Refresh>>>,
    scrape: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("ready", &self.ready)
            .field("source", &self.source.get().is_some())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Serve `metrics` and `ready`; no refresh source yet (start-up).
    #[must_use]
    pub fn new(metrics: Arc<Metrics>, ready: Readiness) -> Self {
        Self {
            metrics,
            ready,
            source: Arc::new(OnceLock::new()),
            scrape: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Refresh scrape-time metrics from `source` from now on (set once; later calls are
    /// ignored).
    pub fn set_source(&self, source: Arc<dyn Refresh>) {
        let _ = self.source.set(source);
    }

    /// Refresh (when a source is set) and encode every metric.
    ///
    /// # Errors
    /// Encoding failed (a bug in a label or metric).
    pub async fn scrape(&self) -> Result<String, MetricsError> {
        let _one_at_a_time = self.scrape.lock().await;
        if let Some(source) = self.source.get() {
            source.refresh().await;
        }
        self.metrics.encode()
    }

    /// Bind `addr` and serve on the current runtime; the bound address (port 0: any).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn serve(&self, addr: SocketAddr) -> Result<SocketAddr, MetricsError> {
        let bind = |source| MetricsError::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind)?;
        let local = listener.local_addr().map_err(bind)?;
        let endpoint = self.clone();
        tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        warn!(%error, "HTTP endpoint accept");
                        // Out of file descriptors and the like: do not spin.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let endpoint = endpoint.clone();
                tokio::spawn(async move {
                    let service = service_fn(|request| endpoint.clone().respond(request));
                    if let Err(error) = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(10))
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        debug!(%error, "HTTP endpoint connection");
                    }
                });
            }
        });
        Ok(local)
    }

    async fn respond(
        self,
        request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            return Ok(text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n"));
        }
        Ok(match request.uri().path() {
            "/healthz" => text(StatusCode::OK, "ok\n"),
            "/readyz" if self.ready.get() => text(StatusCode::OK, "ok\n"),
            "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "starting\n"),
            "/metrics" => match self.scrape().await {
                Ok(body) => reply(StatusCode::OK, TEXT_FORMAT, body),
                Err(error) => {
                    warn!(%error, "encoding metrics");
                    text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "encoding metrics failed\n",
                    )
                }
            },
            _ => text(
                StatusCode::NOT_FOUND,
                "not found: try /healthz, /readyz or /metrics\n",
            ),
        })
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    reply(status, "text/plain; charset=utf-8", body.to_owned())
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}

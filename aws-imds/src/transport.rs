//! The plain-HTTP exchange every weft cloud client shares (the cloud's API, its metadata
//! service, its token endpoints): build a request, send it over a hyper-util legacy client with
//! an optional timeout, and read the whole answer up to a limit. Generic over the connector, so
//! the operator's https client (rustls, in `weft-operator`) and this crate's plain one
//! ([`plain_client`], for IMDS, which is http only) share it; no TLS here. No retries, no cloud's
//! semantics and no logging of bodies or headers (they can carry tokens).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::{
    client::legacy::{
        Client,
        connect::{Connect, HttpConnector},
    },
    rt::TokioExecutor,
};

/// A client over the connector `C`, sending whole bodies.
pub type HttpClient<C> = Client<C, Full<Bytes>>;

/// The plain-HTTP client (no TLS): what IMDS is reached with.
pub type PlainClient = HttpClient<HttpConnector>;

/// A plain-HTTP client.
#[must_use]
pub fn plain_client() -> PlainClient {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// An HTTP exchange that did not produce a response.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The system's root certificates could not be read (building an https client: the
    /// operator's; nothing in this crate does TLS).
    #[error("loading the system's TLS root certificates failed")]
    NativeRoots {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The request could not be built (a bad URL or header).
    #[error("building the request {method} {url} failed")]
    Build {
        /// Method.
        method: Method,
        /// URL.
        url: String,
        /// Why.
        #[source]
        source: http::Error,
    },
    /// Connecting or sending failed.
    #[error("{method} {url} failed")]
    Send {
        /// Method.
        method: Method,
        /// URL.
        url: String,
        /// Why.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// Reading the response body failed.
    #[error("reading the response of {method} {url} failed")]
    Body {
        /// Method.
        method: Method,
        /// URL.
        url: String,
        /// Why.
        #[source]
        source: hyper::Error,
    },
    /// The response body is larger than allowed.
    #[error("the response of {method} {url} is larger than {limit} bytes")]
    TooLarge {
        /// Method.
        method: Method,
        /// URL.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// No complete response within the timeout.
    #[error("{method} {url} got no response within {after:?}")]
    TimedOut {
        /// Method.
        method: Method,
        /// URL.
        url: String,
        /// The timeout.
        after: Duration,
    },
}

impl TransportError {
    /// Whether sending again may succeed (connection and timeout failures).
    #[must_use]
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            Self::Send { .. } | Self::Body { .. } | Self::TimedOut { .. }
        )
    }
}

/// A response read whole.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
}

impl Response {
    /// A header's value as text, if present and valid.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Build a request.
///
/// # Errors
/// [`TransportError::Build`] for a bad URL or header value.
pub fn request(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Request<Full<Bytes>>, TransportError> {
    let mut builder = Request::builder().method(method.clone()).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder
        .body(Full::new(body))
        .map_err(|source| TransportError::Build {
            method,
            url: url.to_owned(),
            source,
        })
}

/// Send `req` and read the whole response, at most `limit` bytes, within `timeout`.
///
/// # Errors
/// [`TransportError`] when no complete response came back.
pub async fn send<C>(
    client: &HttpClient<C>,
    req: Request<Full<Bytes>>,
    timeout: Option<Duration>,
    limit: usize,
) -> Result<Response, TransportError>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let method = req.method().clone();
    let url = req.uri().to_string();
    let exchange = exchange(client, req, limit);
    match timeout {
        None => exchange.await,
        Some(after) => tokio::time::timeout(after, exchange)
            .await
            .map_err(|_| TransportError::TimedOut { method, url, after })?,
    }
}

async fn exchange<C>(
    client: &HttpClient<C>,
    req: Request<Full<Bytes>>,
    limit: usize,
) -> Result<Response, TransportError>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let method = req.method().clone();
    let url = req.uri().to_string();
    let resp = client
        .request(req)
        .await
        .map_err(|source| TransportError::Send {
            method: method.clone(),
            url: url.clone(),
            source,
        })?;
    let (parts, mut body) = resp.into_parts();
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|source| TransportError::Body {
            method: method.clone(),
            url: url.clone(),
            source,
        })?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(TransportError::TooLarge { method, url, limit });
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Response {
        status: parts.status,
        headers: parts.headers,
        body: buf.freeze(),
    })
}

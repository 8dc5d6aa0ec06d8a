//! Test-only: a tiny local HTTP server that answers a scripted sequence of requests and
//! records what it received. A request that is not the next expected one is answered 599 and
//! recorded as a failure; [`TestServer::finish`] panics on failures and on expected requests
//! that never came (including "no call at all").

use std::{
    collections::VecDeque,
    convert::Infallible,
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    /// `status` with a JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    /// `status` with a text body.
    pub fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }

    /// Add a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Method.
    pub method: Method,
    /// Path and query.
    pub uri: String,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
    /// When it arrived (tokio's clock, so paused-time tests see exact waits).
    pub at: tokio::time::Instant,
}

impl Seen {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

#[derive(Debug, Default)]
struct State {
    expected: VecDeque<(Method, String, Reply)>,
    seen: Vec<Seen>,
    failures: Vec<String>,
}

/// The server; it stops with the test's runtime.
#[derive(Debug)]
pub struct TestServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl TestServer {
    /// Listen on a free local port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| answer(state.clone(), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, state }
    }

    /// Expect `method path_and_query` next and answer it with `reply`.
    pub fn expect(&self, method: &str, path_and_query: &str, reply: Reply) {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        self.state
            .lock()
            .unwrap()
            .expected
            .push_back((method, path_and_query.to_owned(), reply));
    }

    /// Everything received; panics on an unexpected request or a missing one.
    pub fn finish(&self) -> Vec<Seen> {
        let state = self.state.lock().unwrap();
        assert!(
            state.failures.is_empty(),
            "unexpected requests: {:#?}",
            state.failures
        );
        assert!(
            state.expected.is_empty(),
            "expected requests that never came: {:#?}",
            state
                .expected
                .iter()
                .map(|(m, p, _)| format!("{m} {p}"))
                .collect::<Vec<_>>()
        );
        state.seen.clone()
    }
}

async fn answer(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let uri = parts
        .uri
        .path_and_query()
        .map(ToString::to_string)
        .unwrap_or_default();
    let mut state = state.lock().unwrap();
    state.seen.push(Seen {
        method: parts.method.clone(),
        uri: uri.clone(),
        headers: parts.headers.clone(),
        body,
        at: tokio::time::Instant::now(),
    });
    let reply = match state.expected.front() {
        Some((m, p, _)) if *m == parts.method && *p == uri => {
            state.expected.pop_front().map(|e| e.2)
        }
        next => {
            let next = next.map(|(m, p, _)| format!("{m} {p}"));
            state
                .failures
                .push(format!("{} {uri} (expected {next:?})", parts.method));
            None
        }
    };
    let reply = reply.unwrap_or_else(|| Reply::text(599, "unexpected request"));
    let mut resp = Response::builder().status(StatusCode::from_u16(reply.status).expect("status"));
    for (k, v) in &reply.headers {
        resp = resp.header(k, v);
    }
    Ok(resp
        .body(Full::new(Bytes::from(reply.body)))
        .expect("response"))
}

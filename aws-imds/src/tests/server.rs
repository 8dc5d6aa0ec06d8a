//! Test-only: a scripted local HTTP server standing in for IMDS. Each request must be the next
//! expected `method path`; it is answered with its scripted reply and recorded. Anything else
//! is answered 599 and recorded as a failure; [`TestServer::finish`] panics on failures and on
//! expected requests that never came (including "no call at all").

use std::{
    collections::VecDeque,
    convert::Infallible,
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    body: String,
}

impl Reply {
    /// `status` with a body.
    pub fn new(status: u16, body: &str) -> Self {
        Self {
            status,
            body: body.to_owned(),
        }
    }

    /// 200 with `body`.
    pub fn ok(body: &str) -> Self {
        Self::new(200, body)
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Path and query.
    pub uri: String,
    /// Headers.
    pub headers: HeaderMap,
}

impl Seen {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
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
                    let service = service_fn(move |req| {
                        std::future::ready(Ok::<_, Infallible>(answer(&state, &req)))
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, state }
    }

    /// Expect `method path` next and answer it with `reply`.
    pub fn expect(&self, method: &str, path: &str, reply: Reply) {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        self.state
            .lock()
            .unwrap()
            .expected
            .push_back((method, path.to_owned(), reply));
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

fn answer(state: &Mutex<State>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let uri = req
        .uri()
        .path_and_query()
        .map(ToString::to_string)
        .unwrap_or_default();
    let mut state = state.lock().unwrap();
    state.seen.push(Seen {
        uri: uri.clone(),
        headers: req.headers().clone(),
    });
    let reply = match state.expected.front() {
        Some((method, path, _)) if method == req.method() && *path == uri => {
            state.expected.pop_front().map(|e| e.2)
        }
        next => {
            let next = next.map(|(m, p, _)| format!("{m} {p}"));
            state
                .failures
                .push(format!("{} {uri} (expected {next:?})", req.method()));
            None
        }
    };
    let reply = reply.unwrap_or_else(|| Reply::new(599, "unexpected request"));
    Response::builder()
        .status(StatusCode::from_u16(reply.status).expect("status"))
        .body(Full::new(Bytes::from(reply.body)))
        .expect("response")
}

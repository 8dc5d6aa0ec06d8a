//! Test-only: a tiny local HTTP server for the EC2, STS, IMDS and container-credential
//! clients. It answers a scripted sequence of requests — an EC2/STS call is expected by its
//! `Action` (form body of `POST /`), anything else by method and path — and records what it
//! received. A request that is not the next expected one is answered 599 and recorded as a
//! failure; [`TestServer::finish`] panics on failures and on expected requests that never
//! came (including "no call at all").

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

    /// An AWS error document with `status`, `code` and `message`.
    pub fn aws_error(status: u16, code: &str, message: &str) -> Self {
        Self::new(
            status,
            &format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
                 <Message>{message}</Message></Error></Errors><RequestID>req-{code}</RequestID></Response>"
            ),
        )
    }
}

/// What a request must be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    /// `POST /` with `Action=<action>`.
    Action(String),
    /// `method path`.
    Path(Method, String),
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
    /// When it arrived (tokio's clock).
    pub at: tokio::time::Instant,
}

impl Seen {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A form parameter of the body.
    pub fn param(&self, key: &str) -> Option<String> {
        form_urlencoded::parse(&self.body)
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    }
}

#[derive(Debug, Default)]
struct State {
    expected: VecDeque<(Expect, Reply)>,
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

    fn push(&self, expect: Expect, reply: Reply) {
        self.state
            .lock()
            .unwrap()
            .expected
            .push_back((expect, reply));
    }

    /// Expect `POST /` with `Action=<action>` next and answer it with `reply`.
    pub fn expect_action(&self, action: &str, reply: Reply) {
        self.push(Expect::Action(action.to_owned()), reply);
    }

    /// Expect `method path` next and answer it with `reply`.
    pub fn expect(&self, method: &str, path: &str, reply: Reply) {
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        self.push(Expect::Path(method, path.to_owned()), reply);
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
            state.expected.iter().map(|(e, _)| e).collect::<Vec<_>>()
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
    let seen = Seen {
        method: parts.method.clone(),
        uri: uri.clone(),
        headers: parts.headers.clone(),
        body,
        at: tokio::time::Instant::now(),
    };
    let got = match (
        parts.method == Method::POST && uri == "/",
        seen.param("Action"),
    ) {
        (true, Some(action)) => Expect::Action(action),
        _ => Expect::Path(parts.method.clone(), uri),
    };
    let mut state = state.lock().unwrap();
    state.seen.push(seen);
    let reply = match state.expected.front() {
        Some((want, _)) if *want == got => state.expected.pop_front().map(|e| e.1),
        next => {
            let next = next.map(|(e, _)| e.clone());
            state.failures.push(format!("{got:?} (expected {next:?})"));
            None
        }
    };
    let reply = reply.unwrap_or_else(|| Reply::new(599, "unexpected request"));
    Ok(Response::builder()
        .status(StatusCode::from_u16(reply.status).expect("status"))
        .body(Full::new(Bytes::from(reply.body)))
        .expect("response"))
}

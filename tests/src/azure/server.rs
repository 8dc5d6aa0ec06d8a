//! The HTTP side: the handler the shared scaffold ([`crate::emulator`]) serves on one listener
//! for ARM, IMDS and AAD. Each request is routed, given its injected fault or latency, handed to IMDS/AAD (`identity.rs`)
//! or to the ARM handlers (`arm.rs`), and logged (and printed to stderr when asked).

use std::{
    collections::HashMap,
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Instant, SystemTime},
};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::{Request, Response, body::Incoming, header};
use serde_json::{Value, json};

use super::{
    arm,
    error::ArmError,
    faults::{FaultAnswer, Faults, LoggedRequest, RequestLog, lock},
    identity::{self, Identities},
    model::Model,
    roles::Assignments,
    route::{self, Route, form},
};

/// Largest request body read.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// State the server and the handle share.
#[derive(Debug)]
pub struct Shared {
    /// The estate.
    pub model: Mutex<Model>,
    /// Credentials and tokens.
    pub ids: Mutex<Identities>,
    /// RBAC.
    pub roles: Mutex<Assignments>,
    /// Injected faults.
    pub faults: Faults,
    /// What was asked.
    pub log: RequestLog,
    /// IMDS `azEnvironment`.
    pub environment: String,
    /// Print every request to stderr.
    pub log_stderr: bool,
    /// Where it listens (for URLs when a request has no `Host`).
    pub addr: SocketAddr,
}

/// An answer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Headers besides `Content-Type`.
    pub headers: Vec<(String, String)>,
    /// `Content-Type` (none for an empty body).
    pub content_type: Option<&'static str>,
    /// Body.
    pub body: Bytes,
}

impl Reply {
    /// A JSON answer.
    #[must_use]
    pub fn json(status: u16, value: &Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            content_type: Some("application/json; charset=utf-8"),
            body: Bytes::from(serde_json::to_vec(value).expect("JSON values serialize")),
        }
    }

    /// A `text/plain` answer.
    #[must_use]
    pub fn text(status: u16, text: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            content_type: Some("text/plain; charset=utf-8"),
            body: Bytes::from(text.to_owned()),
        }
    }

    /// An empty answer.
    #[must_use]
    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            content_type: None,
            body: Bytes::new(),
        }
    }

    /// An ARM error answer.
    #[must_use]
    pub fn error(e: &ArmError) -> Self {
        let mut r = Self::json(e.status, &e.body());
        r.headers.clone_from(&e.headers);
        r
    }

    /// With a header.
    #[must_use]
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }
}

/// A request as the handlers see it.
#[derive(Debug)]
pub struct Call {
    /// Method.
    pub method: String,
    /// Path as sent.
    pub path: String,
    /// Query string as sent.
    pub query_text: String,
    /// Decoded query.
    pub query: HashMap<String, String>,
    /// `Authorization`.
    pub authorization: Option<String>,
    /// `http://<Host>`.
    pub base: String,
    /// Body.
    pub body: Bytes,
}

/// What a handler reports for the log besides the answer.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The RBAC action.
    pub action: Option<String>,
    /// Linked actions checked.
    pub linked: Vec<(String, String)>,
    /// The caller.
    pub client_id: Option<String>,
}

/// Answer one request (the scaffold, [`crate::emulator`], serves the connections).
pub(super) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at = Instant::now();
    let time = SystemTime::now();
    let (parts, body) = req.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let host = header("host").unwrap_or_else(|| shared.addr.to_string());
    let metadata = header("metadata").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let query_text = parts.uri.query().unwrap_or("").to_owned();
    let mut call = Call {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: form(&query_text),
        query_text,
        authorization: header("authorization"),
        base: format!("http://{host}"),
        body: Bytes::new(),
    };
    let route = route::route(&call.method, &call.path);
    let operation = route.operation();
    let mut outcome = Outcome::default();
    let reply = match Limited::new(body, MAX_BODY).collect().await {
        Err(e) => Reply::error(&ArmError::invalid_body(&e.to_string())),
        Ok(collected) => {
            call.body = collected.to_bytes();
            let mut fault = shared.faults.take(operation, &call.method, &call.path);
            if let Some(FaultAnswer::Latency(d)) = fault {
                tokio::time::sleep(d).await;
                fault = None;
            }
            match fault {
                Some(answer) => Reply::error(&fault_error(&shared, &answer)),
                None => dispatch(&shared, &route, &call, metadata, &mut outcome),
            }
        }
    };
    let entry = LoggedRequest {
        method: call.method.clone(),
        path: call.path.clone(),
        query: call.query_text.clone(),
        status: reply.status,
        at,
        time,
        operation,
        action: outcome.action,
        linked: outcome.linked,
        client_id: outcome.client_id,
    };
    if shared.log_stderr {
        eprintln!(
            "arm-emulator: {} {}{}{} -> {} {}{}",
            entry.method,
            entry.path,
            if entry.query.is_empty() { "" } else { "?" },
            entry.query,
            entry.status,
            entry.operation,
            entry
                .action
                .as_deref()
                .map(|a| format!(" [{a}]"))
                .unwrap_or_default()
        );
    }
    shared.log.record(entry);
    Ok(to_response(reply))
}

fn fault_error(shared: &Shared, answer: &FaultAnswer) -> ArmError {
    match answer {
        FaultAnswer::Throttle { retry_after_secs } => {
            ArmError::throttled(&lock(&shared.model).subscription, *retry_after_secs)
        }
        FaultAnswer::Internal => ArmError::internal(),
        FaultAnswer::NotFound => ArmError::new(
            404,
            "ResourceNotFound",
            "The Resource was not found (injected by the emulator).",
        ),
        FaultAnswer::Error {
            status,
            code,
            message,
        } => ArmError::new(*status, code, message.clone()),
        FaultAnswer::Latency(_) => unreachable!("latency is served, not answered"),
    }
}

fn dispatch(
    shared: &Shared,
    route: &Route,
    call: &Call,
    metadata: bool,
    outcome: &mut Outcome,
) -> Reply {
    match route {
        Route::ImdsInstance(path) => {
            let compute = {
                let m = lock(&shared.model);
                json!({"azEnvironment": shared.environment, "subscriptionId": m.subscription,
                    "resourceGroupName": m.group, "location": m.location, "name": "weft-operator-host",
                    "osType": "Linux", "provider": "Microsoft.Compute",
                    "vmId": identity::derived_object_id(&m.group)})
            };
            identity::imds_instance(metadata, &call.query, path, &compute)
        }
        Route::ImdsToken => lock(&shared.ids).imds_token(metadata, &call.query),
        Route::AadToken(tenant) => {
            if call.method != "POST" {
                return Reply::error(&ArmError::method_not_allowed(&call.method));
            }
            let body = String::from_utf8_lossy(&call.body);
            lock(&shared.ids).aad_token(tenant, &body)
        }
        Route::Unknown => Reply::error(&ArmError::no_route(&call.path)),
        Route::Arm(op, target) => match arm::serve(shared, *op, target, call, outcome) {
            Ok(reply) => reply,
            Err(e) => Reply::error(&e),
        },
    }
}

fn to_response(reply: Reply) -> Response<Full<Bytes>> {
    let mut builder = Response::builder().status(reply.status);
    if let Some(ct) = reply.content_type {
        builder = builder.header(header::CONTENT_TYPE, ct);
    }
    builder = builder.header("x-ms-request-id", format!("{:016x}", fastrand::u64(..)));
    for (k, v) in &reply.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder
        .body(Full::new(reply.body))
        .expect("valid response parts")
}

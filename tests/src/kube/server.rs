//! The HTTP side: the request handler the shared scaffold ([`crate::emulator`]) serves, which checks the bearer token (letting requests
//! without credentials in when anonymous requests are allowed), applies injected latency and
//! faults, routes each request, answers discovery documents, hands resource requests to
//! `verbs.rs`, and counts every answer by (verb, resource, code). Errors go out as
//! `metav1.Status` objects.

use std::{collections::HashMap, convert::Infallible, sync::Arc};

use hyper::{Method, Request, Response, body::Incoming, header};
use serde_json::Value;

use super::{
    Shared,
    body::{self, Body},
    discovery,
    faults::{Answer, Verb},
    route::{self, Route, Target},
    status::ApiError,
    store::conflict,
    verbs,
    watch::Expired,
};

pub(super) fn json_response(code: u16, value: &Value, content_type: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::full(
            serde_json::to_vec(value).expect("JSON values serialize"),
        ))
        .expect("valid response parts")
}

fn error_response(error: &ApiError) -> Response<Body> {
    json_response(error.code(), &error.status(), "application/json")
}

/// Answer one request (the scaffold, [`crate::emulator`], serves the connections).
pub(super) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let latency = shared.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let (verb, label, result) = dispatch(&shared, req).await;
    let response = result.unwrap_or_else(|e| error_response(&e));
    let code = if response.extensions().get::<Expired>().is_some() {
        410
    } else {
        response.status().as_u16()
    };
    shared.requests.record(verb, &label, code);
    Ok(response)
}

fn verb_of(
    method: &Method,
    target: &Target<'_>,
    query: &HashMap<String, String>,
) -> Result<Verb, ApiError> {
    let named = target.name.is_some();
    let verb = match (method.as_str(), named) {
        ("GET", true) => Verb::Get,
        ("GET", false) if matches!(query.get("watch").map(String::as_str), Some("true" | "1")) => {
            Verb::Watch
        }
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return Err(ApiError::MethodNotSupported),
    };
    let status_ok = matches!(verb, Verb::Get | Verb::Update | Verb::Patch);
    // Namespaced objects are only reachable under namespaces/<ns>/; collections across all
    // namespaces only for reads.
    let ns_ok = !target.def.namespaced
        || target.namespace.is_some()
        || matches!(verb, Verb::List | Verb::Watch);
    if (target.status && !status_ok) || !ns_ok {
        return Err(ApiError::MethodNotSupported);
    }
    Ok(verb)
}

async fn dispatch(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
) -> (Verb, String, Result<Response<Body>, ApiError>) {
    let (parts, incoming) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let query = route::query(parts.uri.query());
    if let Err(e) = authorize(shared, &parts.headers) {
        return (Verb::Discovery, path, Err(e));
    }
    let route = match route::route(&shared.defs, &path) {
        Ok(route) => route,
        Err(e) => return (Verb::Discovery, path, Err(e)),
    };
    let Route::Resource(target) = route else {
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        return (Verb::Discovery, path, discovery_doc(shared, &route, accept));
    };
    let label = target.label();
    let verb = match verb_of(&parts.method, &target, &query) {
        Ok(verb) => verb,
        Err(e) => return (Verb::Get, label, Err(e)),
    };
    if let Some(answer) = shared.faults.take(verb, &label) {
        let error = match answer {
            Answer::Internal => ApiError::Internal {
                detail: "injected fault".to_owned(),
            },
            Answer::Conflict => conflict(
                target.def,
                target.name.as_deref().unwrap_or(""),
                "the object has been modified; please apply your changes to the latest version and try again",
            ),
            Answer::Forbidden => ApiError::Forbidden {
                message: format!(
                    "{}{} is forbidden: User \"system:serviceaccount:kube-system:weft-agent\" \
                     cannot {verb} resource \"{label}\" in API group \"{}\" {}",
                    target.def.qualified(),
                    target
                        .name
                        .as_deref()
                        .map(|n| format!(" \"{n}\""))
                        .unwrap_or_default(),
                    target.def.group,
                    if target.def.namespaced {
                        "in the namespace"
                    } else {
                        "at the cluster scope"
                    },
                ),
            },
        };
        return (verb, label, Err(error));
    }
    if query.contains_key("dryRun") {
        let e = ApiError::BadRequest {
            message: "dryRun is not modelled by the emulator".to_owned(),
        };
        return (verb, label, Err(e));
    }
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let result = match body::read(incoming).await {
        Ok(bytes) => verbs::serve_resource(shared, verb, &target, &query, &content_type, &bytes),
        Err(e) => Err(e),
    };
    (verb, label, result)
}

fn authorize(shared: &Shared, headers: &hyper::HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &shared.token else {
        return Ok(());
    };
    let Some(sent) = headers.get(header::AUTHORIZATION) else {
        return if shared.anonymous {
            Ok(())
        } else {
            Err(ApiError::Unauthorized)
        };
    };
    let bearer = sent.to_str().ok().and_then(|s| s.strip_prefix("Bearer "));
    if bearer == Some(token.as_str()) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

fn discovery_doc(
    shared: &Shared,
    route: &Route<'_>,
    accept: &str,
) -> Result<Response<Body>, ApiError> {
    let defs = &shared.defs;
    let aggregated = discovery::wants_aggregated(accept);
    let doc = match route {
        Route::Version => Some(discovery::version()),
        Route::CoreVersions if aggregated => {
            return Ok(json_response(
                200,
                &discovery::aggregated(defs, true),
                discovery::AGGREGATED_CONTENT_TYPE,
            ));
        }
        Route::Groups if aggregated => {
            return Ok(json_response(
                200,
                &discovery::aggregated(defs, false),
                discovery::AGGREGATED_CONTENT_TYPE,
            ));
        }
        Route::CoreVersions => Some(discovery::core_versions()),
        Route::Groups => Some(discovery::group_list(defs)),
        Route::Group(group) => discovery::group(defs, group),
        Route::GroupVersion { group, version } => discovery::resource_list(defs, group, version),
        Route::Resource(_) => None,
    };
    let doc = doc.ok_or(ApiError::NotFound {
        resource: String::new(),
        name: String::new(),
    })?;
    Ok(json_response(200, &doc, "application/json"))
}

//! Serving resource requests once routed and admitted: GET of one object, LIST (selectors,
//! `resourceVersion` semantics, pagination), WATCH (parameters checked, then `watch.rs`
//! streams), POST, PUT, PATCH (merge and JSON patch; other patch types are 415), DELETE of one
//! object or a collection, each on the resource or its `/status`. Objects go out at the URL's
//! version.

use std::{collections::HashMap, sync::Arc, time::Duration};

use hyper::Response;
use serde_json::{Value, json};

use super::{
    Shared,
    body::Body,
    faults::{Verb, lock},
    meta::meta_str,
    route::Target,
    selectors::Selector,
    server::json_response,
    status::ApiError,
    store::{Obj, Part, Patch},
    watch::{self, Scope, WatchParams},
};

/// An object as served at the URL's version.
fn out(target: &Target<'_>, object: &Obj) -> Value {
    let mut object = (**object).clone();
    object["apiVersion"] = json!(target.def.api_version(&target.version));
    object
}

fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest {
        message: format!("the request body is not valid JSON: {e}"),
    })
}

pub(super) fn serve_resource(
    shared: &Arc<Shared>,
    verb: Verb,
    target: &Target<'_>,
    query: &HashMap<String, String>,
    content_type: &str,
    bytes: &[u8],
) -> Result<Response<Body>, ApiError> {
    let def = target.def;
    let ns = target.namespace.as_deref();
    let name = target.name.as_deref().unwrap_or("");
    let part = if target.status {
        Part::Status
    } else {
        Part::Main
    };
    let ok = |code, object: &Obj| {
        Ok(json_response(
            code,
            &out(target, object),
            "application/json",
        ))
    };
    match verb {
        Verb::Get => ok(200, &lock(&shared.store).get(def, ns, name)?),
        Verb::List => list(shared, target, query),
        Verb::Watch => {
            let scope = Scope {
                def: def.clone(),
                version: target.version.clone(),
                namespace: target.namespace.clone(),
                selector: selector(target, query)?,
            };
            Ok(watch::start(shared, scope, watch_params(shared, query)?))
        }
        Verb::Create => ok(
            201,
            &lock(&shared.store).create(def, ns, parse_json(bytes)?)?,
        ),
        Verb::Update => ok(
            200,
            &lock(&shared.store).update(def, ns, name, parse_json(bytes)?, part)?,
        ),
        Verb::Patch => {
            let media = content_type.split(';').next().unwrap_or("").trim();
            let patch = match media {
                "application/merge-patch+json" => Patch::Merge(parse_json(bytes)?),
                "application/json-patch+json" => Patch::Json(parse_json(bytes)?),
                _ => {
                    return Err(ApiError::UnsupportedMediaType {
                        content_type: content_type.to_owned(),
                    });
                }
            };
            ok(
                200,
                &lock(&shared.store).patch(def, ns, name, &patch, part)?,
            )
        }
        Verb::Delete => {
            let options = if bytes.is_empty() {
                Value::Null
            } else {
                parse_json(bytes)?
            };
            ok(200, &lock(&shared.store).delete(def, ns, name, &options)?)
        }
        Verb::DeleteCollection => {
            let selector = selector(target, query)?;
            let mut store = lock(&shared.store);
            let doomed = store.select(def, ns, &selector);
            let mut deleted = Vec::new();
            for object in doomed {
                let (o_ns, o_name) = (meta_str(&object, "namespace"), meta_str(&object, "name"));
                let o_ns = (!o_ns.is_empty()).then_some(o_ns);
                if let Ok(gone) = store.delete(def, o_ns, o_name, &Value::Null) {
                    deleted.push(out(target, &gone));
                }
            }
            let list = list_doc(target, &deleted, store.rv(), None, 0);
            Ok(json_response(200, &list, "application/json"))
        }
        Verb::Discovery => Err(ApiError::MethodNotSupported),
    }
}

fn selector(target: &Target<'_>, query: &HashMap<String, String>) -> Result<Selector, ApiError> {
    Selector::parse(
        query.get("labelSelector").map(String::as_str),
        query.get("fieldSelector").map(String::as_str),
        target.def,
    )
    .map_err(|e| ApiError::BadRequest {
        message: e.to_string(),
    })
}

fn parse_rv(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| ApiError::BadRequest {
        message: format!("invalid resource version: {text:?}"),
    })
}

fn list_doc(
    target: &Target<'_>,
    items: &[Value],
    rv: u64,
    continue_token: Option<String>,
    remaining: usize,
) -> Value {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
        metadata["remainingItemCount"] = json!(remaining);
    }
    json!({
        "kind": target.def.list_kind,
        "apiVersion": target.def.api_version(&target.version),
        "metadata": metadata,
        "items": items,
    })
}

fn list(
    shared: &Shared,
    target: &Target<'_>,
    query: &HashMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let rv = query.get("resourceVersion").map_or("", String::as_str);
    let exact = query
        .get("resourceVersionMatch")
        .is_some_and(|m| m == "Exact");
    let limit = query
        .get("limit")
        .map(|l| l.parse::<usize>())
        .transpose()
        .map_err(|_| ApiError::BadRequest {
            message: "invalid limit".to_owned(),
        })?
        // Like the watch cache, a list at resourceVersion 0 is served whole.
        .filter(|_| rv != "0");
    let page = if let Some(token) = query.get("continue").filter(|t| !t.is_empty()) {
        lock(&shared.pages).next(&target.def.plural, token, limit)?
    } else {
        let selector = selector(target, query)?;
        let (items, current) = {
            let store = lock(&shared.store);
            (
                store.select(target.def, target.namespace.as_deref(), &selector),
                store.rv(),
            )
        };
        if !rv.is_empty() {
            let wanted = parse_rv(rv)?;
            if wanted > current {
                return Err(ApiError::TooLargeResourceVersion {
                    requested: wanted,
                    current,
                });
            }
            if exact && wanted != current {
                return Err(ApiError::BadRequest {
                    message: "resourceVersionMatch=Exact for an older version is not modelled by the emulator".to_owned(),
                });
            }
        }
        lock(&shared.pages).first(&target.def.plural, items, current, limit)
    };
    let items: Vec<Value> = page.items.iter().map(|o| out(target, o)).collect();
    let doc = list_doc(target, &items, page.rv, page.continue_token, page.remaining);
    Ok(json_response(200, &doc, "application/json"))
}

fn watch_params(shared: &Shared, query: &HashMap<String, String>) -> Result<WatchParams, ApiError> {
    let flag = |k: &str| matches!(query.get(k).map(String::as_str), Some("true" | "1"));
    let rv = query.get("resourceVersion").map_or("", String::as_str);
    let initial_events = flag("sendInitialEvents");
    if initial_events
        && (!flag("allowWatchBookmarks")
            || query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan"))
    {
        return Err(ApiError::Invalid {
            resource: "ListOptions.meta.k8s.io".to_owned(),
            name: String::new(),
            detail: "sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan".to_owned(),
        });
    }
    let from = match rv {
        "" | "0" => None,
        _ if initial_events => None,
        rv => Some(parse_rv(rv)?),
    };
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(t.parse().map_err(|_| ApiError::BadRequest {
            message: format!("invalid timeoutSeconds: {t:?}"),
        })?),
        None => shared.default_watch_timeout,
    };
    Ok(WatchParams {
        from,
        bookmarks: flag("allowWatchBookmarks"),
        initial_events,
        timeout,
    })
}

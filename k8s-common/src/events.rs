//! Kubernetes Events about objects a weft program cannot use, so `kubectl describe` and
//! `kubectl get events` show why. Best effort: an Event that cannot be posted is returned as an
//! error for the caller to log, never retried.

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::Resource;

/// The namespace Events about cluster-scoped objects go to (as kubectl and controllers do).
pub const EVENT_NAMESPACE: &str = "default";

/// Why an Event was not posted.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The Event does not form an object.
    #[error("building an Event")]
    Build(#[source] serde_json::Error),
    /// The API server refused it (grant `create` on `events`).
    #[error("posting an Event (grant `create` on `events`)")]
    Post(#[source] kube::Error),
}

/// Post a Warning Event `reason` with `message` about `object` (its JSON as the API server
/// sent it), from `component` (`weft-agent`, `weft-operator`).
///
/// # Errors
/// [`EventError`] when the Event cannot be built or posted.
pub async fn post_warning(
    client: &kube::Client,
    object: &Value,
    reason: &str,
    message: &str,
    component: &str,
) -> Result<(), EventError> {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let now = now_rfc3339();
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": EVENT_NAMESPACE},
        "involvedObject": {
            "apiVersion": object["apiVersion"],
            "kind": object["kind"],
            "name": name,
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        EVENT_NAMESPACE,
        &Resource::Event.api_resource(),
    );
    let event: DynamicObject = serde_json::from_value(event).map_err(EventError::Build)?;
    api.create(&PostParams::default(), &event)
        .await
        .map(drop)
        .map_err(EventError::Post)
}

/// Now as RFC 3339 UTC with seconds (what Event timestamps carry).
fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    format!("{}Z", now.strftime("%Y-%m-%dT%H:%M:%S"))
}

//! Kubernetes Events about objects the agent cannot use, so `kubectl describe ciliumnode`
//! shows why (the agent also logs it). Best effort: an Event that cannot be posted is logged.

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use tracing::warn;

use super::Resource;

/// The namespace Events about cluster-scoped objects go to (as kubectl and controllers do).
const EVENT_NAMESPACE: &str = "default";

/// Post a Warning Event `InvalidField` about `object`.
pub(super) async fn report_invalid(client: &kube::Client, object: &Value, reason: &str) {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let now = now_rfc3339();
    let event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": EVENT_NAMESPACE},
        "involvedObject": {
            "apiVersion": object["apiVersion"].as_str().unwrap_or("cilium.io/v2"),
            "kind": object["kind"].as_str().unwrap_or("CiliumNode"),
            "name": name,
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
        },
        "reason": "InvalidField",
        "message": format!(
            "weft-agent cannot use this object ({reason}); it keeps the last valid version and \
             will not overwrite the field: fix it"
        ),
        "type": "Warning",
        "source": {"component": "weft-agent"},
        "reportingComponent": "weft-agent",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        EVENT_NAMESPACE,
        &Resource::Event.api_resource(),
    );
    let posted = match serde_json::from_value::<DynamicObject>(event) {
        Ok(event) => api.create(&PostParams::default(), &event).await.err(),
        Err(e) => {
            warn!(error = %e, "building an Event");
            return;
        }
    };
    if let Some(error) = posted {
        warn!(%error, object = name, "posting an Event (grant `create` on `events`)");
    }
}

/// Now as RFC 3339 UTC with seconds (what Event timestamps carry).
fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    format!("{}Z", now.strftime("%Y-%m-%dT%H:%M:%S"))
}

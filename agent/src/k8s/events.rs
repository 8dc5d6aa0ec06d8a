//! Kubernetes Events about objects the agent cannot use, so `kubectl describe ciliumnode`
//! shows why (the agent also logs it). Best effort: an Event that cannot be posted is logged.

use serde_json::Value;
use tracing::warn;

/// Post a Warning Event `InvalidField` about `object`.
pub(super) async fn report_invalid(client: &kube::Client, object: &Value, reason: &str) {
    let mut object = object.clone();
    if object["apiVersion"].is_null() {
        object["apiVersion"] = "cilium.io/v2".into();
    }
    if object["kind"].is_null() {
        object["kind"] = "CiliumNode".into();
    }
    let message = format!(
        "weft-agent cannot use this object ({reason}); it keeps the last valid version and \
         will not overwrite the field: fix it"
    );
    if let Err(error) =
        weft_k8s::events::post_warning(client, &object, "InvalidField", &message, "weft-agent")
            .await
    {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        warn!(error = %crate::error::chain(&error), object = name, "posting an Event");
    }
}

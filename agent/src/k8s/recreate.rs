//! Creating the own CiliumNode again when someone deletes it while the agent runs (its watch
//! sees it go, or a write answers 404), as Cilium's agent does from its local node state: the
//! newest version the agent saw, without status and without the metadata the API server sets,
//! so it carries the same seed (labels, owner reference, addresses, instance-id, …) and the
//! same `spec.ipam` (`podCIDRs`, `pools`, watermarks) and the operator re-occupies the blocks
//! it lists. The writer ([`super::writer`]) then re-applies the status parts as usual.
//!
//! Owns the create only: it writes nothing else, holds the writer's lock for each attempt (so
//! no write races the create), retries with backoff, adopts a CiliumNode someone else created
//! meanwhile, and never creates once the agent has started shutting down.

use std::{sync::Arc, time::Duration};

use kube::api::PostParams;
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::{K8sError, Resource, resources::to_json, store::Inner};
use crate::crd::{meta::ObjectType, node::CiliumNode};

/// Metadata the API server sets; a create must not carry it.
const SERVER_SET: [&str; 8] = [
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// First wait after a failed create; doubles up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(200);
/// Longest wait between two creates.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// Where one attempt left the CiliumNode.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// It exists again (created, adopted, or it never went).
    Exists,
    /// The agent is shutting down: nothing was created.
    Closing,
}

/// The task: each time the CiliumNode is reported gone, make it exist again, then wake the
/// writer. Ends when the agent shuts down.
pub(super) async fn run(inner: Arc<Inner>) {
    loop {
        inner.gone.notified().await;
        if ensure(&inner).await == Outcome::Closing {
            return;
        }
        // The writer re-applies the status parts against the object that now exists.
        inner.wake.notify_one();
    }
}

/// Attempt until the CiliumNode exists or the agent shuts down.
async fn ensure(inner: &Inner) -> Outcome {
    let mut delay = FIRST_DELAY;
    let mut announced = false;
    loop {
        match attempt(inner, &mut announced).await {
            Ok(outcome) => return outcome,
            Err(error) => {
                warn!(error = %crate::error::chain(&error), node = %inner.node_name, "creating CiliumNode again; retrying");
            }
        }
        tokio::time::sleep(delay + delay.mul_f64(fastrand::f64() / 4.0)).await;
        delay = (delay * 2).min(MAX_DELAY);
    }
}

async fn attempt(inner: &Inner, announced: &mut bool) -> Result<Outcome, K8sError> {
    let _writing = inner.writing.lock().await;
    if inner.closing() {
        return Ok(Outcome::Closing);
    }
    let api = Resource::CiliumNode.all(&inner.client);
    let get_error = |e| K8sError::from_api("get", "ciliumnodes", e);
    if let Some(current) = api.get_opt(&inner.node_name).await.map_err(get_error)? {
        // Created by someone else already, or a stale report.
        debug!(node = %inner.node_name, "CiliumNode exists");
        inner.remember(&to_json(&current));
        return Ok(Outcome::Exists);
    }
    if !std::mem::replace(announced, true) {
        info!(node = %inner.node_name, "CiliumNode was deleted; creating it again");
    }
    let template = inner
        .newest()
        .unwrap_or_else(|| json!({"metadata": {"name": inner.node_name}, "spec": {}}));
    let object = Resource::CiliumNode.object(clean(&template))?;
    match api.create(&PostParams::default(), &object).await {
        Ok(created) => {
            inner.remember(&to_json(&created));
            info!(node = %inner.node_name, "created CiliumNode again");
        }
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            let current = api.get(&inner.node_name).await.map_err(get_error)?;
            inner.remember(&to_json(&current));
            info!(node = %inner.node_name, "CiliumNode was created again by someone else; adopting it");
        }
        Err(e) => return Err(K8sError::from_api("create", "ciliumnodes", e)),
    }
    Ok(Outcome::Exists)
}

/// The document to create from a version of the CiliumNode: the same type, metadata and
/// spec, without `status` and without what the API server sets.
fn clean(doc: &Value) -> Value {
    let mut out = doc.clone();
    if let Some(object) = out.as_object_mut() {
        object.remove("status");
        object.insert("apiVersion".to_owned(), json!(CiliumNode::API_VERSION));
        object.insert("kind".to_owned(), json!(CiliumNode::KIND));
    }
    if let Some(metadata) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_SET {
            metadata.remove(field);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_keeps_the_seed_and_spec_and_drops_status_and_server_metadata() {
        let spec = json!({
            "instance-id": "i-1",
            "addresses": [{"type": "InternalIP", "ip": "192.0.2.10"}],
            "ipam": {
                "podCIDRs": ["10.0.1.0/24"],
                "pools": {"requested": [{"pool": "default", "needed": {"ipv4-addrs": 8}}],
                          "allocated": [{"pool": "default", "cidrs": ["10.99.0.0/27"]}]},
                "min-allocate": 2, "pre-allocate": 4, "max-allocate": 16,
                "pool": {"10.88.0.10": {"resource": "eni-1"}},
            },
        });
        let owner = json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-node"}]);
        let doc = json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {
                "name": "n1",
                "labels": {"topology.kubernetes.io/zone": "z1"},
                "annotations": {"a": "b"},
                "ownerReferences": owner,
                "resourceVersion": "42", "uid": "u-1", "generation": 3,
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-02T00:00:00Z",
                "deletionGracePeriodSeconds": 0,
                "managedFields": [{"manager": "weft-agent"}],
                "selfLink": "/apis/cilium.io/v2/ciliumnodes/n1",
            },
            "spec": spec,
            "status": {"ipam": {"used": {"10.0.1.5": {"owner": "default/a"}}}},
        });
        assert_eq!(
            clean(&doc),
            json!({
                "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                "metadata": {
                    "name": "n1",
                    "labels": {"topology.kubernetes.io/zone": "z1"},
                    "annotations": {"a": "b"},
                    "ownerReferences": owner,
                },
                "spec": spec,
            })
        );
    }

    #[test]
    fn clean_sets_the_type_when_a_version_lacks_it() {
        let doc = json!({"metadata": {"name": "n1", "resourceVersion": "1"}, "spec": {}});
        assert_eq!(
            clean(&doc),
            json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                "metadata": {"name": "n1"}, "spec": {}})
        );
    }
}

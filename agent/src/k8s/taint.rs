//! The agent-not-ready taint (Cilium's `agent-not-ready-taint-key`, by default
//! `node.cilium.io/agent-not-ready`): nodes registered with it keep pods that need the pod network
//! away until the network is there. Once the agent serves CNI it removes the taint from its own
//! Node with a JSON patch that first tests the taint is still where it was read, so a taint
//! another writer added or removed meanwhile is never lost; a failed test is read again.
//! Cilium's operator does this for its agents; weft's agent does it for itself.

use std::time::Duration;

use json_patch::{PatchOperation, RemoveOperation, TestOperation};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde_json::json;
use tracing::{debug, error, info, warn};

use super::{K8sError, status_code};
use crate::error::chain;

/// How many times a patch whose test failed (another writer changed the taints) is retried.
const ATTEMPTS: u32 = 5;

/// Remove the taint `key` from Node `node`. Returns whether there was one.
///
/// # Errors
/// The Node cannot be read or patched (a missing `patch nodes` permission is named), or the
/// taints kept changing under the agent for every attempt.
pub async fn remove_not_ready_taint(
    client: &Client,
    node: &str,
    key: &str,
) -> Result<bool, K8sError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = nodes
            .get(node)
            .await
            .map_err(|e| K8sError::from_api("get", "nodes", e))?;
        let taints = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let Some(index) = taints.iter().position(|t| t.key == key) else {
            return Ok(false);
        };
        let at = |tail: &[&str]| {
            let index = index.to_string();
            json_patch::jsonptr::PointerBuf::from_tokens(
                ["spec", "taints", index.as_str()]
                    .into_iter()
                    .chain(tail.iter().copied()),
            )
        };
        let patch = json_patch::Patch(vec![
            PatchOperation::Test(TestOperation {
                path: at(&["key"]),
                value: json!(key),
            }),
            PatchOperation::Remove(RemoveOperation { path: at(&[]) }),
        ]);
        match nodes
            .patch(node, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => return Ok(true),
            // The test failed (422) or the object changed (409): read it again.
            Err(error) if matches!(status_code(&error), Some(409 | 422)) && attempt < ATTEMPTS => {}
            Err(error) => return Err(K8sError::from_api("patch", "nodes", error)),
        }
    }
}

/// Remove the taint as [`remove_not_ready_taint`] does, retrying while the API server fails
/// for a while (unreachable, overloaded; backing off to 30 s) and giving up, with an error
/// logged, on anything retrying cannot mend (a refused credential or permission, a Node that
/// is gone). Logs what it did; never fails.
pub async fn clear(client: Client, node: String, key: String) {
    let mut wait = Duration::from_secs(1);
    loop {
        match remove_not_ready_taint(&client, &node, &key).await {
            Ok(true) => {
                info!(%node, taint = %key, "removed the agent-not-ready taint from the Node");
                return;
            }
            Ok(false) => {
                debug!(%node, taint = %key, "the Node has no agent-not-ready taint");
                return;
            }
            Err(error) if !error.is_transient() => {
                error!(
                    %node, taint = %key, error = %chain(&error),
                    "cannot remove the agent-not-ready taint: pods that do not tolerate it stay \
                     pending (or set remove-cilium-node-taints: \"false\")"
                );
                return;
            }
            Err(error) => {
                warn!(%node, taint = %key, error = %chain(&error), "removing the agent-not-ready taint; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}

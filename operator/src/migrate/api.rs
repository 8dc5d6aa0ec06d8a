//! [`KubeApi`]: the migration's calls against the API server. A pool is read through each pool
//! resource given in turn (the watched one in the running operator; `v2`, then `v2alpha1` in
//! the dry run, where a 404 may mean "not served"); CiliumNodes are replaced whole (guarded by
//! their `resourceVersion`) and their status merge-patched. Knows no plan.

use kube::{
    Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::Value;
use tracing::warn;
use weft_cluster_ipam::manager::status_patch;
use weft_k8s::{Resource, client::status_code, resource::to_json};

use super::{Api, MigrationError, REFUSED_REASON, Written};
use crate::chain;

/// The migration's calls over a client.
#[derive(Clone)]
pub struct KubeApi {
    client: Client,
    pools: Vec<Resource>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi")
            .field("pools", &self.pools)
            .finish_non_exhaustive()
    }
}

impl KubeApi {
    /// Over `client`; a pool is looked up in `pools` in turn (empty: `v2`, then `v2alpha1`).
    #[must_use]
    pub fn new(client: &Client, pools: Vec<Resource>) -> Self {
        let pools = if pools.is_empty() {
            vec![Resource::CiliumPodIpPoolV2, Resource::CiliumPodIpPool]
        } else {
            pools
        };
        Self {
            client: client.clone(),
            pools,
        }
    }
}

fn failed(verb: &'static str, what: impl Into<String>, source: kube::Error) -> MigrationError {
    MigrationError::Api {
        verb,
        what: what.into(),
        source,
    }
}

fn written(
    result: Result<impl Sized, kube::Error>,
    verb: &'static str,
    what: String,
) -> Result<Written, MigrationError> {
    match result {
        Ok(_) => Ok(Written::Done),
        Err(e) if status_code(&e) == Some(409) => Ok(Written::Conflict),
        Err(e) if status_code(&e) == Some(404) => Ok(Written::Gone),
        Err(source) => Err(failed(verb, what, source)),
    }
}

impl Api for KubeApi {
    async fn pool(&self, name: &str) -> Result<Option<Value>, MigrationError> {
        for resource in &self.pools {
            match resource.all(&self.client).get_opt(name).await {
                Ok(Some(pool)) => return Ok(Some(to_json(&pool))),
                // Not there, or this version is not served: try the next.
                Ok(None) => {}
                Err(e) if status_code(&e) == Some(404) => {}
                Err(source) => {
                    return Err(failed("get", format!("CiliumPodIPPool {name}"), source));
                }
            }
        }
        Ok(None)
    }

    async fn nodes(&self) -> Result<Vec<Value>, MigrationError> {
        let list = Resource::CiliumNode
            .all(&self.client)
            .list(&ListParams::default())
            .await
            .map_err(|source| failed("list", "ciliumnodes", source))?;
        Ok(list.items.iter().map(to_json).collect())
    }

    async fn node(&self, name: &str) -> Result<Option<Value>, MigrationError> {
        Resource::CiliumNode
            .all(&self.client)
            .get_opt(name)
            .await
            .map(|node| node.as_ref().map(to_json))
            .map_err(|source| failed("get", format!("CiliumNode {name}"), source))
    }

    async fn replace(&self, doc: &Value) -> Result<Written, MigrationError> {
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let object = Resource::CiliumNode.object(doc.clone())?;
        let result = Resource::CiliumNode
            .all(&self.client)
            .replace(&name, &PostParams::default(), &object)
            .await;
        written(result, "update", format!("CiliumNode {name}"))
    }

    async fn set_error(&self, node: &str, text: &str) -> Result<Written, MigrationError> {
        let result = Resource::CiliumNode
            .all(&self.client)
            .patch_status(
                node,
                &PatchParams::default(),
                &Patch::Merge(status_patch(text)),
            )
            .await;
        written(result, "patch", format!("CiliumNode {node} status"))
    }

    async fn event(&self, object: &Value, message: &str) {
        let posted = weft_k8s::events::post_warning(
            &self.client,
            object,
            REFUSED_REASON,
            message,
            "weft-operator",
        )
        .await;
        if let Err(error) = posted {
            warn!(error = %chain(&error), "could not post an Event");
        }
    }
}

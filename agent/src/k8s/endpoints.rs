//! This node's endpoints in the cluster: one numeric identity per security label set, shared
//! through CiliumIdentity objects (CRD allocation as Cilium's `identity-allocation-mode=crd`:
//! reuse the identity whose `security-labels` equal the pod's, else create one with a random
//! free id in 256–65535, retrying on a name clash), and one CiliumEndpoint per local pod (its
//! identity, addresses and node), removed when the pod goes. Other agents read both to fill
//! their IPCache.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Mutex,
};

use agent_common::identity::MIN_ALLOCATED;
use kube::{
    Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::{K8sError, Resource, resources::to_json};
use crate::{
    crd::identity::HEARTBEAT_ANNOTATION,
    error::chain,
    identity::{MAX_ALLOCATED, SecurityLabels, as_list},
    store::{Snapshot, status_digest},
};

/// Attempts at creating a CiliumIdentity before giving up for this round.
const CREATE_ATTEMPTS: u32 = 16;

/// A pod on this node, as published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalEndpoint {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// The pod's UID (owner reference), when the pod is known.
    pub pod_uid: Option<String>,
    /// Cilium-style endpoint id (small, per node).
    pub endpoint_id: u16,
    /// Addresses.
    pub ips: Vec<IpAddr>,
    /// Security labels.
    pub labels: SecurityLabels,
}

/// Publishes identities and endpoints.
pub struct EndpointPublisher {
    client: Client,
    /// Identities this agent created that its watch had not delivered yet when last asked
    /// (entries leave once delivered: a later absence from the snapshot is a deletion).
    created: Mutex<BTreeMap<SecurityLabels, u32>>,
}

impl std::fmt::Debug for EndpointPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointPublisher").finish_non_exhaustive()
    }
}

impl EndpointPublisher {
    /// A publisher using `client`.
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self {
            client,
            created: Mutex::new(BTreeMap::new()),
        }
    }

    /// The identity of `labels`: an existing CiliumIdentity with exactly these labels, else a
    /// new one.
    ///
    /// # Errors
    /// The API server refused or failed (the caller retries later; the pod keeps its current
    /// identity meanwhile).
    pub async fn identity(
        &self,
        labels: &SecurityLabels,
        snapshot: &Snapshot,
    ) -> Result<u32, K8sError> {
        super::store::lock(&self.created)
            .retain(|_, id| !snapshot.identities.contains_key(&id.to_string()));
        let existing = snapshot
            .identities
            .values()
            .filter(|i| &i.security_labels == labels)
            .filter_map(|i| Some((i.id()?, i)))
            .min_by_key(|(id, _)| *id);
        if let Some((id, identity)) = existing {
            if identity
                .metadata
                .annotations
                .contains_key(HEARTBEAT_ANNOTATION)
            {
                if self.unmark(id, &identity.metadata.resource_version).await {
                    return Ok(id);
                }
            } else {
                return Ok(id);
            }
        }
        let api = Resource::CiliumIdentity.all(&self.client);
        let cached = super::store::lock(&self.created).get(labels).copied();
        if let Some(id) = cached {
            // Created here, not delivered yet, or deleted (the operator's garbage collection)
            // since: only the API server can tell.
            match api.get_opt(&id.to_string()).await {
                Ok(Some(_)) => return Ok(id),
                Ok(None) => {
                    super::store::lock(&self.created).remove(labels);
                }
                Err(e) => return Err(K8sError::from_api("get", "ciliumidentities", e)),
            }
        }
        for _ in 0..CREATE_ATTEMPTS {
            let id = fastrand::u32(MIN_ALLOCATED..=MAX_ALLOCATED);
            if snapshot.identities.contains_key(&id.to_string()) {
                continue;
            }
            let object = identity_object(id, labels)?;
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => {
                    info!(identity = id, labels = ?as_list(labels), "allocated identity");
                    super::store::lock(&self.created).insert(labels.clone(), id);
                    return Ok(id);
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => return Err(K8sError::from_api("create", "ciliumidentities", e)),
            }
        }
        Err(K8sError::IdentitiesTaken {
            attempts: CREATE_ATTEMPTS,
        })
    }

    /// Removes the operator's deletion mark from identity `id`, which a pod uses again (as
    /// cilium-agent does): the change makes the operator's delete, which carries the
    /// resourceVersion it marked, fail. Best effort: a failure is logged, and the next pass
    /// tries again while the mark is there. Returns false when the identity is gone (deleted
    /// meanwhile): the caller then allocates a new one.
    async fn unmark(&self, id: u32, resource_version: &str) -> bool {
        let patch = json!({"metadata": {
            "resourceVersion": resource_version,
            "annotations": {HEARTBEAT_ANNOTATION: null},
        }});
        let api = Resource::CiliumIdentity.all(&self.client);
        match api
            .patch(
                &id.to_string(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => info!(identity = id, "Identity marked for deletion; unmarked it"),
            Err(kube::Error::Api(s)) if s.code == 404 => return false,
            // Changed meanwhile: the next pass sees the new state.
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(error) => {
                warn!(identity = id, error = %chain(&error), "unmarking an identity marked for deletion failed");
            }
        }
        true
    }

    /// Create or update the CiliumEndpoint of `endpoint` (identity `identity`, on the node
    /// with address `node_ip`); nothing is sent when it is already so.
    ///
    /// # Errors
    /// The API server refused or failed.
    pub async fn publish(
        &self,
        endpoint: &LocalEndpoint,
        identity: u32,
        node_ip: &str,
        snapshot: &Snapshot,
    ) -> Result<(), K8sError> {
        let status = endpoint_status(endpoint, identity, node_ip);
        let key = (endpoint.namespace.clone(), endpoint.name.clone());
        let api = Resource::CiliumEndpoint.namespaced(&self.client, &endpoint.namespace);
        let current = match snapshot.endpoints.get(&key) {
            Some(cep) if cep.status_digest == status_digest(&status) => return Ok(()),
            Some(_) => api
                .get_opt(&endpoint.name)
                .await
                .map_err(|e| K8sError::from_api("get", "ciliumendpoints", e))?,
            None => None,
        };
        if let Some(object) = current {
            let mut doc = to_json(&object);
            if doc["status"] == status {
                return Ok(());
            }
            doc["status"] = status;
            api.replace(
                &endpoint.name,
                &PostParams::default(),
                &Resource::CiliumEndpoint.object(doc)?,
            )
            .await
            .map_err(|e| K8sError::from_api("update", "ciliumendpoints", e))?;
        } else {
            let mut meta = json!({"name": endpoint.name, "namespace": endpoint.namespace});
            if let Some(uid) = &endpoint.pod_uid {
                meta["ownerReferences"] = json!([{
                    "apiVersion": "v1", "kind": "Pod", "name": endpoint.name, "uid": uid,
                }]);
            }
            let doc = json!({
                "apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
                "metadata": meta, "status": status,
            });
            match api
                .create(
                    &PostParams::default(),
                    &Resource::CiliumEndpoint.object(doc)?,
                )
                .await
            {
                Ok(_) => {}
                // Left by an earlier run and not yet in the watch: updated next round.
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => return Err(K8sError::from_api("create", "ciliumendpoints", e)),
            }
        }
        debug!(endpoint = %format!("{}/{}", endpoint.namespace, endpoint.name), identity, "CiliumEndpoint published");
        Ok(())
    }

    /// Delete the CiliumEndpoints on this node (`node_ips`) that are not in `keep`.
    ///
    /// # Errors
    /// The API server refused or failed.
    pub async fn prune(
        &self,
        snapshot: &Snapshot,
        node_ips: &BTreeSet<IpAddr>,
        keep: &BTreeSet<(String, String)>,
    ) -> Result<(), K8sError> {
        for ((ns, name), cep) in &snapshot.endpoints {
            let on_this_node = cep.node_ip.is_some_and(|ip| node_ips.contains(&ip));
            if !on_this_node || keep.contains(&(ns.clone(), name.clone())) {
                continue;
            }
            let api = Resource::CiliumEndpoint.namespaced(&self.client, ns);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => info!(endpoint = %format!("{ns}/{name}"), "CiliumEndpoint removed"),
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(K8sError::from_api("delete", "ciliumendpoints", e)),
            }
        }
        Ok(())
    }
}

fn endpoint_status(endpoint: &LocalEndpoint, identity: u32, node_ip: &str) -> Value {
    let mut pair = serde_json::Map::new();
    for ip in &endpoint.ips {
        let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
        pair.insert(family.to_owned(), json!(ip.to_string()));
    }
    json!({
        "id": endpoint.endpoint_id,
        "identity": {"id": identity, "labels": as_list(&endpoint.labels)},
        "networking": {"addressing": [pair], "node": node_ip},
        "state": "ready",
    })
}

fn identity_object(id: u32, labels: &SecurityLabels) -> Result<DynamicObject, K8sError> {
    // metadata.labels carry the label keys without their source, where Kubernetes accepts
    // them, so `kubectl get ciliumidentities -l app=web` works as with Cilium.
    let plain: BTreeMap<String, String> = labels
        .iter()
        .filter_map(|(k, v)| {
            let key = k.strip_prefix("k8s:")?;
            (key.len() <= 63 && v.len() <= 63 && !key.contains("io.cilium.k8s.namespace.labels"))
                .then(|| (key.to_owned(), v.clone()))
        })
        .collect();
    Resource::CiliumIdentity
        .object(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
            "metadata": {"name": id.to_string(), "labels": plain},
            "security-labels": labels,
        }))
        .map_err(K8sError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_carries_identity_addresses_and_node() {
        let endpoint = LocalEndpoint {
            namespace: "web".into(),
            name: "a".into(),
            pod_uid: None,
            endpoint_id: 7,
            ips: vec!["10.1.0.5".parse().unwrap(), "fd00::5".parse().unwrap()],
            labels: SecurityLabels::from([("k8s:app".to_owned(), "web".to_owned())]),
        };
        let status = endpoint_status(&endpoint, 4242, "192.0.2.1");
        assert_eq!(
            status,
            json!({"id": 7, "identity": {"id": 4242, "labels": ["k8s:app=web"]},
                   "networking": {"addressing": [{"ipv4": "10.1.0.5", "ipv6": "fd00::5"}], "node": "192.0.2.1"},
                   "state": "ready"})
        );
        let cep: crate::crd::endpoint::CiliumEndpoint =
            serde_json::from_value(json!({"metadata": {"name": "a"}, "status": status}))
                .expect("decodes as a CiliumEndpoint");
        assert_eq!(
            cep.status.expect("status").identity.expect("identity").id,
            4242
        );
    }
}

//! Security identities of the local pods, resolved after the fact (a pod starts at `init`, as in
//! Cilium, and gets its identity as soon as it is known): the labels come from the pod and its
//! namespace in the store; the number from the local allocator (single-host store) or from
//! CiliumIdentities (Kubernetes), where each pod's CiliumEndpoint is published too. Runs as its
//! own task, woken by ADD, DEL and store changes, and never holds the state lock across a
//! request to the API server.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
    time::Duration,
};

use tracing::warn;

use super::{Daemon, NodeStore, RecordError, chain};
use crate::{
    identity::{SecurityLabels, security_labels},
    k8s::endpoints::{EndpointPublisher, LocalEndpoint},
    store::Snapshot,
};

/// Wait this long after a wake-up so a burst of ADDs is handled in one pass.
const COALESCE: Duration = Duration::from_millis(100);
/// Retry this long after a failed pass (API server away).
const RETRY: Duration = Duration::from_secs(2);

/// Resolve identities (and publish endpoints) whenever woken; forever.
pub(super) async fn run(daemon: Arc<Daemon>) {
    let publisher = match &daemon.store {
        NodeStore::Kube(store) => Some(EndpointPublisher::new(store.client())),
        NodeStore::Embedded(_) => None,
    };
    loop {
        daemon.endpoints_changed.notified().await;
        tokio::time::sleep(COALESCE).await;
        if let Err(error) = pass(&daemon, publisher.as_ref()).await {
            warn!(error = %chain(&error), "resolving pod identities; retrying");
            tokio::time::sleep(RETRY).await;
            daemon.endpoints_changed.notify_one();
        }
    }
}

/// Why an identity pass failed (it is retried).
#[derive(Debug, thiserror::Error)]
enum PassError {
    /// The records directory could not be listed: nothing is known about the local pods.
    #[error("listing the endpoint records")]
    Records(#[source] RecordError),
    /// The API server refused or failed.
    #[error(transparent)]
    K8s(#[from] crate::k8s::K8sError),
}

async fn pass(daemon: &Daemon, publisher: Option<&EndpointPublisher>) -> Result<(), PassError> {
    let (endpoints, snapshot, unreadable) = local_endpoints(daemon).await?;
    let mut resolved: BTreeMap<(String, String), u32> = BTreeMap::new();
    match publisher {
        None => {
            let mut state = daemon.state.lock().await;
            for ep in &endpoints {
                let id = state.local_ids.identity(&ep.labels);
                resolved.insert((ep.namespace.clone(), ep.name.clone()), id);
            }
        }
        Some(publisher) => {
            for ep in &endpoints {
                let id = publisher.identity(&ep.labels, &snapshot).await?;
                resolved.insert((ep.namespace.clone(), ep.name.clone()), id);
            }
        }
    }
    {
        let mut state = daemon.state.lock().await;
        for ep in &endpoints {
            let id = resolved[&(ep.namespace.clone(), ep.name.clone())];
            for ip in &ep.ips {
                if let Err(error) = state.datapath.set_endpoint_identity(*ip, id) {
                    warn!(error = %chain(&error), %ip, "setting a pod's identity");
                }
            }
        }
    }
    if let Some(publisher) = publisher {
        let node_ip = own_ips(daemon, &snapshot).await;
        // The address other nodes reach this one at: the CiliumNode's first announced address
        // (the Node's InternalIP), else any of the node's addresses.
        let first = snapshot
            .own_node()
            .and_then(|n| super::remote::node_ips(n).first().map(ToString::to_string))
            .or_else(|| node_ip.iter().next().map(ToString::to_string))
            .unwrap_or_default();
        for ep in &endpoints {
            let id = resolved[&(ep.namespace.clone(), ep.name.clone())];
            publisher.publish(ep, id, &first, &snapshot).await?;
        }
        if unreadable.is_empty() {
            let keep: BTreeSet<_> = endpoints
                .iter()
                .map(|e| (e.namespace.clone(), e.name.clone()))
                .collect();
            publisher.prune(&snapshot, &node_ip, &keep).await?;
        } else {
            // A record that cannot be read is a pod whose CiliumEndpoint must stay: with a
            // partial view, prune nothing (other nodes would drop the pod's IPCache entries).
            let unreadable: Vec<String> = unreadable.iter().map(|e| chain(e)).collect();
            warn!(
                ?unreadable,
                "not removing any CiliumEndpoint of this node while endpoint records cannot be \
                 read; move away the records of pods that are gone"
            );
        }
    }
    Ok(())
}

/// The node's addresses as other nodes reach it (the own CiliumNode's `spec.addresses`, then
/// the native devices).
pub(super) async fn own_ips(daemon: &Daemon, snapshot: &Snapshot) -> BTreeSet<IpAddr> {
    let mut ips: BTreeSet<IpAddr> = snapshot
        .own_node()
        .map(super::remote::node_ips)
        .unwrap_or_default()
        .into_iter()
        .collect();
    ips.extend(daemon.state.lock().await.net.device_ips.iter().copied());
    ips
}

/// The local pods from the endpoint records, with their labels from the store, and the
/// records that could not be read.
async fn local_endpoints(
    daemon: &Daemon,
) -> Result<(Vec<LocalEndpoint>, Arc<Snapshot>, Vec<RecordError>), PassError> {
    let snapshot = daemon.state.lock().await.snapshot.clone();
    let (records, unreadable) = daemon.records.all().map_err(PassError::Records)?;
    let mut by_pod: BTreeMap<(String, String), LocalEndpoint> = BTreeMap::new();
    for record in records.into_iter().filter(|r| r.result.is_some()) {
        let Some((namespace, name)) = record.owner.split_once('/') else {
            continue;
        };
        let key = (namespace.to_owned(), name.to_owned());
        let pod = snapshot.pods.get(&key);
        let fallback;
        // A pod not (yet) in the store is still identified by its namespace.
        let pod_or_namespace = if let Some(pod) = pod {
            pod
        } else {
            let mut bare = crate::crd::meta::Pod::default();
            namespace.clone_into(&mut bare.metadata.namespace);
            fallback = bare;
            &fallback
        };
        let labels: SecurityLabels = security_labels(
            pod_or_namespace,
            snapshot.namespaces.get(namespace),
            &daemon.config.cluster_name,
        );
        let entry = by_pod.entry(key).or_insert_with(|| LocalEndpoint {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            pod_uid: pod
                .map(|p| p.metadata.uid.clone())
                .filter(|u| !u.is_empty()),
            endpoint_id: endpoint_id(&record.container_id),
            ips: Vec::new(),
            labels,
        });
        entry.ips.extend(record.addrs.iter().map(|a| a.ip));
    }
    Ok((by_pod.into_values().collect(), snapshot, unreadable))
}

/// A small per-node endpoint id (Cilium's are 1–4095), stable for a container.
fn endpoint_id(container_id: &str) -> u16 {
    let hash = container_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    u16::try_from(hash % 4095).unwrap_or(0) + 1
}

//! The Kubernetes store: five watches (the own CiliumNode by `metadata.name=`, this node's
//! pods by `spec.nodeName=`, namespaces, CiliumPodIPPools, CiliumNodeConfigs) with kube's
//! default backoff, folded into one [`Snapshot`] that is republished after every change once
//! each watch has listed. An object that does not decode keeps its last good version and is
//! reported (log, `Snapshot::problems`, and an Event for the own CiliumNode). A 401/403 from
//! any watch is fatal: the agent cannot work without the permission and says which one.
//!
//! Writes go through one task ([`super::writer`]); this file owns the shared state.

use std::{
    collections::{BTreeSet, VecDeque},
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::{Stream, StreamExt as _};
use kube::{
    Client,
    api::DynamicObject,
    runtime::{
        WatchStreamExt as _,
        watcher::{self, Event},
    },
};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tracing::{debug, warn};

use super::{
    K8sError, Resource,
    resources::{decode, to_json},
    writer,
};
use crate::store::{NodeWrite, Snapshot, Store, StoreError, WriteStats};

/// How many recent versions of the own CiliumNode are kept as write bases.
const VERSIONS_KEPT: usize = 32;

/// A store backed by the Kubernetes API.
#[derive(Debug, Clone)]
pub struct KubeStore {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) node_name: String,
    snapshots: watch::Sender<Arc<Snapshot>>,
    state: Mutex<Builder>,
    fatal: watch::Sender<Option<Arc<K8sError>>>,
    pub(super) pending: Mutex<Option<(NodeWrite, String)>>,
    pub(super) wake: Notify,
    pub(super) writing: tokio::sync::Mutex<()>,
    pub(super) debounce: Duration,
    pub(super) stats: WriteStats,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeStore")
            .field("node_name", &self.node_name)
            .field("debounce", &self.debounce)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// What the watches have seen so far.
#[derive(Debug, Default)]
struct Builder {
    snapshot: Snapshot,
    synced: BTreeSet<Resource>,
    /// Recent raw versions of the own CiliumNode by resourceVersion, newest last.
    versions: VecDeque<(String, Value)>,
    /// Problems already turned into an Event (so each is reported once).
    reported: BTreeSet<String>,
}

const WATCHED: [Resource; 5] = [
    Resource::CiliumNode,
    Resource::Pod,
    Resource::Namespace,
    Resource::CiliumPodIpPool,
    Resource::CiliumNodeConfig,
];

impl KubeStore {
    /// Start the watches and the writer on the current runtime; returns at once (see
    /// [`KubeStore::wait_synced`]).
    #[must_use]
    pub fn open(client: Client, node_name: &str, debounce: Duration) -> Self {
        let (snapshots, _) = watch::channel(Arc::new(Snapshot {
            node_name: node_name.to_owned(),
            ..Snapshot::default()
        }));
        let inner = Arc::new(Inner {
            client,
            node_name: node_name.to_owned(),
            snapshots,
            state: Mutex::new(Builder::default()),
            fatal: watch::Sender::new(None),
            pending: Mutex::new(None),
            wake: Notify::new(),
            writing: tokio::sync::Mutex::new(()),
            debounce,
            stats: WriteStats::default(),
        });
        for resource in WATCHED {
            let config = match resource {
                Resource::CiliumNode => {
                    watcher::Config::default().fields(&format!("metadata.name={node_name}"))
                }
                Resource::Pod => {
                    watcher::Config::default().fields(&format!("spec.nodeName={node_name}"))
                }
                _ => watcher::Config::default(),
            };
            let stream = watcher::watcher(resource.all(&inner.client), config).default_backoff();
            tokio::spawn(watch_loop(Arc::clone(&inner), resource, stream));
        }
        tokio::spawn(writer::write_loop(Arc::clone(&inner)));
        Self { inner }
    }

    /// Wait until every watch has listed once.
    ///
    /// # Errors
    /// A watch was refused (401/403): the error names the verb and resource.
    pub async fn wait_synced(&self) -> Result<(), Arc<K8sError>> {
        let mut snapshots = self.inner.snapshots.subscribe();
        let mut fatal = self.inner.fatal.subscribe();
        loop {
            if let Some(error) = fatal.borrow_and_update().clone() {
                return Err(error);
            }
            if snapshots.borrow_and_update().synced {
                return Ok(());
            }
            tokio::select! {
                r = snapshots.changed() => if r.is_err() { return Ok(()) },
                r = fatal.changed() => if r.is_err() { return Ok(()) },
            }
        }
    }

    /// Resolves with the first fatal error (a permission the agent lacks); never otherwise.
    pub async fn failed(&self) -> Arc<K8sError> {
        let mut fatal = self.inner.fatal.subscribe();
        loop {
            if let Some(error) = fatal.borrow_and_update().clone() {
                return error;
            }
            if fatal.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// The writer's counters.
    #[must_use]
    pub fn stats(&self) -> &WriteStats {
        &self.inner.stats
    }
}

impl Store for KubeStore {
    fn snapshots(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.inner.snapshots.subscribe()
    }

    fn write_node(&self, write: NodeWrite, base_version: &str) {
        let mut pending = lock(&self.inner.pending);
        let merged = crate::store::merge_writes(pending.take().map(|(w, _)| w), write);
        *pending = Some((merged, base_version.to_owned()));
        drop(pending);
        self.inner.wake.notify_one();
    }

    async fn flush(&self) -> Result<(), StoreError> {
        writer::write_pending(&self.inner)
            .await
            .map(|_| ())
            .map_err(|e| StoreError::Kube {
                reason: crate::daemon::chain(&e),
            })
    }
}

impl Inner {
    /// The raw own CiliumNode at `version`, if still kept.
    pub(super) fn version(&self, version: &str) -> Option<Value> {
        lock(&self.state)
            .versions
            .iter()
            .rev()
            .find(|(v, _)| v == version)
            .map(|(_, doc)| doc.clone())
    }

    /// The newest raw own CiliumNode seen.
    pub(super) fn newest(&self) -> Option<Value> {
        lock(&self.state)
            .versions
            .back()
            .map(|(_, doc)| doc.clone())
    }

    /// Remember a version of the own CiliumNode (from a watch event or a write's answer).
    pub(super) fn remember(&self, doc: &Value) {
        remember(&mut lock(&self.state), doc);
    }
}

fn remember(builder: &mut Builder, doc: &Value) {
    let Some(version) = doc["metadata"]["resourceVersion"].as_str() else {
        return;
    };
    if builder.versions.iter().any(|(v, _)| v == version) {
        return;
    }
    builder
        .versions
        .push_back((version.to_owned(), doc.clone()));
    while builder.versions.len() > VERSIONS_KEPT {
        builder.versions.pop_front();
    }
}

async fn watch_loop(
    inner: Arc<Inner>,
    resource: Resource,
    stream: impl Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send,
) {
    let mut stream = std::pin::pin!(stream);
    let mut buffer: Vec<Value> = Vec::new();
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(event) => event,
            Err(error) => {
                if let Some(fatal) = refused(resource, &error) {
                    warn!(error = %fatal, "giving up on this watch");
                    inner.fatal.send_replace(Some(Arc::new(fatal)));
                    return;
                }
                warn!(%error, resource = resource.plural(), "watch failed; retrying with backoff");
                continue;
            }
        };
        let mut reports = Vec::new();
        {
            let mut builder = lock(&inner.state);
            match event {
                Event::Init => buffer.clear(),
                Event::InitApply(object) => {
                    buffer.push(to_json(&object));
                    continue;
                }
                Event::InitDone => {
                    clear(&mut builder.snapshot, resource);
                    for doc in buffer.drain(..) {
                        apply(
                            &mut builder,
                            &inner.node_name,
                            resource,
                            &doc,
                            false,
                            &mut reports,
                        );
                    }
                    builder.synced.insert(resource);
                }
                Event::Apply(object) => {
                    let doc = to_json(&object);
                    apply(
                        &mut builder,
                        &inner.node_name,
                        resource,
                        &doc,
                        false,
                        &mut reports,
                    );
                }
                Event::Delete(object) => {
                    let doc = to_json(&object);
                    apply(
                        &mut builder,
                        &inner.node_name,
                        resource,
                        &doc,
                        true,
                        &mut reports,
                    );
                }
            }
            let mut snapshot = builder.snapshot.clone();
            snapshot.node_name.clone_from(&inner.node_name);
            snapshot.synced = WATCHED.iter().all(|r| builder.synced.contains(r));
            inner.snapshots.send_replace(Arc::new(snapshot));
        }
        for (doc, reason) in reports {
            super::events::report_invalid(&inner.client, &doc, &reason).await;
        }
    }
}

/// A watch error that means the agent lacks a permission.
fn refused(resource: Resource, error: &watcher::Error) -> Option<K8sError> {
    let (verb, code) = match error {
        watcher::Error::InitialListFailed(e) => ("list", super::status_code(e)?),
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            ("watch", super::status_code(e)?)
        }
        watcher::Error::WatchError(status) => ("watch", status.code),
        watcher::Error::NoResourceVersion => return None,
    };
    matches!(code, 401 | 403).then(|| K8sError::Forbidden {
        verb,
        resource: resource.plural().to_owned(),
        code,
    })
}

fn clear(snapshot: &mut Snapshot, resource: Resource) {
    match resource {
        Resource::CiliumNode => snapshot.nodes.clear(),
        Resource::Pod => snapshot.pods.clear(),
        Resource::Namespace => snapshot.namespaces.clear(),
        Resource::CiliumPodIpPool => snapshot.pools.clear(),
        Resource::CiliumNodeConfig => snapshot.node_configs.clear(),
        Resource::Node | Resource::Event => {}
    }
    let prefix = format!("{}/", resource.plural());
    snapshot
        .problems
        .retain(|k, _| !k.to_string_lossy().starts_with(&prefix));
}

/// Fold one object into the snapshot. Undecodable objects keep their last good version and
/// are reported; the own CiliumNode's problems are also returned for an Event.
fn apply(
    builder: &mut Builder,
    node_name: &str,
    resource: Resource,
    doc: &Value,
    deleted: bool,
    reports: &mut Vec<(Value, String)>,
) {
    let name = doc["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let namespace = doc["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let key = resource.key(Some(&namespace), &name);
    if resource == Resource::CiliumNode && name == node_name && !deleted {
        remember(builder, doc);
    }
    let snapshot = &mut builder.snapshot;
    if deleted {
        snapshot.problems.remove(&PathBuf::from(&key));
        match resource {
            Resource::CiliumNode => drop(snapshot.nodes.remove(&name)),
            Resource::Pod => drop(snapshot.pods.remove(&(namespace, name))),
            Resource::Namespace => drop(snapshot.namespaces.remove(&name)),
            Resource::CiliumPodIpPool => drop(snapshot.pools.remove(&name)),
            Resource::CiliumNodeConfig => drop(snapshot.node_configs.remove(&(namespace, name))),
            Resource::Node | Resource::Event => {}
        }
        return;
    }
    let result = match resource {
        Resource::CiliumNode => decode(doc).map(|n| drop(snapshot.nodes.insert(name.clone(), n))),
        Resource::Pod => {
            decode(doc).map(|p| drop(snapshot.pods.insert((namespace, name.clone()), p)))
        }
        Resource::Namespace => {
            decode(doc).map(|n| drop(snapshot.namespaces.insert(name.clone(), n)))
        }
        Resource::CiliumPodIpPool => {
            decode(doc).map(|p| drop(snapshot.pools.insert(name.clone(), p)))
        }
        Resource::CiliumNodeConfig => {
            decode(doc).map(|c| drop(snapshot.node_configs.insert((namespace, name.clone()), c)))
        }
        Resource::Node | Resource::Event => Ok(()),
    };
    let problems = &mut builder.snapshot.problems;
    match result {
        Ok(()) => {
            problems.remove(&PathBuf::from(&key));
            debug!(object = %key, "updated");
        }
        Err(reason) => {
            warn!(object = %key, %reason, "object does not decode; keeping its last good version and never rewriting the field");
            problems.insert(PathBuf::from(&key), reason.clone());
            if resource == Resource::CiliumNode
                && builder.reported.insert(format!("{key}: {reason}"))
            {
                reports.push((doc.clone(), reason));
            }
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bad_objects_keep_their_last_good_version() {
        let mut b = Builder::default();
        let mut reports = Vec::new();
        let good = json!({"metadata": {"name": "n1", "resourceVersion": "1"},
            "spec": {"ipam": {"podCIDRs": ["10.0.0.0/24"]}}});
        apply(
            &mut b,
            "n1",
            Resource::CiliumNode,
            &good,
            false,
            &mut reports,
        );
        let bad = json!({"metadata": {"name": "n1", "resourceVersion": "2"},
            "spec": {"ipam": {"podCIDRs": ["10.0.0.0/24", "nope"]}}});
        apply(
            &mut b,
            "n1",
            Resource::CiliumNode,
            &bad,
            false,
            &mut reports,
        );
        assert_eq!(
            b.snapshot.nodes["n1"].ipam_spec().pod_cidrs.len(),
            1,
            "the last good version stays"
        );
        let problem = &b.snapshot.problems[&PathBuf::from("ciliumnodes/n1")];
        assert!(problem.contains("spec.ipam.podCIDRs[1]"), "{problem}");
        assert_eq!(reports.len(), 1, "one Event for the problem");
        apply(
            &mut b,
            "n1",
            Resource::CiliumNode,
            &bad,
            false,
            &mut reports,
        );
        assert_eq!(reports.len(), 1, "reported once");
        assert_eq!(b.versions.len(), 2, "both raw versions are write bases");
        apply(
            &mut b,
            "n1",
            Resource::CiliumNode,
            &good,
            false,
            &mut reports,
        );
        assert!(b.snapshot.problems.is_empty());
    }

    #[test]
    fn pods_are_keyed_by_namespace_and_deleted() {
        let mut b = Builder::default();
        let mut reports = Vec::new();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"nodeName": "n1"}});
        apply(&mut b, "n1", Resource::Pod, &pod, false, &mut reports);
        assert!(
            b.snapshot
                .pods
                .contains_key(&("ns".to_owned(), "p".to_owned()))
        );
        apply(&mut b, "n1", Resource::Pod, &pod, true, &mut reports);
        assert!(b.snapshot.pods.is_empty());
    }
}

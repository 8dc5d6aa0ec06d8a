//! The Kubernetes store: watches (the own CiliumNode by `metadata.name=`, every other
//! CiliumNode, this node's pods by `spec.nodeName=`, namespaces, CiliumPodIPPools,
//! CiliumNodeConfigs, CiliumEndpoints and CiliumIdentities) with kube's default backoff, folded
//! into one [`Snapshot`] that is republished after every change once each watch has listed. An object that does not decode keeps its last good version and is
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

use futures::{FutureExt as _, Stream, StreamExt as _};
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
use crate::{
    crd::{
        endpoint::CiliumEndpoint,
        identity::CiliumIdentity,
        meta::{Namespace, Pod},
        node::CiliumNode,
        nodeconfig::CiliumNodeConfig,
        pool::CiliumPodIPPool,
    },
    store::{EndpointSummary, NodeWrite, Snapshot, Store, StoreError, WriteStats},
};

/// How many recent versions of the own CiliumNode are kept as write bases.
const VERSIONS_KEPT: usize = 32;
/// Least time between two snapshots a watch publishes during a burst of events.
const PUBLISH_INTERVAL: Duration = Duration::from_millis(100);
/// Most events folded into one snapshot once [`PUBLISH_INTERVAL`] has passed, so that a watch
/// whose next event is always ready still publishes.
const BATCH_MAX: usize = 4096;

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

/// One watch of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Watch {
    /// The own CiliumNode (field selector): IPAM reads it, the writer bases writes on it.
    OwnNode,
    /// Every other CiliumNode (routes and IPCache entries for remote nodes).
    Nodes,
    Pods,
    Namespaces,
    Pools,
    NodeConfigs,
    Endpoints,
    Identities,
}

impl Watch {
    const ALL: [Self; 8] = [
        Self::OwnNode,
        Self::Nodes,
        Self::Pods,
        Self::Namespaces,
        Self::Pools,
        Self::NodeConfigs,
        Self::Endpoints,
        Self::Identities,
    ];

    const fn resource(self) -> Resource {
        match self {
            Self::OwnNode | Self::Nodes => Resource::CiliumNode,
            Self::Pods => Resource::Pod,
            Self::Namespaces => Resource::Namespace,
            Self::Pools => Resource::CiliumPodIpPool,
            Self::NodeConfigs => Resource::CiliumNodeConfig,
            Self::Endpoints => Resource::CiliumEndpoint,
            Self::Identities => Resource::CiliumIdentity,
        }
    }

    fn config(self, node_name: &str) -> watcher::Config {
        match self {
            Self::OwnNode => {
                watcher::Config::default().fields(&format!("metadata.name={node_name}"))
            }
            Self::Nodes => {
                watcher::Config::default().fields(&format!("metadata.name!={node_name}"))
            }
            Self::Pods => watcher::Config::default().fields(&format!("spec.nodeName={node_name}")),
            _ => watcher::Config::default(),
        }
    }
}

/// What the watches have seen so far.
#[derive(Debug, Default)]
struct Builder {
    snapshot: Snapshot,
    synced: BTreeSet<Watch>,
    /// Recent raw versions of the own CiliumNode by resourceVersion, newest last.
    versions: VecDeque<(String, Value)>,
    /// Problems already turned into an Event (so each is reported once).
    reported: BTreeSet<String>,
}

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
        for watch in Watch::ALL {
            let api = watch.resource().all(&inner.client);
            let stream = watcher::watcher(api, watch.config(node_name)).default_backoff();
            tokio::spawn(watch_loop(Arc::clone(&inner), watch, stream));
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

    /// The client the store uses (for the endpoint publisher).
    #[must_use]
    pub fn client(&self) -> Client {
        self.inner.client.clone()
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
    watch: Watch,
    stream: impl Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send,
) {
    let resource = watch.resource();
    let mut stream = std::pin::pin!(stream);
    let mut buffer: Vec<Received> = Vec::new();
    let mut last_publish: Option<tokio::time::Instant> = None;
    while let Some(first) = stream.next().await {
        let mut reports = Vec::new();
        let mut changed = false;
        let mut next = Some(first);
        let mut folded = 0;
        // A lone event is published at once. In a burst (a large cluster's CiliumEndpoints
        // arriving, churn) events are folded in until PUBLISH_INTERVAL has passed since the
        // last publish and then while one is ready, up to BATCH_MAX: each publish copies the
        // snapshot and re-syncs the daemon, so a burst of N objects must not cost N of them,
        // and a watch that never pauses must still publish.
        while let Some(item) = next.take() {
            match item {
                Ok(event) => {
                    let mut builder = lock(&inner.state);
                    changed |= fold(
                        &inner,
                        &mut builder,
                        watch,
                        event,
                        &mut buffer,
                        &mut reports,
                    );
                }
                Err(error) => {
                    if let Some(fatal) = refused(resource, &error) {
                        warn!(error = %fatal, "giving up on this watch");
                        inner.fatal.send_replace(Some(Arc::new(fatal)));
                        return;
                    }
                    warn!(%error, resource = resource.plural(), "watch failed; retrying with backoff");
                }
            }
            folded += 1;
            let due = last_publish.map(|t| t + PUBLISH_INTERVAL);
            next = match due {
                Some(due) if tokio::time::Instant::now() < due => {
                    tokio::time::timeout_at(due, stream.next())
                        .await
                        .ok()
                        .flatten()
                }
                _ if folded < BATCH_MAX => stream.next().now_or_never().flatten(),
                _ => None,
            };
        }
        if changed {
            let builder = lock(&inner.state);
            let mut snapshot = builder.snapshot.clone();
            snapshot.node_name.clone_from(&inner.node_name);
            snapshot.synced = Watch::ALL.iter().all(|w| builder.synced.contains(w));
            drop(builder);
            inner.snapshots.send_replace(Arc::new(snapshot));
            last_publish = Some(tokio::time::Instant::now());
        }
        for (doc, reason) in reports {
            super::events::report_invalid(&inner.client, &doc, &reason).await;
        }
    }
}

/// Fold one watch event into the snapshot being built (a re-list is buffered, decoded, until it
/// is complete, then replaces what the watch delivered before). Whether the snapshot may have
/// changed (a buffered object has not changed it yet).
fn fold(
    inner: &Inner,
    builder: &mut Builder,
    watch: Watch,
    event: Event<DynamicObject>,
    buffer: &mut Vec<Received>,
    reports: &mut Vec<(Value, String)>,
) -> bool {
    match event {
        Event::Init => buffer.clear(),
        Event::InitApply(object) => {
            buffer.push(receive(watch, &to_json(&object)));
            return false;
        }
        Event::InitDone => {
            clear(&mut builder.snapshot, watch, &inner.node_name);
            for received in buffer.drain(..) {
                install(builder, &inner.node_name, watch, received, reports);
            }
            // A large re-list must not keep its buffer's capacity for the agent's lifetime.
            buffer.shrink_to_fit();
            builder.synced.insert(watch);
        }
        Event::Apply(object) => {
            apply(
                builder,
                &inner.node_name,
                watch,
                &to_json(&object),
                false,
                reports,
            );
        }
        Event::Delete(object) => {
            apply(
                builder,
                &inner.node_name,
                watch,
                &to_json(&object),
                true,
                reports,
            );
        }
    }
    true
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

/// Forget what `watch` delivered (it is about to deliver a full list again).
fn clear(snapshot: &mut Snapshot, watch: Watch, node_name: &str) {
    match watch {
        Watch::OwnNode => drop(snapshot.nodes.remove(node_name)),
        Watch::Nodes => {
            snapshot.nodes = snapshot
                .nodes
                .get(node_name)
                .map(|n| imbl::OrdMap::unit(node_name.to_owned(), n.clone()))
                .unwrap_or_default();
        }
        Watch::Pods => snapshot.pods.clear(),
        Watch::Namespaces => snapshot.namespaces.clear(),
        Watch::Pools => snapshot.pools.clear(),
        Watch::NodeConfigs => snapshot.node_configs.clear(),
        Watch::Endpoints => snapshot.endpoints.clear(),
        Watch::Identities => snapshot.identities.clear(),
    }
    let prefix = format!("{}/", watch.resource().plural());
    let own_key = Resource::CiliumNode.key(None, node_name);
    snapshot.problems.retain(|k, _| {
        let k = k.to_string_lossy();
        let is_own = k == own_key;
        !k.starts_with(&prefix)
            || (watch == Watch::OwnNode && !is_own)
            || (watch == Watch::Nodes && is_own)
    });
}

/// One object from a watch, decoded as far as the snapshot keeps it.
struct Received {
    name: String,
    namespace: String,
    object: Result<Object, String>,
    /// The document itself, kept only where it is needed: every version of the own CiliumNode
    /// (write bases) and a CiliumNode that does not decode (its Event).
    raw: Option<Value>,
}

/// What the snapshot keeps of an object (boxed: a re-list buffers one per object).
enum Object {
    Node(Box<CiliumNode>),
    Pod(Box<Pod>),
    Namespace(Box<Namespace>),
    Pool(Box<CiliumPodIPPool>),
    NodeConfig(Box<CiliumNodeConfig>),
    Endpoint(Arc<EndpointSummary>),
    Identity(Box<CiliumIdentity>),
}

/// `metadata.<field>` of `doc`, empty when missing.
fn meta(doc: &Value, field: &str) -> String {
    doc["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn receive(watch: Watch, doc: &Value) -> Received {
    let object = match watch.resource() {
        Resource::CiliumNode => decode(doc).map(Object::Node),
        Resource::Pod => decode(doc).map(Object::Pod),
        Resource::Namespace => decode(doc).map(Object::Namespace),
        Resource::CiliumPodIpPool => decode(doc).map(Object::Pool),
        Resource::CiliumNodeConfig => decode(doc).map(Object::NodeConfig),
        Resource::CiliumEndpoint => decode::<CiliumEndpoint>(doc)
            .map(|cep| Object::Endpoint(Arc::new(EndpointSummary::from(&cep)))),
        Resource::CiliumIdentity => decode(doc).map(Object::Identity),
        Resource::Node | Resource::Event => Err("not watched".to_owned()),
    };
    let keep_raw =
        watch == Watch::OwnNode || (watch.resource() == Resource::CiliumNode && object.is_err());
    Received {
        name: meta(doc, "name"),
        namespace: meta(doc, "namespace"),
        object,
        raw: keep_raw.then(|| doc.clone()),
    }
}

/// Fold one object (or its deletion) into the snapshot.
fn apply(
    builder: &mut Builder,
    node_name: &str,
    watch: Watch,
    doc: &Value,
    deleted: bool,
    reports: &mut Vec<(Value, String)>,
) {
    if deleted {
        let (name, namespace) = (meta(doc, "name"), meta(doc, "namespace"));
        remove(builder, node_name, watch, name, namespace);
    } else {
        install(builder, node_name, watch, receive(watch, doc), reports);
    }
}

fn remove(builder: &mut Builder, node_name: &str, watch: Watch, name: String, namespace: String) {
    if watch == Watch::Nodes && name == node_name {
        // The own CiliumNode comes from its own watch only.
        return;
    }
    let resource = watch.resource();
    let snapshot = &mut builder.snapshot;
    snapshot
        .problems
        .remove(&PathBuf::from(resource.key(Some(&namespace), &name)));
    match resource {
        Resource::CiliumNode => drop(snapshot.nodes.remove(&name)),
        Resource::Pod => drop(snapshot.pods.remove(&(namespace, name))),
        Resource::Namespace => drop(snapshot.namespaces.remove(&name)),
        Resource::CiliumPodIpPool => drop(snapshot.pools.remove(&name)),
        Resource::CiliumNodeConfig => drop(snapshot.node_configs.remove(&(namespace, name))),
        Resource::CiliumEndpoint => drop(snapshot.endpoints.remove(&(namespace, name))),
        Resource::CiliumIdentity => drop(snapshot.identities.remove(&name)),
        Resource::Node | Resource::Event => {}
    }
}

/// Put one object into the snapshot. Undecodable objects keep their last good version and are
/// reported; CiliumNodes' problems are also returned for an Event.
fn install(
    builder: &mut Builder,
    node_name: &str,
    watch: Watch,
    received: Received,
    reports: &mut Vec<(Value, String)>,
) {
    let Received {
        name,
        namespace,
        object,
        raw,
    } = received;
    if watch == Watch::Nodes && name == node_name {
        // The own CiliumNode comes from its own watch only.
        return;
    }
    if watch == Watch::OwnNode
        && let Some(doc) = &raw
    {
        remember(builder, doc);
    }
    let key = watch.resource().key(Some(&namespace), &name);
    let snapshot = &mut builder.snapshot;
    match object {
        Ok(object) => {
            match object {
                Object::Node(n) => drop(snapshot.nodes.insert(name, *n)),
                Object::Pod(p) => drop(snapshot.pods.insert((namespace, name), *p)),
                Object::Namespace(n) => drop(snapshot.namespaces.insert(name, *n)),
                Object::Pool(p) => drop(snapshot.pools.insert(name, *p)),
                Object::NodeConfig(c) => {
                    drop(snapshot.node_configs.insert((namespace, name), *c));
                }
                Object::Endpoint(e) => drop(snapshot.endpoints.insert((namespace, name), e)),
                Object::Identity(i) => drop(snapshot.identities.insert(name, *i)),
            }
            snapshot.problems.remove(&PathBuf::from(&key));
            debug!(object = %key, "updated");
        }
        Err(reason) => {
            warn!(object = %key, %reason, "object does not decode; keeping its last good version and never rewriting the field");
            snapshot
                .problems
                .insert(PathBuf::from(&key), reason.clone());
            if let Some(doc) = raw.filter(|_| watch.resource() == Resource::CiliumNode)
                && builder.reported.insert(format!("{key}: {reason}"))
            {
                reports.push((doc, reason));
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
        apply(&mut b, "n1", Watch::OwnNode, &good, false, &mut reports);
        let bad = json!({"metadata": {"name": "n1", "resourceVersion": "2"},
            "spec": {"ipam": {"podCIDRs": ["10.0.0.0/24", "nope"]}}});
        apply(&mut b, "n1", Watch::OwnNode, &bad, false, &mut reports);
        assert_eq!(
            b.snapshot.nodes["n1"].ipam_spec().pod_cidrs.len(),
            1,
            "the last good version stays"
        );
        let problem = &b.snapshot.problems[&PathBuf::from("ciliumnodes/n1")];
        assert!(problem.contains("spec.ipam.podCIDRs[1]"), "{problem}");
        assert_eq!(reports.len(), 1, "one Event for the problem");
        apply(&mut b, "n1", Watch::OwnNode, &bad, false, &mut reports);
        assert_eq!(reports.len(), 1, "reported once");
        assert_eq!(b.versions.len(), 2, "both raw versions are write bases");
        apply(&mut b, "n1", Watch::OwnNode, &good, false, &mut reports);
        assert!(b.snapshot.problems.is_empty());
    }

    #[test]
    fn pods_are_keyed_by_namespace_and_deleted() {
        let mut b = Builder::default();
        let mut reports = Vec::new();
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"nodeName": "n1"}});
        apply(&mut b, "n1", Watch::Pods, &pod, false, &mut reports);
        assert!(
            b.snapshot
                .pods
                .contains_key(&("ns".to_owned(), "p".to_owned()))
        );
        apply(&mut b, "n1", Watch::Pods, &pod, true, &mut reports);
        assert!(b.snapshot.pods.is_empty());
    }
}

//! The Kubernetes store: watches (the own CiliumNode by `metadata.name=`, every other
//! CiliumNode, this node's pods by `spec.nodeName=`, namespaces, CiliumPodIPPools,
//! CiliumNodeConfigs, CiliumEndpoints and CiliumIdentities) with kube's default backoff, folded
//! into one [`Snapshot`] that is republished after every change once each watch has listed. An object that does not decode keeps its last good version and is
//! reported (log, `Snapshot::problems`, and an Event for the own CiliumNode). A 401/403 from
//! any watch is fatal: the agent cannot work without the permission and says which one (403)
//! or which credential the API server rejects (401).
//!
//! Events are folded into the snapshot by [`super::fold`]; writes go through one task
//! ([`super::writer`]); a CiliumNode deleted while the agent runs is created again by
//! [`super::recreate`]; this file owns the watches and the shared state. A failed write
//! reaches the [`Store`] trait as `StoreError::Kube` with the typed [`K8sError`] as its source.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
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
use tracing::warn;

use super::{
    K8sError, Resource,
    fold::{self, Builder},
    recreate, writer,
};
use crate::{
    metrics::WriteStats,
    store::{NodeWrite, Snapshot, Store, StoreError},
};

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
    /// The own CiliumNode is gone (watch or a 404): [`super::recreate`] creates it again.
    pub(super) gone: Notify,
    /// The agent is shutting down: the CiliumNode is never created again.
    pub(super) closing: AtomicBool,
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
pub(super) enum Watch {
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

    pub(super) const fn resource(self) -> Resource {
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

impl KubeStore {
    /// Start the watches and the writer on the current runtime; returns at once (see
    /// [`KubeStore::wait_synced`]). `seeded` is the own CiliumNode as node discovery left it:
    /// with it, a CiliumNode deleted while the agent runs is created again from the newest
    /// version seen (`auto-create-cilium-node-resource`); without it, someone else must.
    #[must_use]
    pub fn open(
        client: Client,
        node_name: &str,
        debounce: Duration,
        seeded: Option<Value>,
    ) -> Self {
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
            gone: Notify::new(),
            closing: AtomicBool::new(false),
        });
        if let Some(doc) = seeded {
            inner.remember(&doc);
            tokio::spawn(recreate::run(Arc::clone(&inner)));
        }
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

    /// The agent is shutting down: from now on a deleted CiliumNode stays deleted.
    pub fn close(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
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
            .map_err(store_error)
    }
}

/// A failed write as the [`Store`] trait reports it, with the typed [`K8sError`] as its source
/// (so a caller can still tell a 409 Conflict from a 5xx).
fn store_error(error: K8sError) -> StoreError {
    StoreError::Kube {
        source: Box::new(error),
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
        fold::remember(&mut lock(&self.state), doc);
    }

    /// The own CiliumNode is gone (its watch says so, or a request answered 404): have it
    /// created again, unless the agent is shutting down.
    pub(super) fn node_gone(&self) {
        if !self.closing() {
            self.gone.notify_one();
        }
    }

    /// Whether the agent is shutting down.
    pub(super) fn closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}

async fn watch_loop(
    inner: Arc<Inner>,
    watch: Watch,
    stream: impl Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send,
) {
    let resource = watch.resource();
    let mut stream = std::pin::pin!(stream);
    let mut buffer: Vec<fold::Received> = Vec::new();
    let mut last_publish: Option<tokio::time::Instant> = None;
    while let Some(first) = stream.next().await {
        let mut reports = Vec::new();
        let mut changed = false;
        let mut next = Some(first);
        let mut folded = 0;
        // A lone event is published at once. In a burst (a large cluster's CiliumEndpoints
        // arriving, churn) events are folded in until PUBLISH_INTERVAL has passed since the
        // last publish and then while one is ready, up to BATCH_MAX: each publish wakes the
        // daemon's sync, so a burst of N objects must not cost N of them, and a watch that
        // never pauses must still publish.
        while let Some(item) = next.take() {
            match item {
                Ok(event) => {
                    let mut builder = lock(&inner.state);
                    changed |= fold::fold(
                        &inner.node_name,
                        &mut builder,
                        watch,
                        event,
                        &mut buffer,
                        &mut reports,
                    );
                    let gone = std::mem::take(&mut builder.own_gone);
                    drop(builder);
                    if gone {
                        inner.node_gone();
                    }
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
    super::refusal(code, verb, resource.plural()).map(|r| K8sError::Refused(Box::new(r)))
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    fn write_failed(code: u16) -> StoreError {
        store_error(K8sError::from_api(
            "update",
            "ciliumnodes/status",
            kube::Error::Api(
                kube::core::Status::failure("no", "Conflict")
                    .with_code(code)
                    .boxed(),
            ),
        ))
    }

    #[test]
    fn a_failed_write_keeps_the_kubernetes_error_as_its_source() {
        let conflict = write_failed(409);
        let source = conflict
            .source()
            .and_then(|s| s.downcast_ref::<K8sError>())
            .expect("the K8sError is the source");
        let K8sError::Api { source: api, .. } = source else {
            panic!("not an API error: {source:?}");
        };
        assert_eq!(weft_k8s::client::status_code(api), Some(409));
        let overloaded = write_failed(503);
        let source = overloaded
            .source()
            .and_then(|s| s.downcast_ref::<K8sError>())
            .expect("the K8sError is the source");
        assert!(matches!(source, K8sError::Api { source: api, .. }
            if weft_k8s::client::status_code(api) == Some(503)));
        assert_eq!(
            crate::error::chain(&conflict),
            format!(
                "writing CiliumNode: {}",
                crate::error::chain(source_of(&conflict))
            ),
            "the chain says it once: the text is the step, the source the cause"
        );
    }

    fn source_of(error: &StoreError) -> &(dyn std::error::Error + 'static) {
        error.source().expect("source")
    }
}

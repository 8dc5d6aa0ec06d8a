//! The embedded store: Kubernetes-shaped documents in a directory (`weft-agent run --store
//! DIR`), for a single host without an API server. A user can paste a real CiliumNode there.
//!
//! One task watches the directory with inotify and republishes a snapshot after any change
//! (the directory is small; it is re-read whole). A document that does not parse is reported
//! in `Snapshot::problems` and its last good version is kept. One writer task owns the agent's
//! writes: it coalesces the agent's write-backs, waits out the debounce interval, patches only
//! the owned fields of the own CiliumNode and replaces the file atomically, only when it
//! changes, and never touches a document that does not parse.
//!
//! With an in-process operator ([`EmbeddedStore::start_operator`]) the watch task also runs
//! the operator's allocator after every read and writes its parts (`spec.ipam.podCIDRs`,
//! `spec.ipam.pools.allocated`, `status.ipam.operator-status.error`) the same way, under the
//! same lock. Both write `spec.ipam.pools`, so the agent's part is applied only where the
//! document still holds what the agent read (the read its base names): otherwise the
//! operator added or took a block since, and the agent recomputes from the newer read, which
//! comes next. The operator always computes from the document it is about to write. The
//! writer counts into `metrics::WriteStats`, as the Kubernetes store's does.

pub mod docs;
pub mod operator;

use std::{
    collections::{BTreeMap, VecDeque},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::StreamExt as _;
use inotify::{Inotify, WatchMask};
use tokio::{
    sync::{Notify, watch},
    time::Instant,
};
use tracing::{debug, info, warn};

use self::{
    docs::{DocKey, Kind},
    operator::InProcessOperator,
};
use super::{EMBEDDED_BASE_PREFIX, NodeWrite, Snapshot, Store, StoreError};
use crate::{
    crd::{ipam::IpamPoolSpec, node::CiliumNode},
    metrics::WriteStats,
};

/// Default debounce of CiliumNode writes (Cilium's `--ipam-cilium-node-update-rate`).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(15);

/// How many reads' `spec.ipam.pools` are kept to check a write's base against.
const KEPT_BASES: usize = 64;

/// A store over a directory of documents.
#[derive(Debug, Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    node_name: String,
    snapshots: watch::Sender<Arc<Snapshot>>,
    pending: Mutex<Pending>,
    /// Held for a whole write-back, so the writer task, `flush` and the operator never
    /// interleave.
    writing: Mutex<()>,
    wake: Notify,
    debounce: Duration,
    stats: WriteStats,
    /// The own node's `spec.ipam.pools` in each recent read, by [`Snapshot::revision`].
    bases: Mutex<VecDeque<(u64, IpamPoolSpec)>>,
    /// The operator's allocator, when it runs in-process.
    operator: Mutex<Option<InProcessOperator>>,
    /// The revision of the newest read the in-process operator has acted on.
    operated: watch::Sender<u64>,
}

/// The agent's write-back waiting for the writer.
#[derive(Debug, Default)]
struct Pending {
    write: Option<NodeWrite>,
    /// The read the `pools` part was computed from (`None`: apply it whatever the document
    /// holds, for callers that name no read).
    pools_base: Option<u64>,
}

impl Pending {
    /// Merge `write` (based on `base`) over what is pending.
    fn merge(&mut self, write: NodeWrite, base: Option<u64>) {
        if write.pools.is_some() {
            self.pools_base = base;
        }
        self.write = Some(super::merge_writes(self.write.take(), write));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EmbeddedStore {
    /// Read `root` once, then keep watching it and writing back (tasks on the current runtime).
    ///
    /// # Errors
    /// `root` is not a readable directory, or inotify cannot watch it.
    pub fn open(root: &Path, node_name: &str, debounce: Duration) -> Result<Self, StoreError> {
        let meta = std::fs::metadata(root).map_err(|source| StoreError::Dir {
            path: root.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(StoreError::Dir {
                path: root.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        let mut first = load(root, node_name, &Snapshot::default())?;
        first.revision = 1;
        let bases = VecDeque::from([(1, own_pools(&first))]);
        let (snapshots, _) = watch::channel(Arc::new(first));
        let inner = Arc::new(Inner {
            root: root.to_path_buf(),
            node_name: node_name.to_owned(),
            snapshots,
            pending: Mutex::new(Pending::default()),
            writing: Mutex::new(()),
            wake: Notify::new(),
            debounce,
            stats: WriteStats::default(),
            bases: Mutex::new(bases),
            operator: Mutex::new(None),
            operated: watch::channel(0).0,
        });
        let inotify = Inotify::init().map_err(|source| StoreError::Watch {
            path: root.to_path_buf(),
            source,
        })?;
        add_watches(inotify.watches(), root)?;
        tokio::spawn(watch_loop(Arc::clone(&inner), inotify));
        tokio::spawn(write_loop(Arc::clone(&inner)));
        Ok(Self { inner })
    }

    /// The directory this store reads.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The writer's counters.
    #[must_use]
    pub fn stats(&self) -> &WriteStats {
        &self.inner.stats
    }

    /// The [`Snapshot::revision`] of the newest read the in-process operator has acted on, its
    /// write (if any) done; 0 before its first pass. Lets a caller wait for the operator's
    /// answer to a change instead of guessing how long it takes.
    #[must_use]
    pub fn operated(&self) -> watch::Receiver<u64> {
        self.inner.operated.subscribe()
    }

    /// Run the operator's allocator in-process from now on: once now, then after every read
    /// of the directory, writing its parts of the own CiliumNode.
    pub fn start_operator(&self, operator: InProcessOperator) {
        *lock(&self.inner.operator) = Some(operator);
        operate(&self.inner);
    }
}

impl Store for EmbeddedStore {
    fn snapshots(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.inner.snapshots.subscribe()
    }

    /// `base_version` is [`Snapshot::write_base`] of the read the write was computed from;
    /// its `pools` part is applied only while the document's `spec.ipam.pools` is still what
    /// that read held. Any other base (`""`) applies every part as it is.
    fn write_node(&self, write: NodeWrite, base_version: &str) {
        let base = base_version
            .strip_prefix(EMBEDDED_BASE_PREFIX)
            .and_then(|n| n.parse().ok());
        lock(&self.inner.pending).merge(write, base);
        self.inner.wake.notify_one();
    }

    async fn flush(&self) -> Result<(), StoreError> {
        write_pending(&self.inner)
    }
}

/// The own node's `spec.ipam.pools` in `snapshot` (empty when it has none).
fn own_pools(snapshot: &Snapshot) -> IpamPoolSpec {
    snapshot
        .own_node()
        .map(|n| n.ipam_spec().pools().clone())
        .unwrap_or_default()
}

/// Read `root` once, without watching (offline tools such as `ipam simulate`).
///
/// # Errors
/// `root` cannot be read.
pub fn load_snapshot(root: &Path, node_name: &str) -> Result<Snapshot, StoreError> {
    load(root, node_name, &Snapshot::default())
}

/// The own CiliumNode document with `write` applied, as the writer would store it.
///
/// # Errors
/// The document does not exist or does not parse.
pub fn render_node(
    root: &Path,
    node_name: &str,
    write: &NodeWrite,
) -> Result<serde_json::Value, StoreError> {
    let path = node_path(root, node_name)?;
    let mut doc = docs::read_value(&path)?;
    let _ = super::writeback::apply(&mut doc, write);
    Ok(doc)
}

fn node_path(root: &Path, node_name: &str) -> Result<PathBuf, StoreError> {
    let dir = root.join(Kind::CiliumNode.plural());
    ["yaml", "yml", "json"]
        .iter()
        .map(|ext| dir.join(format!("{node_name}.{ext}")))
        .find(|p| p.exists())
        .ok_or_else(|| StoreError::NoNode {
            name: node_name.to_owned(),
            path: dir.join(format!("{node_name}.yaml")),
        })
}

/// Read every document under `root`. Broken documents keep their last good version from
/// `previous` and are listed in `problems`.
fn load(root: &Path, node_name: &str, previous: &Snapshot) -> Result<Snapshot, StoreError> {
    let mut snap = Snapshot {
        node_name: node_name.to_owned(),
        synced: true,
        ..Snapshot::default()
    };
    for (key, path) in docs::list(root)? {
        if let Err(error) = load_one(&mut snap, &key, &path) {
            warn!(%error, "store document skipped");
            snap.problems.insert(path, error.to_string());
            keep_previous(&mut snap, previous, &key);
        }
    }
    Ok(snap)
}

fn load_one(snap: &mut Snapshot, key: &DocKey, path: &Path) -> Result<(), StoreError> {
    let value = docs::read_value(path)?;
    let nsname = (key.namespace.clone(), key.name.clone());
    match key.kind {
        Kind::CiliumNode => {
            snap.nodes
                .insert(key.name.clone(), docs::decode(path, value)?);
        }
        Kind::CiliumPodIpPool => {
            snap.pools
                .insert(key.name.clone(), docs::decode(path, value)?);
        }
        Kind::CiliumNodeConfig => {
            snap.node_configs.insert(nsname, docs::decode(path, value)?);
        }
        Kind::Pod => {
            snap.pods.insert(nsname, docs::decode(path, value)?);
        }
        Kind::Namespace => {
            snap.namespaces
                .insert(key.name.clone(), docs::decode(path, value)?);
        }
    }
    Ok(())
}

fn keep_previous(snap: &mut Snapshot, previous: &Snapshot, key: &DocKey) {
    let nsname = (key.namespace.clone(), key.name.clone());
    match key.kind {
        Kind::CiliumNode => {
            if let Some(node) = previous.nodes.get(&key.name) {
                snap.nodes.insert(key.name.clone(), node.clone());
            }
        }
        Kind::CiliumPodIpPool => copy(&mut snap.pools, &previous.pools, &key.name),
        Kind::CiliumNodeConfig => copy(&mut snap.node_configs, &previous.node_configs, &nsname),
        Kind::Pod => copy(&mut snap.pods, &previous.pods, &nsname),
        Kind::Namespace => copy(&mut snap.namespaces, &previous.namespaces, &key.name),
    }
}

fn copy<K: Ord + Clone, V: Clone>(to: &mut BTreeMap<K, V>, from: &BTreeMap<K, V>, key: &K) {
    if let Some(v) = from.get(key) {
        to.insert(key.clone(), v.clone());
    }
}

/// Watch `root`, every kind directory and every namespace directory that exists now.
fn add_watches(mut watches: inotify::Watches, root: &Path) -> Result<(), StoreError> {
    let mask = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_TO
        | WatchMask::MOVED_FROM;
    let mut dirs = vec![root.to_path_buf()];
    for kind in Kind::ALL {
        let dir = root.join(kind.plural());
        if kind.namespaced()
            && let Ok(entries) = std::fs::read_dir(&dir)
        {
            dirs.extend(
                entries
                    .filter_map(|e| Some(e.ok()?.path()))
                    .filter(|p| p.is_dir()),
            );
        }
        dirs.push(dir);
    }
    for dir in dirs.into_iter().filter(|d| d.is_dir()) {
        watches
            .add(&dir, mask)
            .map_err(|source| StoreError::Watch {
                path: dir.clone(),
                source,
            })?;
    }
    Ok(())
}

async fn watch_loop(inner: Arc<Inner>, inotify: Inotify) {
    let mut stream = match inotify.into_event_stream(vec![0u8; 64 * 1024]) {
        Ok(stream) => stream,
        Err(error) => {
            warn!(%error, root = %inner.root.display(), "cannot watch the store; changes need a restart");
            return;
        }
    };
    while stream.next().await.is_some() {
        // Let a burst of events (an editor's save, a rename) settle, then re-read once.
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Some(Some(_)) = futures::FutureExt::now_or_never(stream.next()) {}
        // Directories created since (a new namespace under pods/) get watched too; adding an
        // existing watch again is harmless.
        if let Err(error) = add_watches(stream.watches(), &inner.root) {
            warn!(%error, "watching new store directories");
        }
        // Reading and parsing the documents (and the in-process operator's fsynced write)
        // block: off the async threads.
        let work = Arc::clone(&inner);
        if let Err(error) = tokio::task::spawn_blocking(move || reread(&work)).await {
            warn!(%error, "re-reading the store");
        }
    }
}

/// Re-read the store after a change; publish the new snapshot and let the in-process
/// operator act on it.
fn reread(inner: &Inner) {
    let previous = inner.snapshots.borrow().clone();
    match load(&inner.root, &inner.node_name, &previous) {
        Ok(mut snap) => {
            snap.revision = previous.revision + 1;
            debug!(root = %inner.root.display(), revision = snap.revision, "store changed");
            let mut bases = lock(&inner.bases);
            bases.push_back((snap.revision, own_pools(&snap)));
            while bases.len() > KEPT_BASES {
                bases.pop_front();
            }
            drop(bases);
            inner.snapshots.send_replace(Arc::new(snap));
            operate(inner);
        }
        Err(error) => warn!(%error, "re-reading the store"),
    }
}

async fn write_loop(inner: Arc<Inner>) {
    let mut last_write: Option<Instant> = None;
    loop {
        inner.wake.notified().await;
        if let Some(last) = last_write {
            tokio::time::sleep_until(last + inner.debounce).await;
        }
        // The write is fsynced: off the async threads.
        let work = Arc::clone(&inner);
        match tokio::task::spawn_blocking(move || write_pending(&work)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                warn!(%error, "writing CiliumNode back; will retry on the next change");
            }
            Err(error) => warn!(%error, "writing CiliumNode back; will retry on the next change"),
        }
        last_write = Some(Instant::now());
    }
}

/// Write the pending write-back to the own CiliumNode document, if it changes it.
fn write_pending(inner: &Inner) -> Result<(), StoreError> {
    let _writing = lock(&inner.writing);
    let Pending { write, pools_base } = std::mem::take(&mut *lock(&inner.pending));
    let Some(mut write) = write else {
        return Ok(());
    };
    let path = node_path(&inner.root, &inner.node_name)?;
    let (mut doc, node) = match read_node(&path) {
        Ok(read) => read,
        Err(error) => {
            // Never overwrite a document that does not parse; keep the write for later, under
            // anything newer.
            let mut slot = lock(&inner.pending);
            let newer = std::mem::take(&mut *slot);
            slot.merge(write, pools_base);
            if let Some(newer_write) = newer.write {
                slot.merge(newer_write, newer.pools_base);
            }
            drop(slot);
            inner
                .stats
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(error);
        }
    };
    if write.pools.is_some() && !base_holds(inner, pools_base, &node) {
        debug!(
            base = ?pools_base,
            newest = inner.snapshots.borrow().revision,
            "spec.ipam.pools changed since the agent read it (the in-process operator wrote it); \
             the agent recomputes from the newer read"
        );
        write.pools = None;
    }
    if super::writeback::apply(&mut doc, &write) {
        docs::write_atomic(&path, &doc).inspect_err(|_| {
            inner
                .stats
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })?;
        inner.stats.wrote();
        info!(path = %path.display(), "wrote CiliumNode");
    } else {
        inner
            .stats
            .unchanged
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(())
}

/// The own CiliumNode document as a value and decoded (it must parse to be written).
fn read_node(path: &Path) -> Result<(serde_json::Value, CiliumNode), StoreError> {
    let doc = docs::read_value(path)?;
    let node = docs::decode::<CiliumNode>(path, doc.clone())?;
    Ok((doc, node))
}

/// Whether `node` still holds the `spec.ipam.pools` of read `base` (no base: always).
fn base_holds(inner: &Inner, base: Option<u64>, node: &CiliumNode) -> bool {
    let Some(base) = base else {
        return true;
    };
    let bases = lock(&inner.bases);
    let seen = bases.iter().find(|(revision, _)| *revision == base);
    seen.is_some_and(|(_, pools)| pools == node.ipam_spec().pools())
}

/// Run the in-process operator (if any) on the newest read and the own document as it is
/// now, and write its parts when they change the document.
fn operate(inner: &Inner) {
    let _writing = lock(&inner.writing);
    let mut slot = lock(&inner.operator);
    let Some(operator) = slot.as_mut() else {
        return;
    };
    let snapshot = inner.snapshots.borrow().clone();
    let read = node_path(&inner.root, &inner.node_name).map(|path| {
        let read = read_node(&path);
        (path, read)
    });
    let (path, own) = match read {
        Err(StoreError::NoNode { .. }) => {
            let _ = operator.reconcile(&snapshot, None);
            operated(inner, snapshot.revision, false, &serde_json::Value::Null);
            return;
        }
        Err(error) => {
            warn!(%error, "in-process allocator: finding the own CiliumNode");
            return;
        }
        // Never overwrite a document that does not parse; the next read tries again.
        Ok((_, Err(error))) => {
            debug!(%error, "in-process allocator: the own CiliumNode does not parse");
            return;
        }
        Ok((path, Ok(own))) => (path, own),
    };
    let (mut doc, node) = own;
    let read_ipam = doc["spec"]["ipam"].clone();
    let Some(write) = operator.reconcile(&snapshot, Some(&node)) else {
        operated(inner, snapshot.revision, false, &read_ipam);
        return;
    };
    drop(slot);
    let mut written = false;
    if super::writeback::apply_operator(&mut doc, &write) {
        match docs::write_atomic(&path, &doc) {
            Ok(()) => {
                written = true;
                info!(path = %path.display(), "in-process allocator wrote CiliumNode");
            }
            Err(error) => {
                warn!(%error, "in-process allocator: writing CiliumNode; retried on the next change");
            }
        }
    }
    operated(inner, snapshot.revision, written, &read_ipam);
}

/// The in-process operator acted on read `revision`, in which the own node's `spec.ipam` was
/// `read_ipam`: publish it (and log it, for programs that watch the log).
fn operated(inner: &Inner, revision: u64, wrote: bool, read_ipam: &serde_json::Value) {
    debug!(revision, wrote, spec_ipam = %read_ipam, "in-process allocator: read acted on");
    inner.operated.send_replace(revision);
}

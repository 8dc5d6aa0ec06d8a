//! The embedded store: Kubernetes-shaped documents in a directory (`weft-agent run --store
//! DIR`), for a single host without an API server. A user can paste a real CiliumNode there.
//!
//! One task watches the directory with inotify and republishes a snapshot after any change
//! (the directory is small; it is re-read whole). A document that does not parse is reported
//! in `Snapshot::problems` and its last good version is kept. One writer task owns every write:
//! it coalesces the agent's write-backs, waits out the debounce interval, patches only the
//! owned fields of the own CiliumNode and replaces the file atomically, only when it changes,
//! and never touches a document that does not parse.

pub mod docs;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt as _;
use inotify::{Inotify, WatchMask};
use tokio::{
    sync::{Notify, watch},
    time::Instant,
};
use tracing::{debug, info, warn};

use self::docs::{DocKey, Kind};
use super::{NodeWrite, Snapshot, Store, StoreError};

/// Default debounce of CiliumNode writes (Cilium's `--ipam-cilium-node-update-rate`).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(15);

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
    pending: Mutex<Option<NodeWrite>>,
    /// Held for a whole write-back, so the writer task and `flush` never interleave.
    writing: Mutex<()>,
    wake: Notify,
    debounce: Duration,
    stats: super::WriteStats,
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
        let first = load(root, node_name, &Snapshot::default())?;
        let (snapshots, _) = watch::channel(Arc::new(first));
        let inner = Arc::new(Inner {
            root: root.to_path_buf(),
            node_name: node_name.to_owned(),
            snapshots,
            pending: Mutex::new(None),
            writing: Mutex::new(()),
            wake: Notify::new(),
            debounce,
            stats: super::WriteStats::default(),
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
    pub fn stats(&self) -> &super::WriteStats {
        &self.inner.stats
    }
}

impl Store for EmbeddedStore {
    fn snapshots(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.inner.snapshots.subscribe()
    }

    fn write_node(&self, write: NodeWrite, _base_version: &str) {
        let mut pending = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let merged = super::merge_writes(pending.take(), write);
        *pending = Some(merged);
        drop(pending);
        self.inner.wake.notify_one();
    }

    async fn flush(&self) -> Result<(), StoreError> {
        write_pending(&self.inner)
    }
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
        let previous = inner.snapshots.borrow().clone();
        match load(&inner.root, &inner.node_name, &previous) {
            Ok(snap) => {
                debug!(root = %inner.root.display(), "store changed");
                inner.snapshots.send_replace(Arc::new(snap));
            }
            Err(error) => warn!(%error, "re-reading the store"),
        }
    }
}

async fn write_loop(inner: Arc<Inner>) {
    let mut last_write: Option<Instant> = None;
    loop {
        inner.wake.notified().await;
        if let Some(last) = last_write {
            tokio::time::sleep_until(last + inner.debounce).await;
        }
        match write_pending(&inner) {
            Ok(()) => last_write = Some(Instant::now()),
            Err(error) => {
                warn!(%error, "writing CiliumNode back; will retry on the next change");
                last_write = Some(Instant::now());
            }
        }
    }
}

/// Write the pending write-back to the own CiliumNode document, if it changes it.
fn write_pending(inner: &Inner) -> Result<(), StoreError> {
    let _writing = inner
        .writing
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let pending = inner
        .pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let Some(write) = pending else { return Ok(()) };
    let path = node_path(&inner.root, &inner.node_name)?;
    let mut doc = match docs::read_value(&path)
        .and_then(|v| docs::decode::<crate::crd::node::CiliumNode>(&path, v.clone()).map(|_| v))
    {
        Ok(doc) => doc,
        Err(error) => {
            // Never overwrite a document that does not parse; keep the write for later.
            let mut slot = inner
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *slot = Some(super::merge_writes(
                Some(write),
                slot.take().unwrap_or_default(),
            ));
            inner
                .stats
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(error);
        }
    };
    if super::writeback::apply(&mut doc, &write) {
        docs::write_atomic(&path, &doc).inspect_err(|_| {
            inner
                .stats
                .failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })?;
        inner.stats.wrote();
        info!(path = %path.display(), "wrote CiliumNode");
    }
    Ok(())
}

//! The event loop: one task owns the manager (the block modes' [`NodeManager`] or the cloud
//! manager, both behind [`Nodes`]) and takes, in order, the events of the watches (kube's
//! `watcher` with its default backoff, so dropped watches re-list and resume):
//! CiliumPodIPPools (multi-pool), CiliumNodes, v1 Nodes, and in cloud modes Pods (pending pods
//! bound to a node raise its next allocation, Cilium's surge). A re-list is diffed against what
//! the manager knew, so objects deleted while a watch was down are released too. Fresh blocks
//! are handed out only once every CiliumNode (and pool) was listed: existing allocations are
//! re-occupied first. A deleted v1 Node deletes its CiliumNode; a periodic collection deletes
//! CiliumNodes whose Node has been missing for two passes (Cilium's `nodes-gc-interval`).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use futures::{StreamExt as _, stream::BoxStream};
use kube::{
    Client,
    api::DynamicObject,
    runtime::{
        WatchStreamExt as _,
        watcher::{self, watcher},
    },
};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{info, warn};
use weft_cluster_ipam::{
    manager::{NodeManager, PoolRefused, Write},
    node::NodeView,
    pool::PoolView,
};
use weft_k8s::{Resource, client::status_code};

use super::{OperatorK8sError, writer::Op};
use crate::{
    cloud::{CloudProvider, manager::CloudManager, view::CloudNodeView},
    metrics::Metrics,
};

/// Which watch an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Pools,
    CiliumNodes,
    Nodes,
    Pods,
}

impl Source {
    const fn plural(self) -> &'static str {
        match self {
            Self::Pools => "ciliumpodippools",
            Self::CiliumNodes => "ciliumnodes",
            Self::Nodes => "nodes",
            Self::Pods => "pods",
        }
    }
}

type Events = BoxStream<
    'static,
    (
        Source,
        Result<watcher::Event<DynamicObject>, watcher::Error>,
    ),
>;

fn watch(client: &Client, resource: Resource, source: Source) -> Events {
    watcher(resource.all(client), watcher::Config::default())
        .default_backoff()
        .map(move |e| (source, e))
        .boxed()
}

/// Per-watch bookkeeping of a (re-)list.
#[derive(Debug, Default)]
struct Listing {
    synced: bool,
    seen: Option<BTreeSet<String>>,
}

fn name_of(object: &DynamicObject) -> String {
    object.metadata.name.clone().unwrap_or_default()
}

/// The shared node manager (the metrics scrape reads it).
pub type SharedManager = Arc<Mutex<NodeManager>>;

/// Lock a manager (a panic elsewhere does not make its state unusable: every change is one
/// call).
pub fn lock<M>(manager: &Arc<Mutex<M>>) -> MutexGuard<'_, M> {
    manager.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the event loop feeds: the block allocators' [`NodeManager`] or the cloud manager.
pub trait Nodes: Send + 'static {
    /// A CiliumNode was added or changed (the object as the API server sent it).
    fn upsert(&mut self, doc: &Value) -> Vec<Write>;
    /// A CiliumNode was deleted.
    fn delete(&mut self, name: &str) -> Vec<Write>;
    /// The CiliumNodes managed.
    fn node_names(&self) -> Vec<String>;
    /// Whether the restore finished.
    fn restored(&self) -> bool;
    /// Every CiliumNode was listed once.
    fn restore_finished(&mut self) -> Vec<Write>;
    /// A pool was added or changed; the second value is why it was refused.
    fn pool_upsert(&mut self, pool: PoolView) -> (Vec<Write>, Option<PoolRefused>);
    /// A pool was deleted.
    fn pool_delete(&mut self, name: &str) -> Vec<Write>;
    /// The pools known.
    fn pool_names(&self) -> Vec<String>;
    /// Pending pods per node changed (only managers that want pods are sent them).
    fn pending_pods(&mut self, _pending: &BTreeMap<String, u64>) {}
    /// Whether the loop should watch pods (for [`Nodes::pending_pods`]).
    fn wants_pods(&self) -> bool {
        false
    }
}

impl Nodes for NodeManager {
    fn upsert(&mut self, doc: &Value) -> Vec<Write> {
        NodeManager::upsert(self, NodeView::from_json(doc))
            .into_iter()
            .collect()
    }
    fn delete(&mut self, name: &str) -> Vec<Write> {
        NodeManager::delete(self, name)
    }
    fn node_names(&self) -> Vec<String> {
        NodeManager::node_names(self).map(str::to_owned).collect()
    }
    fn restored(&self) -> bool {
        NodeManager::restored(self)
    }
    fn restore_finished(&mut self) -> Vec<Write> {
        NodeManager::restore_finished(self)
    }
    fn pool_upsert(&mut self, pool: PoolView) -> (Vec<Write>, Option<PoolRefused>) {
        NodeManager::pool_upsert(self, pool)
    }
    fn pool_delete(&mut self, name: &str) -> Vec<Write> {
        NodeManager::pool_delete(self, name)
    }
    fn pool_names(&self) -> Vec<String> {
        NodeManager::pool_names(self)
    }
}

/// The cloud manager behind the event loop (it writes through its own channel).
impl<P: CloudProvider> Nodes for CloudManager<P> {
    fn upsert(&mut self, doc: &Value) -> Vec<Write> {
        CloudManager::upsert(self, CloudNodeView::from_json(doc, P::FIELD));
        Vec::new()
    }
    fn delete(&mut self, name: &str) -> Vec<Write> {
        CloudManager::delete(self, name);
        Vec::new()
    }
    fn node_names(&self) -> Vec<String> {
        CloudManager::node_names(self)
    }
    fn restored(&self) -> bool {
        true
    }
    fn restore_finished(&mut self) -> Vec<Write> {
        Vec::new()
    }
    fn pool_upsert(&mut self, _pool: PoolView) -> (Vec<Write>, Option<PoolRefused>) {
        (Vec::new(), None)
    }
    fn pool_delete(&mut self, _name: &str) -> Vec<Write> {
        Vec::new()
    }
    fn pool_names(&self) -> Vec<String> {
        Vec::new()
    }
    fn pending_pods(&mut self, pending: &BTreeMap<String, u64>) {
        self.set_pending_pods(pending.clone());
    }
    fn wants_pods(&self) -> bool {
        true
    }
}

/// The loop's state between events.
struct Loop<M: Nodes> {
    manager: Arc<Mutex<M>>,
    writes: mpsc::UnboundedSender<Op>,
    metrics: Metrics,
    pools: Listing,
    cilium_nodes: Listing,
    nodes: Listing,
    /// v1 Nodes that exist.
    node_names: BTreeSet<String>,
    /// CiliumNodes without a Node at the last collection pass.
    gc_candidates: BTreeSet<String>,
    /// Nodes seen deleted (by an event or a re-list) and not added again: a CiliumNode of one
    /// that shows up later (its watch lagged) is deleted too.
    gone: BTreeSet<String>,
    /// Pods that are pending on a node (not host-network): `namespace/name` → node.
    pending: BTreeMap<String, String>,
    /// The same, counted per node.
    pending_per_node: BTreeMap<String, u64>,
    pods: Listing,
}

/// `namespace/name` of a pod and the node it waits on, if it is pending there and not on
/// the host network (Cilium's surge counts those).
fn pending_pod(object: &DynamicObject) -> (String, Option<String>) {
    let key = format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        name_of(object)
    );
    let node = (object.data["status"]["phase"] == "Pending"
        && object.data["spec"]["hostNetwork"] != true)
        .then(|| object.data["spec"]["nodeName"].as_str())
        .flatten()
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    (key, node)
}

impl<M: Nodes> Loop<M> {
    /// Record a pod's pending state; tells the manager when a node's count changed.
    fn pod(&mut self, key: String, node: Option<String>) {
        let old = match &node {
            Some(n) => self.pending.insert(key, n.clone()),
            None => self.pending.remove(&key),
        };
        if old == node {
            return;
        }
        if let Some(old) = old
            && let Some(count) = self.pending_per_node.get_mut(&old)
        {
            *count -= 1;
            if *count == 0 {
                self.pending_per_node.remove(&old);
            }
        }
        if let Some(node) = node {
            *self.pending_per_node.entry(node).or_default() += 1;
        }
        lock(&self.manager).pending_pods(&self.pending_per_node);
    }

    fn send(&self, writes: Vec<Write>) {
        for write in writes {
            let _ = self.writes.send(Op::Write(write));
        }
    }

    /// One collection pass: delete CiliumNodes whose Node was missing last time too.
    fn collect_garbage(&mut self) {
        let m = lock(&self.manager);
        let known = m.node_names();
        // Tombstones of Nodes whose CiliumNode is gone (or never came) have done their part.
        self.gone.retain(|n| known.contains(n));
        let missing: BTreeSet<String> = known
            .into_iter()
            .filter(|n| !self.node_names.contains(n))
            .collect();
        for name in missing.intersection(&self.gc_candidates) {
            info!(node = %name, "CiliumNode has no Node for two collection passes; deleting it");
            // Its blocks are released when the CiliumNode's deletion is seen, not before: until
            // then the object still lists them.
            let _ = self.writes.send(Op::Delete(name.clone()));
        }
        self.gc_candidates = missing.difference(&self.gc_candidates).cloned().collect();
    }

    fn apply(&mut self, source: Source, object: &DynamicObject) -> Vec<Write> {
        if source == Source::Pods {
            let (key, node) = pending_pod(object);
            if let Some(seen) = self.pods.seen.as_mut() {
                seen.insert(key.clone());
            }
            self.pod(key, node);
            return Vec::new();
        }
        let name = name_of(object);
        let mut m = lock(&self.manager);
        let listing = match source {
            Source::Pools => &mut self.pools,
            Source::CiliumNodes => &mut self.cilium_nodes,
            Source::Nodes | Source::Pods => &mut self.nodes,
        };
        if let Some(seen) = listing.seen.as_mut() {
            seen.insert(name.clone());
        }
        let doc = weft_k8s::resource::to_json(object);
        match source {
            Source::Pools => {
                let (writes, refused) = m.pool_upsert(PoolView::from_json(&doc));
                if let Some(refused) = refused {
                    let _ = self.writes.send(Op::Event {
                        object: doc,
                        reason: "InvalidPool",
                        message: weft_k8s::error::chain(&refused),
                    });
                }
                writes
            }
            Source::CiliumNodes => {
                if self.gone.contains(&name) && !self.node_names.contains(&name) {
                    info!(node = %name, "CiliumNode of a deleted Node; deleting it");
                    let _ = self.writes.send(Op::Delete(name.clone()));
                }
                m.upsert(&doc)
            }
            Source::Nodes => {
                self.gone.remove(&name);
                self.node_names.insert(name);
                Vec::new()
            }
            Source::Pods => Vec::new(),
        }
    }

    fn delete(&mut self, source: Source, object: &DynamicObject) -> Vec<Write> {
        if source == Source::Pods {
            self.pod(pending_pod(object).0, None);
            return Vec::new();
        }
        let name = &name_of(object);
        let mut m = lock(&self.manager);
        match source {
            Source::Pools => m.pool_delete(name),
            Source::CiliumNodes => {
                self.gone.remove(name);
                m.delete(name)
            }
            Source::Pods => Vec::new(),
            Source::Nodes => {
                self.node_names.remove(name);
                self.gone.insert(name.to_owned());
                if m.node_names().iter().any(|n| n == name) {
                    info!(node = %name, "Node deleted; deleting its CiliumNode");
                    // The blocks go back when the CiliumNode's deletion is seen (as in Cilium),
                    // so no other node is given one while the old object still lists it.
                    let _ = self.writes.send(Op::Delete(name.to_owned()));
                }
                Vec::new()
            }
        }
    }

    /// A (re-)list ended: what it did not show is gone; the first full listing restores.
    fn listed(&mut self, source: Source) -> Vec<Write> {
        if source == Source::Pods {
            let seen = self.pods.seen.take().unwrap_or_default();
            self.pods.synced = true;
            let gone: Vec<String> = self
                .pending
                .keys()
                .filter(|k| !seen.contains(*k))
                .cloned()
                .collect();
            for key in gone {
                self.pod(key, None);
            }
            return Vec::new();
        }
        let mut m = lock(&self.manager);
        let mut out = Vec::new();
        let listing = match source {
            Source::Pools => &mut self.pools,
            Source::CiliumNodes => &mut self.cilium_nodes,
            Source::Nodes | Source::Pods => &mut self.nodes,
        };
        let seen = listing.seen.take().unwrap_or_default();
        listing.synced = true;
        match source {
            Source::Pools => {
                for name in m.pool_names().iter().filter(|n| !seen.contains(*n)) {
                    out.extend(m.pool_delete(name));
                }
            }
            Source::CiliumNodes => {
                let gone: Vec<String> = m
                    .node_names()
                    .into_iter()
                    .filter(|n| !seen.contains(n))
                    .collect();
                for name in gone {
                    out.extend(m.delete(&name));
                }
            }
            Source::Nodes => {
                // A Node deleted while the watch was down is gone from the re-list: its
                // CiliumNode is deleted as for a delete event.
                let known = m.node_names();
                for name in self.node_names.iter().filter(|n| !seen.contains(*n)) {
                    self.gone.insert(name.clone());
                    if known.contains(name) {
                        info!(node = %name, "Node gone (seen in a re-list); deleting its CiliumNode");
                        let _ = self.writes.send(Op::Delete(name.clone()));
                    }
                }
                self.node_names.retain(|n| seen.contains(n));
            }
            Source::Pods => {}
        }
        if !m.restored() && self.pools.synced && self.cilium_nodes.synced {
            let restored = m.restore_finished();
            info!(
                nodes = m.node_names().len(),
                writes = restored.len(),
                "every CiliumNode listed; existing allocations restored"
            );
            self.metrics.resync.inc();
            out.extend(restored);
        }
        out
    }

    fn handle(&mut self, source: Source, event: watcher::Event<DynamicObject>) {
        let writes = match event {
            watcher::Event::Init => {
                self.listing(source).seen = Some(BTreeSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(object) | watcher::Event::Apply(object) => {
                self.apply(source, &object)
            }
            watcher::Event::Delete(object) => self.delete(source, &object),
            watcher::Event::InitDone => self.listed(source),
        };
        self.send(writes);
    }

    fn listing(&mut self, source: Source) -> &mut Listing {
        match source {
            Source::Pools => &mut self.pools,
            Source::CiliumNodes => &mut self.cilium_nodes,
            Source::Nodes => &mut self.nodes,
            Source::Pods => &mut self.pods,
        }
    }
}

/// Runs the loop until a watch fails for good (401/403) or `shutdown` resolves.
///
/// # Errors
/// [`OperatorK8sError::Watch`] when a watch is refused permission.
pub async fn run<M: Nodes>(
    client: Client,
    manager: Arc<Mutex<M>>,
    pool_resource: Option<Resource>,
    writes: mpsc::UnboundedSender<Op>,
    metrics: Metrics,
    gc_interval: Duration,
    shutdown: impl Future<Output = ()>,
) -> Result<(), OperatorK8sError> {
    let mut state = Loop {
        manager,
        writes,
        metrics,
        pools: Listing::default(),
        cilium_nodes: Listing::default(),
        nodes: Listing::default(),
        node_names: BTreeSet::new(),
        gc_candidates: BTreeSet::new(),
        gone: BTreeSet::new(),
        pending: BTreeMap::new(),
        pending_per_node: BTreeMap::new(),
        pods: Listing::default(),
    };
    let wants_pods = lock(&state.manager).wants_pods();
    // Pools first: a node's blocks are occupied in pools the allocator knows.
    let mut streams: Vec<Events> = Vec::new();
    if let Some(resource) = pool_resource {
        streams.push(watch(&client, resource, Source::Pools));
    } else {
        state.pools.synced = true;
    }
    streams.push(watch(&client, Resource::CiliumNode, Source::CiliumNodes));
    streams.push(watch(&client, Resource::Node, Source::Nodes));
    if wants_pods {
        streams.push(watch(&client, Resource::Pod, Source::Pods));
    }
    let mut events = futures::stream::select_all(streams);
    let collecting = !gc_interval.is_zero();
    let mut gc = tokio::time::interval(if collecting {
        gc_interval
    } else {
        Duration::from_hours(24)
    });
    gc.tick().await;
    tokio::pin!(shutdown);
    loop {
        let (source, event) = tokio::select! {
            () = &mut shutdown => return Ok(()),
            _ = gc.tick(), if collecting && state.nodes.synced => {
                state.collect_garbage();
                continue;
            }
            next = events.next() => match next {
                Some(next) => next,
                None => return Ok(()),
            },
        };
        match event {
            Ok(event) => state.handle(source, event),
            Err(error) => {
                if let watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) =
                    &error
                    && matches!(status_code(e), Some(401 | 403))
                {
                    return Err(OperatorK8sError::Watch {
                        resource: source.plural(),
                        source: error,
                    });
                }
                warn!(resource = source.plural(), %error, "watch failed; retrying with backoff");
            }
        }
    }
}

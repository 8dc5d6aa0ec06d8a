//! The asynchronous half of the cloud node manager: one pool-maintainer task per node (woken
//! by CiliumNode changes and resyncs, at most one round in flight per node, rounds folded,
//! failures retried with Cilium's backoff), a bounded number of rounds at once
//! (`--parallel-alloc-workers`), the periodic full resync of the instances, and the writes
//! that publish each node's addresses (`spec.ipam.pool`), its interfaces and static IP
//! (`status`). Decisions are [`NodeState`]'s; cloud calls are the [`CloudProvider`]'s; the
//! writes go to the one CiliumNode writer.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::sync::{Notify, Semaphore, mpsc};
use tracing::{info, warn};

use super::{CloudProvider, NodeRef, node::NodeState, view::ViewOf};

/// Interval of the full resync of every instance (Cilium's `ipam-node-interval-refresh`).
pub const RESYNC_INTERVAL: Duration = Duration::from_mins(1);
/// Least time between two rounds of one node (Cilium's trigger MinInterval).
const ROUND_INTERVAL: Duration = Duration::from_millis(10);
/// Retry after the instances API was unstable (Cilium's retry trigger).
const UNSTABLE_RETRY: Duration = Duration::from_mins(1);
/// Cap of the per-node error backoff.
const MAX_BACKOFF: Duration = Duration::from_mins(5);
/// How long a published value overrides a stale event.
const EXPECT_FOR: Duration = Duration::from_secs(30);

/// Merge patches of one CiliumNode for the writer (`spec` through the object, `status`
/// through `/status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePatch {
    /// The CiliumNode.
    pub node: String,
    /// Patch of the object (`spec.ipam.pool`, `spec.ipam.pre-allocate`).
    pub spec: Option<Value>,
    /// Patch of the status (`status.azure`, the `status.ipam` fields the operator owns).
    pub status: Option<Value>,
    /// Warning Events to post on the CiliumNode.
    pub events: Vec<super::Notice>,
}

/// The manager's settings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Rounds in flight at once (`--parallel-alloc-workers`, at least 1).
    pub parallel_workers: usize,
    /// Release addresses beyond the watermarks (`--azure-release-excess-ips`,
    /// `--aws-release-excess-ips`).
    pub release_excess: bool,
    /// How long a CIDR a 1.20+ agent gave back stays attached before it is released
    /// (`--excess-ip-release-delay`).
    pub release_delay: Duration,
}

/// What the metrics read of the manager after each resync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Nodes managed.
    pub total: u64,
    /// Nodes that need addresses.
    pub in_deficit: u64,
    /// Nodes with no interface that can take an address and no free address.
    pub at_capacity: u64,
    /// Per node: (capacity, used, needed).
    pub per_node: BTreeMap<String, (u64, u64, u64)>,
    /// Free addresses per subnet.
    pub per_subnet: BTreeMap<String, u64>,
}

/// Outcomes of rounds, counted for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Addresses were added on `subnet`.
    Allocated,
    /// An allocation call failed.
    AllocationFailed,
    /// Addresses were released.
    Released,
    /// A release call failed.
    ReleaseFailed,
    /// A new interface was created (with the addresses counted).
    InterfaceCreated,
    /// Creating an interface failed, under the provider's condition.
    InterfaceCreationFailed(&'static str),
}

/// Receives round outcomes (the metrics).
pub trait Observer: Send + Sync + 'static {
    /// A round finished with `outcome` on subnet `subnet`, moving `count` addresses in `secs`.
    fn round(&self, outcome: Outcome, subnet: &str, count: u64, secs: f64);
    /// A full resync of the instances finished.
    fn background_sync(&self, ok: bool, secs: f64);
    /// A pass over every node finished (Cilium's `resync_total`).
    fn resynced(&self);
    /// The manager's state (after each pass, and before each scrape).
    fn snapshot(&self, snapshot: &Snapshot);
}

/// One node's state under provider `P`.
type StateOf<P> = NodeState<<P as CloudProvider>::NodeSpec, <P as CloudProvider>::NodeStatus>;

struct Entry<P: CloudProvider> {
    state: StateOf<P>,
    kick: Arc<Notify>,
    task: tokio::task::AbortHandle,
    /// What was last sent, and when: believed over the object's own fields until an event
    /// shows it or [`EXPECT_FOR`] has passed.
    published: Option<(Shown<P>, Instant)>,
}

struct Shared<P: CloudProvider> {
    provider: P,
    settings: Settings,
    nodes: Mutex<BTreeMap<String, Entry<P>>>,
    pending_pods: Mutex<BTreeMap<String, u64>>,
    stable: AtomicBool,
    /// Why the last full resync failed (the rounds it blocks say so).
    unstable: Mutex<Option<Arc<P::Error>>>,
    /// Why the last full resync was refused (a missing permission), shown on every node
    /// until a full resync goes through.
    refused: Mutex<Option<Arc<P::Error>>>,
    workers: Semaphore,
    writes: mpsc::UnboundedSender<NodePatch>,
    observer: Box<dyn Observer>,
}

/// The cloud node manager; cheap to clone.
pub struct CloudManager<P: CloudProvider> {
    shared: Arc<Shared<P>>,
}

impl<P: CloudProvider> Clone for CloudManager<P> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<P: CloudProvider> std::fmt::Debug for CloudManager<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudManager")
            .field("nodes", &self.shared.lock().len())
            .field("stable", &self.shared.stable.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Why the manager could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError<E: std::error::Error + 'static> {
    /// The first full resync failed (Cilium's text).
    #[error("initial synchronization with instances API failed")]
    InitialSync(#[source] E),
}

impl<P: CloudProvider> Shared<P> {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry<P>>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn node_ref(view: &ViewOf<P>) -> NodeRef<'_, P::NodeSpec> {
        NodeRef {
            name: &view.name,
            instance_id: &view.instance_id,
            spec: &view.provider,
        }
    }

    fn recalculate(&self, state: &mut StateOf<P>) {
        let problem = if state.view.instance_id.is_empty() {
            None
        } else {
            self.provider.invalid_spec(Self::node_ref(&state.view))
        };
        if let Some(problem) = &problem
            && *problem != state.spec_error
        {
            warn!(node = %state.view.name, error = %problem,
                "the CiliumNode's spec cannot be acted on; the node is left as it is");
        }
        state.spec_error = problem.unwrap_or_default();
        let cloud = if state.view.instance_id.is_empty() {
            Err(Unseen::NoInstanceId)
        } else if !state.spec_error.is_empty() {
            Err(Unseen::InvalidSpec)
        } else {
            self.provider
                .resync_interfaces(Self::node_ref(&state.view))
                .map_err(Unseen::Cloud)
        };
        // While the full resync is refused, every node lacks its instance: that is said once.
        if let Err(error) = &cloud
            && !matches!(error, Unseen::InvalidSpec)
            && state.view.invalid.is_empty()
            && !state.instance_missing
            && self.refusal().is_none()
        {
            warn!(node = %state.view.name, instance = %state.view.instance_id,
                reason = %crate::chain(error),
                "Instance not found! Please delete corresponding ciliumnode if instance has already been deleted");
        }
        let max = self.provider.max_allocatable(Self::node_ref(&state.view));
        let known = cloud.is_ok();
        state.recalculate(cloud.ok(), max);
        let requested_v6 = state.view.requested_default_v6;
        state.ipv6_prefixes_needed = u64::from(
            known && (self.provider).ipv6_prefix_needed(Self::node_ref(&state.view), requested_v6),
        );
        if self.settings.release_excess
            && let Some(allocated) = &state.view.allocated_v4
            && let Some(attached) = self.provider.releasable_cidrs(Self::node_ref(&state.view))
            && state
                .cidr_marks
                .observe(allocated, &attached, tokio::time::Instant::now())
        {
            let marked = state.cidr_marks.marked();
            info!(node = %state.view.name, ?marked, delay = ?self.settings.release_delay,
                "CIDRs the agent gave back are released after the delay");
        }
        let at_limit = state.wanted_beyond_limit(max).map(|wanted| {
            let reason = (self.provider.limit_reason(Self::node_ref(&state.view)))
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!(
                "the node holds its instance's limit of {max} addresses{reason}; {wanted} more \
                 are wanted and none can be allocated"
            )
        });
        let text = at_limit.unwrap_or_default();
        if !text.is_empty() && text != state.limit_error {
            warn!(node = %state.view.name, error = %text, "node at its instance's limit of addresses");
        }
        state.limit_error = text;
    }

    /// Fire the node's round if it needs one.
    fn maybe_kick(&self, entry: &mut Entry<P>) {
        let release = self.settings.release_excess;
        // A new mark also wakes the maintainer, which then waits for the earliest one.
        if entry.state.allocation_needed()
            || entry.state.release_needed(release)
            || entry.state.cidr_marks.take_changed()
        {
            entry.state.waiting_for_maintenance = true;
            entry.kick.notify_one();
        }
    }

    /// Why the full resync is refused, if it is.
    fn refusal(&self) -> Option<Arc<P::Error>> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records why the full resync is refused (`None`: it is not); whether what a node shows
    /// of it changed.
    fn set_refused(&self, error: Option<P::Error>) -> bool {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        let text = |e: Option<&Arc<P::Error>>| e.map(|e| refusal_text(&**e));
        let new = error.map(Arc::new);
        let changed = text(refused.as_ref()) != text(new.as_ref());
        *refused = new;
        changed
    }

    /// Publish every node as it stands (a refusal appeared).
    fn publish_all(&self) {
        let mut nodes = self.lock();
        for entry in nodes.values_mut() {
            self.publish(entry);
        }
    }

    /// Cilium's `NodeManager.Resync`: every node looked at again after a sync that started
    /// at `sync_time`.
    /// One node after a round whose changes its provider's cache holds: the round no longer
    /// blocks it, and it is recalculated from the cache (no other node's view changed).
    fn resync_node(&self, name: &str) {
        let mut nodes = self.lock();
        if let Some(entry) = nodes.get_mut(name) {
            // The cache is as fresh as a sync that started after the round.
            entry.state.resync_needed = None;
            self.recalculate(&mut entry.state);
            self.maybe_kick(entry);
            self.publish(entry);
        }
    }

    fn resync_nodes(&self, sync_time: Instant) {
        let mut nodes = self.lock();
        for entry in nodes.values_mut() {
            entry.state.update_last_resync(sync_time);
            self.recalculate(&mut entry.state);
            self.maybe_kick(entry);
            self.publish(entry);
        }
        let snapshot = self.snapshot(&nodes);
        drop(nodes);
        self.observer.resynced();
        self.observer.snapshot(&snapshot);
    }

    /// The gauges' values now.
    fn snapshot(&self, nodes: &BTreeMap<String, Entry<P>>) -> Snapshot {
        let release = self.settings.release_excess;
        let mut snapshot = Snapshot::default();
        for entry in nodes.values() {
            let s = &entry.state;
            snapshot.total += 1;
            if s.needed > 0 || s.static_ip_needed() {
                snapshot.in_deficit += 1;
            }
            if s.stats.remaining_interfaces == 0 && s.free() == 0 {
                snapshot.at_capacity += 1;
            }
            snapshot.per_node.insert(
                s.view.name.clone(),
                (
                    s.stats.node_capacity,
                    s.view.used.len() as u64,
                    u64::try_from(s.needed_addresses(release).max(0)).unwrap_or(0),
                ),
            );
        }
        snapshot.per_subnet = self.provider.pool_quota();
        snapshot
    }
}

impl<P: CloudProvider> CloudManager<P> {
    /// A manager over `provider` after its first full resync (Cilium's `Start`).
    ///
    /// # Errors
    /// The first resync failed.
    pub async fn start(
        provider: P,
        settings: Settings,
        writes: mpsc::UnboundedSender<NodePatch>,
        observer: Box<dyn Observer>,
    ) -> Result<Self, StartError<P::Error>> {
        // Cilium exits when the first resync fails; weft waits out what may pass (throttling,
        // ARM or the network failing), reports a missing permission on every node and keeps
        // trying (`run`), and stops only on a refusal that needs another setting.
        let mut wait = Duration::from_secs(1);
        let mut refused = None;
        loop {
            let started = Instant::now();
            let first = provider.resync().await;
            observer.background_sync(first.is_ok(), started.elapsed().as_secs_f64());
            match first {
                Ok(()) => {
                    info!("initial synchronization with instances API done");
                    break;
                }
                Err(error) if P::is_transient(&error) => {
                    warn!(error = %crate::chain(&error), retry_in = ?wait,
                        "initial synchronization with instances API failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
                Err(error) if P::is_refused(&error) => {
                    warn!(error = %refusal_text(&error), "initial synchronization with instances API refused; \
                        reported on every CiliumNode, retrying until the permission is granted");
                    refused = Some(Arc::new(error));
                    break;
                }
                Err(error) => return Err(StartError::InitialSync(error)),
            }
        }
        Ok(Self {
            shared: Arc::new(Shared {
                provider,
                workers: Semaphore::new(settings.parallel_workers.max(1)),
                settings,
                nodes: Mutex::new(BTreeMap::new()),
                pending_pods: Mutex::new(BTreeMap::new()),
                stable: AtomicBool::new(true),
                unstable: Mutex::new(None),
                refused: Mutex::new(refused),
                writes,
                observer,
            }),
        })
    }

    /// The provider (its cache).
    #[must_use]
    pub fn provider(&self) -> &P {
        &self.shared.provider
    }

    /// Names of the managed CiliumNodes.
    #[must_use]
    pub fn node_names(&self) -> Vec<String> {
        self.shared.lock().keys().cloned().collect()
    }

    /// A CiliumNode was added or changed (Cilium's `Upsert`). A node whose instance is not
    /// in the cache is synchronised by its own maintainer before its first round (Cilium does
    /// it here, holding up every other event, and blocks every node when it fails).
    pub fn upsert(&self, view: ViewOf<P>) {
        let shared = &self.shared;
        if view.ignored {
            self.delete(&view.name);
            return;
        }
        let mut nodes = shared.lock();
        let was_invalid = (nodes.get(&view.name)).and_then(|e| e.state.view.invalid_text());
        if let Some(text) = view.invalid_text()
            && was_invalid.as_ref() != Some(&text)
        {
            warn!(node = %view.name, error = %text, "CiliumNode fields of the wrong form");
        }
        let entry = nodes.entry(view.name.clone()).or_insert_with(|| {
            let kick = Arc::new(Notify::new());
            let task = tokio::spawn(maintainer(
                Arc::clone(shared),
                view.name.clone(),
                Arc::clone(&kick),
            ))
            .abort_handle();
            Entry {
                state: NodeState::new(view.clone()),
                kick,
                task,
                published: None,
            }
        });
        // What was sent is settled once the object shows it.
        if entry
            .published
            .as_ref()
            .is_some_and(|(shown, _)| *shown == Shown::of_view(&view))
        {
            entry.published = None;
        }
        entry.state.view = view;
        shared.recalculate(&mut entry.state);
        if entry.state.instance_missing
            && entry.state.spec_error.is_empty()
            && !entry.state.view.instance_id.is_empty()
        {
            entry.state.waiting_for_maintenance = true;
            entry.kick.notify_one();
        }
        shared.maybe_kick(entry);
        shared.publish(entry);
    }

    /// A CiliumNode was deleted (Cilium's `Delete`).
    pub fn delete(&self, name: &str) {
        if let Some(entry) = self.shared.lock().remove(name) {
            entry.task.abort();
            if !entry.state.view.instance_id.is_empty() {
                self.shared
                    .provider
                    .delete_instance(&entry.state.view.instance_id);
            }
            info!(node = %name, "CiliumNode deleted; forgetting it");
        }
    }

    /// Hand the current state to the observer (the metrics, before a scrape).
    pub fn observe(&self) {
        let snapshot = self.shared.snapshot(&self.shared.lock());
        self.shared.observer.snapshot(&snapshot);
    }

    /// Pods bound to each node that are pending (the surge of a round).
    pub fn set_pending_pods(&self, pending: BTreeMap<String, u64>) {
        *self
            .shared
            .pending_pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = pending;
    }

    /// Runs the periodic full resync, and the provider's background work beside it, until
    /// `shutdown` resolves.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let background = async {
            self.shared.provider.background().await;
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = self.resync_loop(shutdown) => {}
            () = background => {}
        }
    }

    /// The periodic full resync, until `shutdown` resolves.
    async fn resync_loop(&self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let shared = &self.shared;
        let mut failures = 0u32;
        let mut next = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep_until(next) => {}
            }
            let started = Instant::now();
            let result = shared.provider.resync().await;
            shared
                .observer
                .background_sync(result.is_ok(), started.elapsed().as_secs_f64());
            match result {
                Ok(()) => {
                    failures = 0;
                    shared.stable.store(true, Ordering::Relaxed);
                    if shared.set_refused(None) {
                        info!("full resync of the instances allowed again");
                    }
                    shared.resync_nodes(started);
                    next = tokio::time::Instant::now() + RESYNC_INTERVAL;
                }
                Err(error) if P::is_refused(&error) => {
                    failures += 1;
                    let text = refusal_text(&error);
                    if shared.set_refused(Some(error)) {
                        warn!(error = %text, "full resync of the instances refused; reported on every CiliumNode");
                        shared.publish_all();
                    }
                    next = tokio::time::Instant::now()
                        + Duration::from_secs(u64::from(failures)).min(RESYNC_INTERVAL);
                }
                Err(error) => {
                    failures += 1;
                    warn!(error = %crate::chain(&error), "full resync of the instances failed; blocking mutating operations");
                    *shared
                        .unstable
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(error));
                    shared.stable.store(false, Ordering::Relaxed);
                    next = tokio::time::Instant::now() + Duration::from_secs(u64::from(failures));
                }
            }
        }
        for entry in shared.lock().values() {
            entry.task.abort();
        }
    }
}

/// What a node shows while the full resync is refused.
fn refusal_text(error: &(dyn std::error::Error + 'static)) -> String {
    format!(
        "unable to synchronize with the instances API: {}",
        crate::chain(error)
    )
}

/// Why the cloud shows nothing of a node.
#[derive(Debug, thiserror::Error)]
enum Unseen<E: std::error::Error + 'static> {
    /// The node names no instance.
    #[error("spec.instance-id is empty")]
    NoInstanceId,
    /// The provider's answer.
    #[error(transparent)]
    Cloud(E),
    /// The node's spec cannot be acted on (`NodeState::spec_error`).
    #[error("the node's spec cannot be acted on")]
    InvalidSpec,
}

mod publish;
mod round;

use self::{publish::Shown, round::maintainer};
#[cfg(test)]
mod tests;

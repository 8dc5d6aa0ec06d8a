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

use serde_json::{Map, Value, json};
use tokio::sync::{Notify, Semaphore, mpsc};
use tracing::{debug, info, warn};

use super::{CloudProvider, InstanceSyncError, NodeRef, node::NodeState, view::CloudNodeView};

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
}

/// The manager's settings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Rounds in flight at once (`--parallel-alloc-workers`, at least 1).
    pub parallel_workers: usize,
    /// Release addresses beyond the watermarks (`--azure-release-excess-ips`).
    pub release_excess: bool,
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

/// What the operator wants a CiliumNode to show of the fields it owns.
#[derive(Debug, Clone, PartialEq)]
struct Shown {
    /// `spec.ipam.pool`: address → resource.
    pool: BTreeMap<String, String>,
    /// `spec.ipam.pre-allocate`.
    pre_allocate: i64,
    /// The provider's status part (`status.azure`).
    provider: Value,
    /// `status.ipam.assigned-static-ip`.
    static_ip: String,
    /// `status.ipam.operator-status.error`.
    error: String,
}

impl Shown {
    fn of_view(view: &CloudNodeView) -> Self {
        Self {
            pool: view.pool.clone(),
            pre_allocate: view.pre_allocate,
            provider: json!({"azure": {"interfaces": view.azure_interfaces}}),
            static_ip: view.assigned_static_ip.clone(),
            error: view.operator_error.clone(),
        }
    }

    /// The patches that turn `self` into `want` (`None`: that part is already right).
    fn patches(&self, want: &Self) -> (Option<Value>, Option<Value>) {
        let mut pool = Map::new();
        for (ip, resource) in &want.pool {
            if self.pool.get(ip) != Some(resource) {
                pool.insert(ip.clone(), json!({ "resource": resource }));
            }
        }
        for ip in self.pool.keys().filter(|ip| !want.pool.contains_key(*ip)) {
            pool.insert(ip.clone(), Value::Null);
        }
        let mut ipam = Map::new();
        if !pool.is_empty() {
            ipam.insert("pool".into(), Value::Object(pool));
        }
        if self.pre_allocate != want.pre_allocate {
            ipam.insert("pre-allocate".into(), json!(want.pre_allocate));
        }
        let spec = (!ipam.is_empty()).then(|| json!({"spec": {"ipam": ipam}}));
        let mut status = Map::new();
        if self.provider != want.provider
            && let Some(parts) = want.provider.as_object()
        {
            status.extend(parts.clone());
        }
        let mut ipam = Map::new();
        if self.static_ip != want.static_ip {
            ipam.insert("assigned-static-ip".into(), json!(want.static_ip));
        }
        if self.error != want.error {
            let error = if want.error.is_empty() {
                Value::Null
            } else {
                json!(want.error)
            };
            ipam.insert("operator-status".into(), json!({ "error": error }));
        }
        if !ipam.is_empty() {
            status.insert("ipam".into(), Value::Object(ipam));
        }
        let status = (!status.is_empty()).then(|| json!({ "status": status }));
        (spec, status)
    }
}

struct Entry {
    state: NodeState,
    kick: Arc<Notify>,
    task: tokio::task::AbortHandle,
    /// What was last sent, and when: believed over the object's own fields until an event
    /// shows it or [`EXPECT_FOR`] has passed.
    published: Option<(Shown, Instant)>,
}

struct Shared<P: CloudProvider> {
    provider: P,
    settings: Settings,
    nodes: Mutex<BTreeMap<String, Entry>>,
    pending_pods: Mutex<BTreeMap<String, u64>>,
    stable: AtomicBool,
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
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn node_ref(view: &CloudNodeView) -> NodeRef<'_> {
        NodeRef {
            name: &view.name,
            instance_id: &view.instance_id,
            interface_name: &view.interface_name,
        }
    }

    fn recalculate(&self, state: &mut NodeState) {
        let cloud = if state.view.instance_id.is_empty() {
            Err("spec.instance-id is empty".to_owned())
        } else {
            self.provider
                .resync_interfaces(Self::node_ref(&state.view))
                .map_err(|e| crate::chain(&e))
        };
        if let Err(reason) = &cloud
            && !state.instance_missing
        {
            warn!(node = %state.view.name, instance = %state.view.instance_id, %reason,
                "Instance not found! Please delete corresponding ciliumnode if instance has already been deleted");
        }
        state.recalculate(cloud, self.provider.max_allocatable());
    }

    /// Fire the node's round if it needs one.
    fn maybe_kick(&self, entry: &mut Entry) {
        let release = self.settings.release_excess;
        if entry.state.allocation_needed() || entry.state.release_needed(release) {
            entry.state.waiting_for_maintenance = true;
            entry.kick.notify_one();
        }
    }

    /// Publish the node's addresses, interfaces, static IP and error where they differ from
    /// what the object shows (or, while an event may still be on its way, from what was last
    /// sent).
    fn publish(&self, entry: &mut Entry) {
        let state = &entry.state;
        let view = &state.view;
        let believed = match &entry.published {
            Some((shown, at)) if at.elapsed() < EXPECT_FOR => shown.clone(),
            _ => Shown::of_view(view),
        };
        // While the cache lacks the instance, what the node shows of it stays as it is: a
        // misconfigured resource group or a bad answer must not empty a node's pool.
        let known = !state.instance_missing;
        let want = Shown {
            pool: if known {
                state.available.clone()
            } else {
                believed.pool.clone()
            },
            pre_allocate: if view.pre_allocate == 0 {
                i64::try_from(self.provider.min_allocatable()).unwrap_or(i64::MAX)
            } else {
                view.pre_allocate
            },
            provider: if known {
                self.provider.status(Self::node_ref(view))
            } else {
                believed.provider.clone()
            },
            static_ip: state.assigned_static_ip.clone(),
            error: state.error.clone(),
        };
        let (spec, status) = believed.patches(&want);
        if spec.is_none() && status.is_none() {
            return;
        }
        entry.published = Some((want, Instant::now()));
        let _ = self.writes.send(NodePatch {
            node: view.name.clone(),
            spec,
            status,
        });
    }

    /// Cilium's `NodeManager.Resync`: every node looked at again after a sync that started
    /// at `sync_time`.
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
    fn snapshot(&self, nodes: &BTreeMap<String, Entry>) -> Snapshot {
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

    /// One pool-maintainer round (Cilium's `MaintainIPPool`). Returns whether the cloud was
    /// changed.
    async fn round(&self, name: &str) -> Result<bool, String> {
        if !self.stable.load(Ordering::Relaxed) {
            return Err(
                "instances API is unstable. Blocking mutating operations. See logs for details."
                    .to_owned(),
            );
        }
        let Some(instance) = self
            .lock()
            .get(name)
            .map(|e| e.state.view.instance_id.clone())
        else {
            return Ok(false);
        };
        if !instance.is_empty() && !self.provider.has_instance(&instance) {
            let started = Instant::now();
            match self.provider.instance_sync(&instance).await {
                Ok(()) => self.resync_nodes(started),
                Err(InstanceSyncError::NotFound(e) | InstanceSyncError::Failed(e)) => {
                    return Err(crate::chain(&e));
                }
            }
        }
        let Some((view, needed, excess, static_needed)) = self.lock().get(name).map(|e| {
            (
                e.state.view.clone(),
                e.state.needed,
                e.state.excess,
                e.state.static_ip_needed(),
            )
        }) else {
            return Ok(false);
        };
        let node = Self::node_ref(&view);
        let mut mutated = false;
        if static_needed {
            let ip = self
                .provider
                .allocate_static_ip(node, &view.static_ip_tags)
                .await
                .map_err(|e| {
                    format!("unable to assign a static public IP: {}", crate::chain(&e))
                })?;
            info!(node = %name, %ip, "assigned static public IP");
            if let Some(e) = self.lock().get_mut(name) {
                e.state.assigned_static_ip = ip;
            }
            mutated = true;
        }
        if self.settings.release_excess && excess > 0 {
            let action =
                self.provider
                    .prepare_release(node, u64::try_from(excess).unwrap_or(0), &view.used);
            if !action.ips.is_empty() {
                return self
                    .release(name, &view, &action)
                    .await
                    .map(|r| r || mutated);
            }
        }
        if needed <= 0 {
            return Ok(mutated);
        }
        let needed = u64::try_from(needed).unwrap_or(0);
        let above = u64::try_from(view.max_above_watermark.max(0)).unwrap_or(0);
        Ok(self.allocate(node, needed, above).await? || mutated)
    }

    /// Resolve a deficit of `needed` addresses (plus `above` the watermark and the surge of
    /// pending pods). Returns whether addresses were added.
    async fn allocate(&self, node: NodeRef<'_>, needed: u64, above: u64) -> Result<bool, String> {
        let name = node.name;
        let mut action = self
            .provider
            .prepare_allocation(node)
            .map_err(|e| crate::chain(&e))?;
        let pending = self
            .pending_pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .copied()
            .unwrap_or(0);
        let surge = pending.saturating_sub(needed);
        action.max_to_allocate = needed + above + surge;
        if action.available_for_allocation == 0 {
            debug!(node = %name, candidates = action.interface_candidates,
                "no interface and subnet can take another address (the instance is out of interfaces)");
            return Ok(false);
        }
        action.available_for_allocation =
            action.available_for_allocation.min(action.max_to_allocate);
        info!(node = %name, needed, surge, allocating = action.available_for_allocation,
            interface = %action.interface_id, subnet = %action.pool_id, "Resolving IP deficit of node");
        let started = Instant::now();
        let result = self.provider.allocate(node, &action).await;
        let secs = started.elapsed().as_secs_f64();
        match result {
            Ok(()) => {
                self.observer.round(
                    Outcome::Allocated,
                    &action.pool_id,
                    action.available_for_allocation,
                    secs,
                );
                Ok(true)
            }
            Err(e) => {
                self.observer
                    .round(Outcome::AllocationFailed, &action.pool_id, 0, secs);
                Err(format!(
                    "unable to assign additional IPs to interface {}: {}",
                    action.interface_id,
                    crate::chain(&e)
                ))
            }
        }
    }

    /// The operator's side of the release handshake for `action`'s addresses.
    async fn release(
        &self,
        name: &str,
        view: &CloudNodeView,
        action: &super::ReleaseAction,
    ) -> Result<bool, String> {
        let ready: Vec<String> = action
            .ips
            .iter()
            .filter(|ip| {
                view.release_ips
                    .get(*ip)
                    .is_some_and(|s| s == "ready-for-release")
            })
            .cloned()
            .collect();
        let mut marks = Map::new();
        for ip in &action.ips {
            if !view.release_ips.contains_key(ip) {
                marks.insert(ip.clone(), json!("marked-for-release"));
            }
        }
        // An address the agent refused, or one no longer chosen, is dropped from the handshake.
        for (ip, state) in &view.release_ips {
            if state == "do-not-release"
                || (state == "marked-for-release" && !action.ips.contains(ip))
            {
                marks.insert(ip.clone(), Value::Null);
            }
        }
        if !marks.is_empty() {
            let _ = self.writes.send(NodePatch {
                node: name.to_owned(),
                spec: None,
                status: Some(json!({"status": {"ipam": {"release-ips": marks}}})),
            });
        }
        if ready.is_empty() {
            return Ok(false);
        }
        let batch = super::ReleaseAction {
            ips: ready.clone(),
            ..action.clone()
        };
        let started = Instant::now();
        match self.provider.release(Self::node_ref(view), &batch).await {
            Ok(()) => {
                self.observer.round(
                    Outcome::Released,
                    &batch.pool_id,
                    ready.len() as u64,
                    started.elapsed().as_secs_f64(),
                );
                let released: Map<String, Value> = ready
                    .iter()
                    .map(|ip| (ip.clone(), json!("released")))
                    .collect();
                info!(node = %name, addresses = ?ready, "released excess addresses");
                let _ = self.writes.send(NodePatch {
                    node: name.to_owned(),
                    spec: None,
                    status: Some(json!({"status": {"ipam": {"release-ips": released}}})),
                });
                Ok(true)
            }
            Err(e) => {
                self.observer.round(
                    Outcome::ReleaseFailed,
                    &batch.pool_id,
                    0,
                    started.elapsed().as_secs_f64(),
                );
                Err(format!(
                    "unable to release addresses {ready:?}: {}",
                    crate::chain(&e)
                ))
            }
        }
    }

    /// After a round: the instance's fresh state from the cloud, then every node again.
    async fn after_round(&self, name: &str) {
        let Some(instance) = self
            .lock()
            .get(name)
            .map(|e| e.state.view.instance_id.clone())
        else {
            return;
        };
        let started = Instant::now();
        match self.provider.instance_sync(&instance).await {
            Ok(()) => self.resync_nodes(started),
            Err(InstanceSyncError::NotFound(error)) => {
                warn!(node = %name, %instance, %error, "instance not found by the cloud API");
            }
            Err(InstanceSyncError::Failed(error)) => {
                debug!(node = %name, %instance, %error, "instance sync failed; the next full resync refreshes it");
            }
        }
    }
}

fn backoff(failures: u32, nodes: usize) -> Duration {
    let base = Duration::from_secs(1).saturating_mul(1 << failures.min(10));
    // Cilium scales by ln(1 + nodes) so that a large cluster's retries spread out.
    #[expect(clippy::cast_precision_loss, reason = "a node count as a scale factor")]
    let scale = (1.0 + nodes as f64).ln().max(1.0);
    let jitter = 1.0 + fastrand::f64() * 0.2;
    base.mul_f64(scale * jitter).min(MAX_BACKOFF)
}

async fn maintainer<P: CloudProvider>(shared: Arc<Shared<P>>, name: String, kick: Arc<Notify>) {
    let mut failures = 0u32;
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut hold_until: Option<tokio::time::Instant> = None;
    loop {
        match retry_at {
            Some(at) => {
                tokio::select! {
                    () = kick.notified() => {}
                    () = tokio::time::sleep_until(at) => {}
                }
            }
            None => kick.notified().await,
        }
        // A failed round is not retried before its backoff ends, however often the node is
        // kicked meanwhile (no error storm against the cloud).
        if let Some(at) = hold_until.take() {
            tokio::time::sleep_until(at).await;
        }
        tokio::time::sleep(ROUND_INTERVAL).await;
        let Ok(permit) = shared.workers.acquire().await else {
            return;
        };
        let result = shared.round(&name).await;
        drop(permit);
        let changed = matches!(result, Ok(true));
        let failed = result.is_err();
        {
            let mut nodes = shared.lock();
            let count = nodes.len();
            let Some(entry) = nodes.get_mut(&name) else {
                return;
            };
            entry.state.waiting_for_maintenance = false;
            match &result {
                Ok(changed) => {
                    failures = 0;
                    retry_at = None;
                    // Cilium waits for a newer sync after every round; only a round that
                    // changed the cloud has anything to wait for.
                    if *changed {
                        entry.state.resync_needed = Some(Instant::now());
                    }
                    entry.state.error.clear();
                }
                Err(error) => {
                    let unstable = !shared.stable.load(Ordering::Relaxed);
                    let wait = if unstable {
                        UNSTABLE_RETRY
                    } else {
                        failures += 1;
                        backoff(failures, count)
                    };
                    retry_at = Some(tokio::time::Instant::now() + wait);
                    // While the API is unstable, the resync that ends it kicks the node.
                    hold_until = (!unstable).then_some(tokio::time::Instant::now() + wait);
                    warn!(node = %name, %error, retry_in = ?wait, "pool maintainer round failed");
                    if !unstable {
                        entry.state.error.clone_from(error);
                    }
                }
            }
            shared.recalculate(&mut entry.state);
            shared.publish(entry);
        }
        if changed || failed {
            shared.after_round(&name).await;
        }
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
        // ARM or the network failing) and stops only on a refusal that needs a fix.
        let mut wait = Duration::from_secs(1);
        loop {
            let started = Instant::now();
            let first = provider.resync().await;
            observer.background_sync(first.is_ok(), started.elapsed().as_secs_f64());
            match first {
                Ok(()) => break,
                Err(error) if P::is_transient(&error) => {
                    warn!(error = %crate::chain(&error), retry_in = ?wait,
                        "initial synchronization with instances API failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
                Err(error) => return Err(StartError::InitialSync(error)),
            }
        }
        info!("initial synchronization with instances API done");
        Ok(Self {
            shared: Arc::new(Shared {
                provider,
                workers: Semaphore::new(settings.parallel_workers.max(1)),
                settings,
                nodes: Mutex::new(BTreeMap::new()),
                pending_pods: Mutex::new(BTreeMap::new()),
                stable: AtomicBool::new(true),
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
    pub fn upsert(&self, view: CloudNodeView) {
        let shared = &self.shared;
        if view.ignored {
            self.delete(&view.name);
            return;
        }
        let mut nodes = shared.lock();
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
        if let Some(text) = view.invalid_text() {
            entry.state.error = text;
        }
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
        if entry.state.instance_missing && !entry.state.view.instance_id.is_empty() {
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

    /// Runs the periodic full resync until `shutdown` resolves.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
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
                    shared.resync_nodes(started);
                    next = tokio::time::Instant::now() + RESYNC_INTERVAL;
                }
                Err(error) => {
                    failures += 1;
                    shared.stable.store(false, Ordering::Relaxed);
                    warn!(%error, "full resync of the instances failed; blocking mutating operations");
                    next = tokio::time::Instant::now() + Duration::from_secs(u64::from(failures));
                }
            }
        }
        for entry in shared.lock().values() {
            entry.task.abort();
        }
    }
}

#[cfg(test)]
mod tests;

//! One node's pool maintainer: the task that waits for its node to be kicked (or its retry
//! to come due), runs a round (Cilium's `MaintainIPPool`: the instance synchronised first if
//! the cache lacks it, the static IP, then a release or an allocation), backs off after a
//! failure, and after a round reads the instance again and looks at every node.

use std::{
    sync::{Arc, PoisonError, atomic::Ordering},
    time::{Duration, Instant},
};

use ipnet::Ipv4Net;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use super::{MAX_BACKOFF, NodePatch, Outcome, ROUND_INTERVAL, Shared, UNSTABLE_RETRY};
use crate::cloud::{
    AllocationAction, Available, CloudProvider, InstanceSyncError, NodeRef, ReleaseAction,
    view::ViewOf,
};

/// Why a pool-maintainer round failed (its chain is the node's `operator-status.error`).
#[derive(Debug, thiserror::Error)]
pub(super) enum RoundError<E: std::error::Error + 'static> {
    /// The full resync is refused (a missing permission); no round runs until it goes through.
    #[error("unable to synchronize with the instances API")]
    Refused(#[source] Arc<E>),
    /// The last full resync failed (Cilium's text), and why.
    #[error("instances API is unstable. Blocking mutating operations. See logs for details.")]
    Unstable(#[source] Arc<E>),
    /// The instance could not be read again.
    #[error(transparent)]
    InstanceSync(E),
    /// The IPv6 prefix could not be assigned.
    #[error("unable to assign an IPv6 prefix")]
    Ipv6Prefix(#[source] E),
    /// The static public IP could not be assigned.
    #[error("unable to assign a static public IP")]
    StaticIp(#[source] E),
    /// The provider could not say where the next addresses go.
    #[error(transparent)]
    Prepare(E),
    /// Adding addresses failed (Cilium's text).
    #[error("unable to assign additional IPs to interface {interface}")]
    Allocate {
        /// The interface.
        interface: String,
        /// The provider's error.
        #[source]
        source: E,
    },
    /// A new interface could not be created (Cilium's text).
    #[error("unable to create a new interface")]
    CreateInterface(#[source] E),
    /// Releasing CIDRs a 1.20+ agent gave back failed.
    #[error("unable to release CIDRs {cidrs:?}")]
    ReleaseCidrs {
        /// The CIDRs not released.
        cidrs: Vec<Ipv4Net>,
        /// The provider's error.
        #[source]
        source: E,
    },
    /// Releasing addresses failed.
    #[error("unable to release addresses {ips:?}")]
    Release {
        /// The addresses.
        ips: Vec<String>,
        /// The provider's error.
        #[source]
        source: E,
    },
}

impl<P: CloudProvider> Shared<P> {
    /// One pool-maintainer round (Cilium's `MaintainIPPool`). Returns whether the cloud was
    /// changed.
    async fn round(&self, name: &str) -> Result<bool, RoundError<P::Error>> {
        if let Some(refusal) = self.refusal() {
            return Err(RoundError::Refused(refusal));
        }
        if !self.stable.load(Ordering::Relaxed)
            && let Some(error) = self
                .unstable
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        {
            return Err(RoundError::Unstable(error));
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
                    return Err(RoundError::InstanceSync(e));
                }
            }
        }
        let Some((view, available, needed, excess, static_needed, ipv6_needed)) =
            self.lock().get(name).map(|e| {
                (
                    e.state.view.clone(),
                    e.state.available.clone(),
                    e.state.needed,
                    e.state.excess,
                    e.state.static_ip_needed(),
                    e.state.ipv6_prefixes_needed > 0,
                )
            })
        else {
            return Ok(false);
        };
        let node = Self::node_ref(&view);
        // Cilium's maintenance releases what 1.20+ agents gave back before anything else.
        let mut mutated = self.settings.release_excess && self.release_cidrs(name, node).await?;
        if static_needed {
            let ip = self
                .provider
                .allocate_static_ip(node, &view.static_ip_tags)
                .await
                .map_err(RoundError::StaticIp)?;
            info!(node = %name, %ip, "assigned static public IP");
            if let Some(e) = self.lock().get_mut(name) {
                e.state.assigned_static_ip = ip;
            }
            mutated = true;
        }
        if self.settings.release_excess && view.allocated_v4.is_none() {
            let action = if excess > 0 {
                self.provider
                    .prepare_release(node, u64::try_from(excess).unwrap_or(0), &view.used)
            } else {
                ReleaseAction::default()
            };
            // Also with nothing to release: marks of addresses no longer in excess go.
            let pending = view.release_ips.values().any(|s| s != "released");
            if !action.ips.is_empty() || pending {
                return self
                    .release(name, &view, &available, &action)
                    .await
                    .map(|r| r || mutated);
            }
        }
        let above = u64::try_from(view.max_above_watermark.max(0)).unwrap_or(0);
        let needed = u64::try_from(needed).unwrap_or(0);
        if ipv6_needed {
            // Before the IPv4 addresses, as Cilium does; a new interface carries both.
            let with_v4 = if needed > 0 { needed + above } else { 0 };
            let held = self
                .provider
                .allocate_ipv6_prefix(node, with_v4)
                .await
                .map_err(RoundError::Ipv6Prefix)?;
            info!(node = %name, new_interface_addresses = held, "assigned an IPv6 prefix");
            if held > 0 || needed == 0 {
                return Ok(true);
            }
            mutated = true;
        }
        if needed == 0 {
            return Ok(mutated);
        }
        Ok(self.allocate(node, needed, above).await? || mutated)
    }

    /// Resolve a deficit of `needed` addresses (plus `above` the watermark and the surge of
    /// pending pods). Returns whether addresses were added.
    async fn allocate(
        &self,
        node: NodeRef<'_, P::NodeSpec>,
        needed: u64,
        above: u64,
    ) -> Result<bool, RoundError<P::Error>> {
        let name = node.name;
        let mut action = self
            .provider
            .prepare_allocation(node)
            .map_err(RoundError::Prepare)?;
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
            return self.create_interface(node, &action).await;
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
                if action.empty_interface_slots > 0 {
                    info!(node = %name, interface = %action.interface_id, error = %crate::chain(&e),
                        "Unable to assign additional IPs to interface, will create new interface");
                    return self.create_interface(node, &action).await;
                }
                Err(RoundError::Allocate {
                    interface: action.interface_id,
                    source: e,
                })
            }
        }
    }

    /// No interface can take the addresses: create one if the instance has an empty slot
    /// (Cilium's `createInterface`). Returns whether one was created.
    async fn create_interface(
        &self,
        node: NodeRef<'_, P::NodeSpec>,
        action: &AllocationAction,
    ) -> Result<bool, RoundError<P::Error>> {
        let name = node.name;
        if action.empty_interface_slots == 0 {
            debug!(node = %name, candidates = action.interface_candidates,
                "no interface and subnet can take another address (the instance is out of interfaces)");
            return Ok(false);
        }
        info!(node = %name, max = action.max_to_allocate, "No more IPs available, creating new interface");
        let started = Instant::now();
        let result = self.provider.create_interface(node, action).await;
        let secs = started.elapsed().as_secs_f64();
        match result {
            Ok(count) => {
                self.observer
                    .round(Outcome::InterfaceCreated, &action.pool_id, count, secs);
                Ok(count > 0)
            }
            Err(e) => {
                let condition = P::creation_condition(&e);
                self.observer.round(
                    Outcome::InterfaceCreationFailed(condition),
                    &action.pool_id,
                    0,
                    secs,
                );
                Err(RoundError::CreateInterface(e))
            }
        }
    }

    /// Release the CIDRs whose marks are older than the delay. Returns whether any was.
    async fn release_cidrs(
        &self,
        name: &str,
        node: NodeRef<'_, P::NodeSpec>,
    ) -> Result<bool, RoundError<P::Error>> {
        let delay = self.settings.release_delay;
        let due = match self.lock().get(name) {
            Some(entry) => entry
                .state
                .cidr_marks
                .due(tokio::time::Instant::now(), delay),
            None => return Ok(false),
        };
        if due.is_empty() {
            return Ok(false);
        }
        let started = Instant::now();
        let outcome = self.provider.release_cidrs(node, &due).await;
        let secs = started.elapsed().as_secs_f64();
        let released: Vec<Ipv4Net> = outcome.released.values().flatten().copied().collect();
        if let Some(entry) = self.lock().get_mut(name) {
            entry.state.cidr_marks.unmark(&released);
            entry.state.cidr_marks.unmark(&outcome.gone);
        }
        for (subnet, cidrs) in &outcome.released {
            self.observer
                .round(Outcome::Released, subnet, cidr_addresses(cidrs), secs);
            info!(node = %name, %subnet, ?cidrs, "released CIDRs the agent gave back");
        }
        match outcome.error {
            Some(source) => Err(RoundError::ReleaseCidrs {
                cidrs: (due.into_iter())
                    .filter(|c| !released.contains(c) && !outcome.gone.contains(c))
                    .collect(),
                source,
            }),
            None => Ok(!released.is_empty()),
        }
    }

    /// The operator's side of the release handshake for `action`'s addresses.
    async fn release(
        &self,
        name: &str,
        view: &ViewOf<P>,
        available: &Available,
        action: &ReleaseAction,
    ) -> Result<bool, RoundError<P::Error>> {
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
        // An address the agent refused, or one still on the node but no longer chosen (its
        // usage grew), is dropped from the handshake, so the agent may hand it out again. One
        // already gone from the NIC was released (the object may not show it yet): untouched.
        for (ip, state) in &view.release_ips {
            if state == "do-not-release"
                || (matches!(state.as_str(), "marked-for-release" | "ready-for-release")
                    && available.contains_key(ip)
                    && !action.ips.contains(ip))
            {
                marks.insert(ip.clone(), Value::Null);
            }
        }
        if !marks.is_empty() {
            let _ = self.writes.send(NodePatch {
                node: name.to_owned(),
                spec: None,
                status: Some(json!({"status": {"ipam": {"release-ips": marks}}})),
                events: Vec::new(),
            });
        }
        if ready.is_empty() {
            return Ok(false);
        }
        let batch = ReleaseAction {
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
                    events: Vec::new(),
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
                Err(RoundError::Release {
                    ips: ready,
                    source: e,
                })
            }
        }
    }

    /// After a round: the instance's fresh state from the cloud, then every node again; or,
    /// when the provider's cache already holds every answer of the round, only this node.
    async fn after_round(&self, name: &str) {
        let Some(instance) = self
            .lock()
            .get(name)
            .map(|e| e.state.view.instance_id.clone())
        else {
            return;
        };
        if !self.provider.instance_sync_needed(&instance) {
            self.resync_node(name);
            return;
        }
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

/// Addresses in `cidrs`.
fn cidr_addresses(cidrs: &[Ipv4Net]) -> u64 {
    cidrs
        .iter()
        .map(|c| 1u64 << (32 - u32::from(c.prefix_len())))
        .sum()
}

fn backoff(failures: u32, nodes: usize) -> Duration {
    let base = Duration::from_secs(1).saturating_mul(1 << failures.min(10));
    // Cilium scales by ln(1 + nodes) so that a large cluster's retries spread out.
    #[expect(clippy::cast_precision_loss, reason = "a node count as a scale factor")]
    let scale = (1.0 + nodes as f64).ln().max(1.0);
    let jitter = 1.0 + fastrand::f64() * 0.2;
    base.mul_f64(scale * jitter).min(MAX_BACKOFF)
}

pub(super) async fn maintainer<P: CloudProvider>(
    shared: Arc<Shared<P>>,
    name: String,
    kick: Arc<Notify>,
) {
    let mut failures = 0u32;
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut hold_until: Option<tokio::time::Instant> = None;
    loop {
        // The earliest release mark comes due like a retry.
        let due = shared.lock().get(&name).and_then(|entry| {
            (shared.settings.release_excess)
                .then(|| {
                    entry
                        .state
                        .cidr_marks
                        .next_due(shared.settings.release_delay)
                })
                .flatten()
        });
        let wake = [retry_at, due].into_iter().flatten().min();
        match wake {
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
                    let error = crate::chain(error);
                    warn!(node = %name, %error, retry_in = ?wait, "pool maintainer round failed");
                    entry.state.error = error;
                }
            }
            shared.recalculate(&mut entry.state);
            shared.publish(entry);
            let events = shared
                .provider
                .take_notices(Shared::<P>::node_ref(&entry.state.view));
            if !events.is_empty() {
                let _ = shared.writes.send(NodePatch {
                    node: name.clone(),
                    spec: None,
                    status: None,
                    events,
                });
            }
        }
        if changed || failed {
            shared.after_round(&name).await;
        }
    }
}

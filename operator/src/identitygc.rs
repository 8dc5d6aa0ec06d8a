//! Garbage collection of CiliumIdentities, as Cilium's operator does it for CRD-backed
//! identities (`identity-allocation-mode: crd`, the only mode weft has): the agents create one
//! CiliumIdentity per security label set and never delete it; the leader's collector watches
//! the identities and the CiliumEndpoints, and every `identity-gc-interval` marks the
//! identities no endpoint used for `identity-heartbeat-timeout`, then deletes the marked ones
//! still unused a timeout later, at most `identity-gc-rate-limit` per
//! `identity-gc-rate-interval`. It owns those watches and the identity deletes; it touches no
//! CiliumNode and no endpoint.
//!
//! The decisions are pure ([`sweep`], [`heartbeat`]); this file is the IO around them.

pub mod heartbeat;
pub mod sweep;
#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use futures::{StreamExt as _, stream::BoxStream};
use kube::{
    Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions},
    runtime::{
        WatchStreamExt as _,
        watcher::{self, watcher},
    },
};
use serde_json::json;
use tracing::{debug, info, warn};
use weft_k8s::{Resource, client::status_code};

use self::{
    heartbeat::Heartbeats,
    sweep::{Action, HEARTBEAT_ANNOTATION, IdentityRecord, sweep},
};
use crate::metrics::IdentityGcMetrics;

/// The collector's settings (Cilium's flags and defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `identity-gc-interval` (default 15m0s; zero: no collection).
    pub interval: Duration,
    /// `identity-heartbeat-timeout` (default 30m0s).
    pub heartbeat_timeout: Duration,
    /// `identity-gc-rate-interval` (default 1m0s).
    pub rate_interval: Duration,
    /// `identity-gc-rate-limit`: deletes per rate interval (default 2500).
    pub rate_limit: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            interval: Duration::from_mins(15),
            heartbeat_timeout: Duration::from_mins(30),
            rate_interval: Duration::from_mins(1),
            rate_limit: 2500,
        }
    }
}

/// Why a collection run stopped before its end (the next run starts over).
#[derive(Debug, thiserror::Error)]
pub enum IdentityGcError {
    /// Marking an identity for deletion failed.
    #[error("marking CiliumIdentity {name} for deletion")]
    Mark {
        /// The identity.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
    /// Deleting an identity failed.
    #[error("deleting CiliumIdentity {name}")]
    Delete {
        /// The identity.
        name: String,
        /// The API's answer.
        #[source]
        source: kube::Error,
    },
}

/// Which watch an event came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Identities,
    Endpoints,
}

type Events = BoxStream<
    'static,
    (
        Source,
        Result<watcher::Event<DynamicObject>, watcher::Error>,
    ),
>;

/// One watched resource, folded: objects by key, and whether a full list arrived.
#[derive(Debug)]
struct Folded<T> {
    objects: BTreeMap<String, T>,
    relisting: Option<BTreeSet<String>>,
    synced: bool,
}

impl<T> Default for Folded<T> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            relisting: None,
            synced: false,
        }
    }
}

impl<T> Folded<T> {
    /// Applies one watch event: `key` names an object, `read` makes its value (given the
    /// value held so far). The keys removed are returned (deleted, or gone during a re-list).
    fn apply(
        &mut self,
        event: watcher::Event<DynamicObject>,
        key: impl Fn(&DynamicObject) -> String,
        mut read: impl FnMut(&DynamicObject, Option<&T>) -> T,
    ) -> Vec<String> {
        match event {
            watcher::Event::Init => {
                self.relisting = Some(BTreeSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(object) | watcher::Event::Apply(object) => {
                let key = key(&object);
                let value = read(&object, self.objects.get(&key));
                if let Some(seen) = &mut self.relisting {
                    seen.insert(key.clone());
                }
                self.objects.insert(key, value);
                Vec::new()
            }
            watcher::Event::InitDone => {
                self.synced = true;
                let seen = self.relisting.take().unwrap_or_default();
                let gone: Vec<String> = self
                    .objects
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for key in &gone {
                    self.objects.remove(key);
                }
                gone
            }
            watcher::Event::Delete(object) => {
                let key = key(&object);
                self.objects.remove(&key);
                vec![key]
            }
        }
    }
}

fn identity_record(object: &DynamicObject) -> IdentityRecord {
    let meta = &object.metadata;
    IdentityRecord {
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        marked: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(HEARTBEAT_ANNOTATION)),
    }
}

fn name_of(object: &DynamicObject) -> String {
    object.metadata.name.clone().unwrap_or_default()
}

/// `namespace/name` of an endpoint.
fn endpoint_key(object: &DynamicObject) -> String {
    let meta = &object.metadata;
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The identity an endpoint uses (`status.identity.id`), as an identity's name.
fn endpoint_identity(object: &DynamicObject) -> Option<String> {
    object.data["status"]["identity"]["id"]
        .as_u64()
        .map(|id| id.to_string())
}

/// At most `limit` deletes per `interval` (Cilium's rate limiter for identity deletes).
#[derive(Debug)]
struct RateLimit {
    interval: Duration,
    limit: u64,
    window: Option<(tokio::time::Instant, u64)>,
}

impl RateLimit {
    async fn wait(&mut self) {
        let now = tokio::time::Instant::now();
        let (start, used) = match self.window {
            Some((start, used)) if now.duration_since(start) < self.interval => (start, used),
            _ => (now, 0),
        };
        if used >= self.limit.max(1) {
            // A relative sleep: tokio caps a far deadline, where `start + interval` could
            // overflow the clock.
            tokio::time::sleep(self.interval.saturating_sub(now.duration_since(start))).await;
            self.window = Some((tokio::time::Instant::now(), 1));
        } else {
            self.window = Some((start, used + 1));
        }
    }
}

/// The collector's state between runs.
struct Collector {
    client: Client,
    settings: Settings,
    metrics: IdentityGcMetrics,
    identities: Folded<IdentityRecord>,
    endpoints: Folded<Option<String>>,
    heartbeats: Heartbeats,
    limit: RateLimit,
}

impl Collector {
    fn event(&mut self, source: Source, event: watcher::Event<DynamicObject>) {
        match source {
            Source::Identities => {
                let now = Instant::now();
                let mut changed = Vec::new();
                let gone = self.identities.apply(event, name_of, |object, old| {
                    let record = identity_record(object);
                    if old.is_none_or(|o| o.resource_version != record.resource_version) {
                        changed.push(record.name.clone());
                    }
                    record
                });
                // A new or changed identity is a sign of life (Cilium's heartbeat updater).
                for name in changed {
                    self.heartbeats.mark_alive(&name, now);
                }
                for name in gone {
                    self.heartbeats.forget(&name);
                }
            }
            Source::Endpoints => {
                self.endpoints
                    .apply(event, endpoint_key, |object, _| endpoint_identity(object));
            }
        }
    }

    /// One collection run; counts it in the metrics.
    async fn run_once(&mut self) {
        if !self.identities.synced || !self.endpoints.synced {
            debug!("identity garbage collection waits for the first lists");
            return;
        }
        let in_use: BTreeSet<String> = self.endpoints.objects.values().flatten().cloned().collect();
        let records: Vec<IdentityRecord> = self.identities.objects.values().cloned().collect();
        let now = Instant::now();
        let actions = sweep(&records, &in_use, &mut self.heartbeats, now);
        let mut deleted = 0;
        let mut outcome = Ok(());
        for action in actions {
            match self.carry_out(action).await {
                Ok(gone) => deleted += u64::from(gone),
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        self.heartbeats.gc(now);
        let total = u64::try_from(records.len()).unwrap_or(u64::MAX);
        match outcome {
            Ok(()) => self
                .metrics
                .run(true, total.saturating_sub(deleted), deleted),
            Err(error) => {
                warn!(error = %crate::chain(&error), "identity garbage collection run failed; retrying at the next interval");
                self.metrics
                    .run(false, total.saturating_sub(deleted), deleted);
            }
        }
        debug!(
            identities = total,
            deleted, "identity garbage collection run done"
        );
    }

    /// Carries out one action; whether an identity was deleted.
    async fn carry_out(&mut self, action: Action) -> Result<bool, IdentityGcError> {
        let api = Resource::CiliumIdentity.all(&self.client);
        match action {
            Action::Mark(identity) => {
                info!(identity = %identity.name, uid = identity.uid.as_deref().unwrap_or_default(), "Marking identity for later deletion");
                // The resourceVersion makes the patch fail if the identity changed meanwhile.
                let patch = json!({"metadata": {
                    "resourceVersion": identity.resource_version,
                    "annotations": {HEARTBEAT_ANNOTATION: k8s_openapi::jiff::Timestamp::now().to_string()},
                }});
                match api
                    .patch(
                        &identity.name,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    Ok(_) => Ok(false),
                    Err(e) if matches!(status_code(&e), Some(404 | 409)) => {
                        debug!(identity = %identity.name, "identity changed or went meanwhile; not marked");
                        Ok(false)
                    }
                    Err(source) => Err(IdentityGcError::Mark {
                        name: identity.name,
                        source,
                    }),
                }
            }
            Action::Delete(identity) => {
                self.limit.wait().await;
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: identity.uid.clone(),
                        resource_version: identity.resource_version.clone(),
                    }),
                    ..DeleteParams::default()
                };
                match api.delete(&identity.name, &params).await {
                    Ok(_) => {
                        info!(identity = %identity.name, "Garbage collected identity");
                        self.heartbeats.forget(&identity.name);
                        Ok(true)
                    }
                    Err(e) if matches!(status_code(&e), Some(404 | 409)) => {
                        info!(identity = %identity.name, "identity changed or went since it was marked; not deleted");
                        Ok(false)
                    }
                    Err(source) => Err(IdentityGcError::Delete {
                        name: identity.name,
                        source,
                    }),
                }
            }
        }
    }
}

fn watch(client: &Client, resource: Resource, source: Source) -> Events {
    watcher(resource.all(client), watcher::Config::default())
        .default_backoff()
        .map(move |e| (source, e))
        .boxed()
}

/// Runs the collector until `stop` completes; returns at once when the interval is zero.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: IdentityGcMetrics,
    stop: impl Future<Output = ()>,
) {
    if settings.interval.is_zero() {
        debug!("CRD identity garbage collector disabled with interval set to 0");
        return;
    }
    info!(interval = ?settings.interval, heartbeat_timeout = ?settings.heartbeat_timeout, "Starting CRD identity garbage collector");
    let mut events = futures::stream::select(
        watch(&client, Resource::CiliumIdentity, Source::Identities),
        watch(&client, Resource::CiliumEndpoint, Source::Endpoints),
    );
    let mut collector = Collector {
        client,
        settings,
        metrics,
        identities: Folded::default(),
        endpoints: Folded::default(),
        heartbeats: Heartbeats::new(Instant::now(), settings.heartbeat_timeout),
        limit: RateLimit {
            interval: settings.rate_interval,
            limit: settings.rate_limit,
            window: None,
        },
    };
    let mut ticks = tokio::time::interval(collector.settings.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            event = events.next() => match event {
                Some((source, Ok(event))) => collector.event(source, event),
                Some((source, Err(error))) => {
                    let plural = match source {
                        Source::Identities => "ciliumidentities",
                        Source::Endpoints => "ciliumendpoints",
                    };
                    warn!(error = %crate::chain(&error), resource = plural, "identity garbage collection: watch failed; retrying");
                }
                None => return,
            },
            _ = ticks.tick() => collector.run_once().await,
        }
    }
}

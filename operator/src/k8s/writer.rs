//! The one task that writes CiliumNodes. The node manager hands it [`Write`]s; it keeps the
//! latest per node (a newer part replaces an older one not yet written), writes each node at
//! most once per second (Cilium batches with a 1 s trigger), several nodes at a time, and
//! retries what failed for a transient reason. Parts go as JSON merge patches of exactly the
//! fields the operator owns (`spec.ipam.podCIDRs` or `spec.ipam.pools.allocated`, and
//! `status.ipam.operator-status` through `/status`; in cloud modes the cloud manager's patches
//! of `spec.ipam.pool`, `status.azure` and its `status.ipam` fields, composed while queued), so
//! nothing another writer (the agent) owns is ever overwritten. Deletions of CiliumNodes (gone nodes) go through here too.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use futures::{StreamExt as _, stream::FuturesUnordered};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams},
};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{info, warn};
use weft_cluster_ipam::manager::{SpecPart, Write, status_patch};
use weft_k8s::{Resource, client::status_code};

use crate::{
    cloud::manager::NodePatch,
    metrics::{Metrics, PartLabels},
};

/// Least time between two writes of one CiliumNode.
pub const NODE_WRITE_INTERVAL: Duration = Duration::from_secs(1);
/// Writes in flight at once.
const CONCURRENCY: usize = 32;
/// Wait before a failed write is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What the writer is asked to do.
#[derive(Debug)]
pub enum Op {
    /// Change parts of a CiliumNode.
    Write(Write),
    /// Merge patches of a CiliumNode built by the cloud manager (`spec` through the object,
    /// `status` through `/status`); a newer patch queued before the write is composed onto
    /// the older one.
    Patch(NodePatch),
    /// Delete a CiliumNode (its Node is gone).
    Delete(String),
    /// Post a Warning Event about an object (a pool the operator refuses); best effort.
    Event {
        /// The object as the API server sent it.
        object: Value,
        /// The Event's reason.
        reason: &'static str,
        /// What is wrong and the fix.
        message: String,
    },
}

#[derive(Debug, Default)]
struct Pending {
    spec: Option<SpecPart>,
    error: Option<String>,
    spec_patch: Option<Value>,
    status_patch: Option<Value>,
    delete: bool,
}

/// `b` composed onto `a`: applying the result is applying `a`, then `b` (RFC 7386).
#[must_use]
pub fn compose_patches(a: Option<Value>, b: Option<Value>) -> Option<Value> {
    match (a, b) {
        (Some(Value::Object(mut a)), Some(Value::Object(b))) => {
            for (key, value) in b {
                let merged = match (a.remove(&key), value) {
                    (Some(old @ Value::Object(_)), new @ Value::Object(_)) => {
                        compose_patches(Some(old), Some(new))
                    }
                    (_, new) => Some(new),
                };
                a.insert(key, merged.unwrap_or(Value::Null));
            }
            Some(Value::Object(a))
        }
        (a, None) => a,
        (_, b) => b,
    }
}

impl Pending {
    fn merge(&mut self, op: Op) {
        match op {
            Op::Write(w) => {
                if w.spec.is_some() {
                    self.spec = w.spec;
                }
                if w.error.is_some() {
                    self.error = w.error;
                }
            }
            Op::Patch(NodePatch { spec, status, .. }) => {
                self.spec_patch = compose_patches(self.spec_patch.take(), spec);
                self.status_patch = compose_patches(self.status_patch.take(), status);
            }
            Op::Delete(_) => self.delete = true,
            Op::Event { .. } => {}
        }
    }
}

/// Outcome of one node's writes.
enum Done {
    Ok,
    Retry(Pending),
}

async fn carry_out(
    api: Api<DynamicObject>,
    name: String,
    mut p: Pending,
    metrics: Metrics,
) -> (String, Done) {
    if p.delete {
        return match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                info!(node = %name, "deleted the CiliumNode of a deleted node");
                (name, Done::Ok)
            }
            Err(e) if status_code(&e) == Some(404) => (name, Done::Ok),
            Err(error) => {
                warn!(node = %name, %error, "deleting CiliumNode failed; will retry");
                (name, Done::Retry(p))
            }
        };
    }
    // Each subresource gets one merge patch: the typed part and the cloud manager's patch
    // composed. A part stays queued until its patch went through; the spec waits for the
    // status.
    // The status first, as Cilium writes it: an agent that sees an address in the spec's pool
    // finds its interface in the status already.
    let status = compose_patches(p.error.as_deref().map(status_patch), p.status_patch.clone());
    if let Some(patch) = status {
        match send(&api, &name, "status", &patch, &metrics).await {
            Sent::Done => (p.error, p.status_patch) = (None, None),
            Sent::Gone => return (name, Done::Ok),
            Sent::Failed => return (name, Done::Retry(p)),
        }
    }
    let spec = compose_patches(
        p.spec.as_ref().map(SpecPart::merge_patch),
        p.spec_patch.clone(),
    );
    if let Some(patch) = spec {
        match send(&api, &name, "spec", &patch, &metrics).await {
            Sent::Done => (p.spec, p.spec_patch) = (None, None),
            Sent::Gone => return (name, Done::Ok),
            Sent::Failed => return (name, Done::Retry(p)),
        }
    }
    (name, Done::Ok)
}

/// Outcome of one merge patch.
enum Sent {
    Done,
    /// The CiliumNode no longer exists: nothing left to write.
    Gone,
    Failed,
}

/// One merge patch of `part` (`spec`: the object; `status`: the status subresource).
async fn send(
    api: &Api<DynamicObject>,
    name: &str,
    part: &'static str,
    patch: &Value,
    metrics: &Metrics,
) -> Sent {
    let params = PatchParams::default();
    let result = if part == "status" {
        api.patch_status(name, &params, &Patch::Merge(patch)).await
    } else {
        api.patch(name, &params, &Patch::Merge(patch)).await
    };
    match result {
        Ok(_) => {
            metrics.writes.get_or_create(&PartLabels { part }).inc();
            Sent::Done
        }
        Err(e) if status_code(&e) == Some(404) => Sent::Gone,
        Err(error) => {
            warn!(node = %name, %error, part, "writing CiliumNode failed; will retry");
            Sent::Failed
        }
    }
}

/// Queue `op` for its node; an Event is posted at once, in the background.
fn queue(client: &Client, pending: &mut BTreeMap<String, Pending>, op: Op) {
    let name = match op {
        Op::Write(ref w) => w.node.clone(),
        Op::Patch(NodePatch { ref node, .. }) | Op::Delete(ref node) => node.clone(),
        Op::Event {
            object,
            reason,
            message,
        } => {
            let client = client.clone();
            tokio::spawn(async move {
                let posted = weft_k8s::events::post_warning(
                    &client,
                    &object,
                    reason,
                    &message,
                    "weft-operator",
                )
                .await;
                if let Err(error) = posted {
                    warn!(%error, "could not post an Event");
                }
            });
            return;
        }
    };
    pending.entry(name).or_default().merge(op);
}

/// Runs the writer until `ops` closes and everything queued was tried once more.
pub async fn run(client: Client, mut ops: mpsc::UnboundedReceiver<Op>, metrics: Metrics) {
    let api = Resource::CiliumNode.all(&client);
    let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
    let mut not_before: BTreeMap<String, Instant> = BTreeMap::new();
    let mut in_flight = FuturesUnordered::new();
    let mut busy = std::collections::BTreeSet::new();
    let mut open = true;
    loop {
        let now = Instant::now();
        not_before.retain(|_, t| *t > now);
        let due: Vec<String> = pending
            .keys()
            .filter(|n| !busy.contains(*n) && !not_before.contains_key(*n))
            .take(CONCURRENCY.saturating_sub(in_flight.len()))
            .cloned()
            .collect();
        for name in due {
            if let Some(p) = pending.remove(&name) {
                busy.insert(name.clone());
                not_before.insert(name.clone(), now + NODE_WRITE_INTERVAL);
                in_flight.push(carry_out(api.clone(), name, p, metrics.clone()));
            }
        }
        if !open && pending.is_empty() && in_flight.is_empty() {
            return;
        }
        let next_due = pending
            .keys()
            .filter_map(|n| not_before.get(n))
            .min()
            .copied();
        let sleep = next_due.map_or(Duration::from_hours(1), |t| {
            t.saturating_duration_since(now)
        });
        tokio::select! {
            op = ops.recv(), if open => match op {
                Some(op) => {
                    queue(&client, &mut pending, op);
                    while let Ok(op) = ops.try_recv() {
                        queue(&client, &mut pending, op);
                    }
                }
                None => open = false,
            },
            Some((name, done)) = in_flight.next(), if !in_flight.is_empty() => {
                busy.remove(&name);
                if let Done::Retry(mut failed) = done {
                    not_before.insert(name.clone(), Instant::now() + RETRY_AFTER);
                    // A newer part queued meanwhile wins over the failed one.
                    if let Some(newer) = pending.remove(&name) {
                        if newer.spec.is_some() { failed.spec = newer.spec; }
                        if newer.error.is_some() { failed.error = newer.error; }
                        failed.spec_patch = compose_patches(failed.spec_patch, newer.spec_patch);
                        failed.status_patch =
                            compose_patches(failed.status_patch, newer.status_patch);
                        failed.delete |= newer.delete;
                    }
                    pending.insert(name, failed);
                }
            },
            () = tokio::time::sleep(sleep) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn queued_patches_compose() {
        assert_eq!(
            compose_patches(
                Some(
                    json!({"spec": {"ipam": {"pool": {"10.0.0.1": {"resource": "a"}, "10.0.0.2": null}}}})
                ),
                Some(
                    json!({"spec": {"ipam": {"pool": {"10.0.0.2": {"resource": "a"}}, "pre-allocate": 8}}})
                ),
            ),
            Some(
                json!({"spec": {"ipam": {"pool": {"10.0.0.1": {"resource": "a"}, "10.0.0.2": {"resource": "a"}}, "pre-allocate": 8}}})
            )
        );
        assert_eq!(
            compose_patches(Some(json!({"a": {"b": 1}})), Some(json!({"a": null}))),
            Some(json!({"a": null}))
        );
        assert_eq!(
            compose_patches(None, Some(json!({"a": 1}))),
            Some(json!({"a": 1}))
        );
    }
}

//! The one task that writes CiliumNodes. The node manager hands it [`Write`]s; it keeps the
//! latest per node (a newer part replaces an older one not yet written), writes each node at
//! most once per second (Cilium batches with a 1 s trigger), several nodes at a time, and
//! retries what failed for a transient reason. Parts go as JSON merge patches of exactly the
//! fields the operator owns (`spec.ipam.podCIDRs` or `spec.ipam.pools.allocated`, and
//! `status.ipam.operator-status` through `/status`; in cloud modes the cloud manager's patches
//! of `spec.ipam.pool`, `status.azure` and its `status.ipam` fields, composed while queued), so
//! nothing another writer (the agent) owns is ever overwritten. Deletions of CiliumNodes (gone
//! nodes) go through here too. Which node goes next is the [`queue`]'s: a ready FIFO and a
//! time-ordered set of timers, so a burst of n nodes costs O(n log n), not a scan per wake-up.
//! The requests go through [`NodeApi`], the API server's in production and a recorder in the
//! call-sequence tests.

mod pending;
mod queue;
#[cfg(test)]
mod tests;

use std::time::Duration;

use futures::{StreamExt as _, stream::FuturesUnordered};
use kube::{
    Api, Client,
    api::{DeleteParams, DynamicObject, Patch, PatchParams},
};
use serde_json::Value;
use tokio::{sync::mpsc, time::Instant};
use tracing::{info, warn};
use weft_cluster_ipam::manager::{SpecPart, Write, status_patch};
use weft_k8s::{Resource, client::status_code};

pub use self::pending::compose_patches;
use self::{pending::Pending, queue::Queue};
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

/// Which part of a CiliumNode one merge patch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The object (`spec`).
    Spec,
    /// The `/status` subresource.
    Status,
}

impl Part {
    const fn name(self) -> &'static str {
        match self {
            Self::Spec => "spec",
            Self::Status => "status",
        }
    }
}

/// Outcome of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Done,
    /// The CiliumNode no longer exists: nothing left to write.
    Gone,
    /// A transient failure (logged): try again later.
    Failed,
}

/// The requests the writer makes; each logs its own failure.
trait NodeApi: Clone + Send + Sync + 'static {
    /// One merge patch of `part` of CiliumNode `name`.
    fn patch(&self, name: &str, part: Part, patch: &Value) -> impl Future<Output = Sent> + Send;
    /// Delete CiliumNode `name`.
    fn delete(&self, name: &str) -> impl Future<Output = Sent> + Send;
    /// Post a Warning Event about `object`, in the background.
    fn event(&self, object: Value, reason: &'static str, message: String);
}

/// The API server's CiliumNodes.
#[derive(Clone)]
struct Kube {
    client: Client,
    api: Api<DynamicObject>,
    metrics: Metrics,
}

impl NodeApi for Kube {
    async fn patch(&self, name: &str, part: Part, patch: &Value) -> Sent {
        let params = PatchParams::default();
        let result = match part {
            Part::Status => {
                self.api
                    .patch_status(name, &params, &Patch::Merge(patch))
                    .await
            }
            Part::Spec => self.api.patch(name, &params, &Patch::Merge(patch)).await,
        };
        let part = part.name();
        match result {
            Ok(_) => {
                self.metrics
                    .writes
                    .get_or_create(&PartLabels { part })
                    .inc();
                Sent::Done
            }
            Err(e) if status_code(&e) == Some(404) => Sent::Gone,
            Err(error) => {
                warn!(node = %name, %error, part, "writing CiliumNode failed; will retry");
                Sent::Failed
            }
        }
    }

    async fn delete(&self, name: &str) -> Sent {
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                info!(node = %name, "deleted the CiliumNode of a deleted node");
                Sent::Done
            }
            Err(e) if status_code(&e) == Some(404) => Sent::Gone,
            Err(error) => {
                warn!(node = %name, %error, "deleting CiliumNode failed; will retry");
                Sent::Failed
            }
        }
    }

    fn event(&self, object: Value, reason: &'static str, message: String) {
        let client = self.client.clone();
        tokio::spawn(async move {
            let posted =
                weft_k8s::events::post_warning(&client, &object, reason, &message, "weft-operator")
                    .await;
            if let Err(error) = posted {
                warn!(%error, "could not post an Event");
            }
        });
    }
}

/// Write `p` for node `name`; the parts that did not go through, if a request failed.
async fn carry_out(api: impl NodeApi, name: String, mut p: Pending) -> (String, Option<Pending>) {
    if p.delete {
        return match api.delete(&name).await {
            Sent::Done | Sent::Gone => (name, None),
            Sent::Failed => (name, Some(p)),
        };
    }
    // Each subresource gets one merge patch: the typed part and the cloud manager's patch
    // composed. A part stays queued until its patch went through; the spec waits for the
    // status.
    // The status first, as Cilium writes it: an agent that sees an address in the spec's pool
    // finds its interface in the status already.
    let status = compose_patches(p.error.as_deref().map(status_patch), p.status_patch.clone());
    if let Some(patch) = status {
        match api.patch(&name, Part::Status, &patch).await {
            Sent::Done => (p.error, p.status_patch) = (None, None),
            Sent::Gone => return (name, None),
            Sent::Failed => return (name, Some(p)),
        }
    }
    let spec = compose_patches(
        p.spec.as_ref().map(SpecPart::merge_patch),
        p.spec_patch.clone(),
    );
    if let Some(patch) = spec {
        match api.patch(&name, Part::Spec, &patch).await {
            Sent::Done => (p.spec, p.spec_patch) = (None, None),
            Sent::Gone => return (name, None),
            Sent::Failed => return (name, Some(p)),
        }
    }
    (name, None)
}

/// Queue `op` for its node; an Event is posted at once, in the background.
fn take(api: &impl NodeApi, waiting: &mut Queue, op: Op) {
    let node = match op {
        Op::Event {
            object,
            reason,
            message,
        } => {
            api.event(object, reason, message);
            return;
        }
        Op::Write(ref w) => w.node.clone(),
        Op::Patch(NodePatch { ref node, .. }) | Op::Delete(ref node) => node.clone(),
    };
    waiting.push(&node, |p| p.merge(op));
}

/// Runs the writer until `ops` closes and everything queued was tried once more.
pub async fn run(client: Client, ops: mpsc::UnboundedReceiver<Op>, metrics: Metrics) {
    let api = Resource::CiliumNode.all(&client);
    drive(
        Kube {
            client,
            api,
            metrics,
        },
        ops,
    )
    .await;
}

/// The writer's loop over any [`NodeApi`].
async fn drive(api: impl NodeApi, mut ops: mpsc::UnboundedReceiver<Op>) {
    let mut waiting = Queue::default();
    let mut in_flight = FuturesUnordered::new();
    let mut open = true;
    loop {
        let now = Instant::now();
        waiting.fire(now);
        while in_flight.len() < CONCURRENCY
            && let Some((name, parts)) = waiting.pop(now)
        {
            in_flight.push(carry_out(api.clone(), name, parts));
        }
        if !open && waiting.is_empty() && in_flight.is_empty() {
            return;
        }
        let wake = waiting
            .next_timer()
            .unwrap_or_else(|| now + Duration::from_hours(1));
        tokio::select! {
            op = ops.recv(), if open => match op {
                Some(op) => {
                    take(&api, &mut waiting, op);
                    while let Ok(op) = ops.try_recv() {
                        take(&api, &mut waiting, op);
                    }
                }
                None => open = false,
            },
            Some((name, failed)) = in_flight.next(), if !in_flight.is_empty() => {
                waiting.done(&name, failed, Instant::now());
            },
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

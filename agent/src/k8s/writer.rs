//! The one task that writes the own CiliumNode: `status.ipam.used` / `release-ips` through the
//! status subresource, `spec.ipam.pools` and the `CiliumInternalIP` entries of
//! `spec.addresses` through an update of the main resource.
//!
//! Writes are coalesced and debounced (at most one round per `ipam-cilium-node-update-rate`
//! after a successful write), sent only when they change the object, and conditional: each
//! carries the resourceVersion it was computed from, and a part is applied only where the
//! object still holds what the agent saw in that version (another writer — the operator adding
//! CIDRs — changed it otherwise; the agent recomputes from the newer object, which its watch
//! delivers). A 409 re-reads and retries; any other failure keeps the write queued, so no
//! `used` entry is ever dropped. A field that does not decode (another writer broke it) is
//! never overwritten: a part that covers it is held back until it is fixed. A 404 means the
//! CiliumNode was deleted: [`super::recreate`] is asked to create it again, and the write
//! stays queued for the object it creates.

use std::time::Duration;

use kube::api::PostParams;
use serde_json::Value;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{
    K8sError, Resource,
    resources::{decode, to_json},
    store::{Inner, lock},
};
use crate::{
    crd::node::CiliumNode,
    error::chain,
    store::{
        NodeWrite, merge_writes,
        writeback::{self, ADDRESSES, POOLS, RELEASE_IPS, USED},
    },
};

/// Conflicts retried at once before the write waits for the next round.
const CONFLICT_RETRIES: u32 = 5;

pub(super) async fn write_loop(inner: std::sync::Arc<Inner>) {
    let mut last_write: Option<Instant> = None;
    let mut retry = Duration::from_millis(500);
    loop {
        inner.wake.notified().await;
        if let Some(last) = last_write {
            tokio::time::sleep_until(last + inner.debounce).await;
        }
        match write_pending(&inner).await {
            Ok(true) => {
                last_write = Some(Instant::now());
                retry = Duration::from_millis(500);
            }
            Ok(false) => {}
            Err(error) => {
                warn!(error = %chain(&error), "writing CiliumNode; will retry");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(inner.debounce.max(Duration::from_secs(1)));
                inner.wake.notify_one();
            }
        }
    }
}

/// Write what is pending now. Returns whether a request changed the object.
///
/// # Errors
/// The write failed; it stays queued (merged under any newer one).
pub(super) async fn write_pending(inner: &Inner) -> Result<bool, K8sError> {
    let _writing = inner.writing.lock().await;
    let Some((write, base)) = lock(&inner.pending).take() else {
        return Ok(false);
    };
    let result = write_once(inner, &write, &base).await;
    if result.is_err() {
        let mut pending = lock(&inner.pending);
        let (newer, newer_base) = match pending.take() {
            Some((w, b)) => (Some(w), b),
            None => (None, base),
        };
        let merged = match newer {
            Some(n) => merge_writes(Some(write), n),
            None => write,
        };
        *pending = Some((merged, newer_base));
    }
    result
}

async fn write_once(inner: &Inner, write: &NodeWrite, base: &str) -> Result<bool, K8sError> {
    let api = Resource::CiliumNode.all(&inner.client);
    let base_doc = inner.version(base);
    let mut fresh = match inner.newest() {
        Some(doc) => doc,
        None => get(inner).await?,
    };
    let mut changed_any = false;
    for _ in 0..CONFLICT_RETRIES {
        let (status, spec) = parts(&fresh, base_doc.as_ref(), base, write);
        let mut status_doc = fresh.clone();
        let status_changed = writeback::apply(&mut status_doc, &status);
        let mut spec_doc = fresh.clone();
        let spec_changed = writeback::apply(&mut spec_doc, &spec);
        if !status_changed && !spec_changed {
            return Ok(changed_any);
        }
        let pp = PostParams::default();
        let answer = if status_changed {
            crate::faults::hit_async(crate::faults::Point::StatusWrite).await?;
            api.replace_status(
                &inner.node_name,
                &pp,
                &Resource::CiliumNode.object(status_doc)?,
            )
            .await
            .map(|o| (o, "ciliumnodes/status"))
        } else {
            api.replace(
                &inner.node_name,
                &pp,
                &Resource::CiliumNode.object(spec_doc)?,
            )
            .await
            .map(|o| (o, "ciliumnodes"))
        };
        match answer {
            Ok((object, what)) => {
                inner.stats.wrote();
                changed_any = true;
                fresh = to_json(&object);
                inner.remember(&fresh);
                debug!(write = what, version = %fresh["metadata"]["resourceVersion"], "CiliumNode written");
                // The other part (if any) goes next, against the version just written.
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                inner
                    .stats
                    .conflicts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                info!("Conflict when updating local CiliumNode resource, will retry");
                fresh = get(inner).await?;
            }
            Err(error) => {
                inner
                    .stats
                    .failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let resource = if status_changed {
                    "ciliumnodes/status"
                } else {
                    "ciliumnodes"
                };
                return Err(failed(inner, "update", resource, error));
            }
        }
    }
    Err(K8sError::Api {
        verb: "update",
        resource: "ciliumnodes".into(),
        source: kube::Error::Api(Box::new(
            kube::core::Status::failure(
                &format!("{CONFLICT_RETRIES} conflicts in a row"),
                "Conflict",
            )
            .with_code(409),
        )),
    })
}

/// Split `write` into its status and spec parts, keeping only the parts that may be applied to
/// `fresh`: the object still holds, at that path, what the agent saw in version `base`, and no
/// undecodable field lies under the path.
fn parts(
    fresh: &Value,
    base_doc: Option<&Value>,
    base: &str,
    write: &NodeWrite,
) -> (NodeWrite, NodeWrite) {
    let same_version = fresh["metadata"]["resourceVersion"].as_str() == Some(base);
    let invalid = decode::<CiliumNode>(fresh).err();
    let allowed = |path: &[&str]| {
        let dotted = path.join(".");
        if let Some(invalid) = invalid.as_ref().filter(|e| e.is_under(&dotted)) {
            warn!(field = %dotted, reason = %chain(invalid), "not writing a part of CiliumNode that another writer made invalid");
            return false;
        }
        same_version
            || base_doc.is_some_and(|b| writeback::get(b, path) == writeback::get(fresh, path))
    };
    let status = NodeWrite {
        used: write.used.clone().filter(|_| allowed(&USED)),
        release_ips: write.release_ips.clone().filter(|_| allowed(&RELEASE_IPS)),
        pools: None,
        cilium_internal_ips: None,
    };
    let spec = NodeWrite {
        pools: write.pools.clone().filter(|_| allowed(&POOLS)),
        cilium_internal_ips: write
            .cilium_internal_ips
            .clone()
            .filter(|_| allowed(&ADDRESSES)),
        ..NodeWrite::default()
    };
    (status, spec)
}

async fn get(inner: &Inner) -> Result<Value, K8sError> {
    let object = Resource::CiliumNode
        .all(&inner.client)
        .get(&inner.node_name)
        .await
        .map_err(|e| failed(inner, "get", "ciliumnodes", e))?;
    let doc = to_json(&object);
    inner.remember(&doc);
    Ok(doc)
}

/// Classify a failed request; a 404 (the CiliumNode was deleted) also asks for it to be
/// created again.
fn failed(inner: &Inner, verb: &'static str, resource: &str, error: kube::Error) -> K8sError {
    if super::status_code(&error) == Some(404) {
        inner.node_gone();
    }
    K8sError::from_api(verb, resource, error)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::crd::ipam::{AllocationIp, IpamPoolSpec};

    fn write() -> NodeWrite {
        NodeWrite {
            used: Some(BTreeMap::from([(
                "10.0.0.5".to_owned(),
                AllocationIp::default(),
            )])),
            release_ips: None,
            pools: Some(IpamPoolSpec::default()),
            cilium_internal_ips: None,
        }
    }

    #[test]
    fn parts_apply_when_the_base_still_holds() {
        let base = json!({"metadata": {"resourceVersion": "5"}, "spec": {"ipam": {"pools": {"allocated": [{"pool": "a"}]}}}});
        let fresh = json!({"metadata": {"resourceVersion": "6"}, "spec": {"ipam": {"pools": {"allocated": [{"pool": "a"}]}}}, "status": {"x": 1}});
        let (status, spec) = parts(&fresh, Some(&base), "5", &write());
        assert!(status.used.is_some() && spec.pools.is_some());
    }

    #[test]
    fn a_part_another_writer_changed_waits_for_a_recompute() {
        let base = json!({"metadata": {"resourceVersion": "5"}, "spec": {"ipam": {"pools": {"allocated": [{"pool": "a"}]}}}});
        let fresh = json!({"metadata": {"resourceVersion": "6"}, "spec": {"ipam": {"pools": {"allocated": [{"pool": "a", "cidrs": ["10.0.0.0/24"]}]}}}});
        let (status, spec) = parts(&fresh, Some(&base), "5", &write());
        assert!(status.used.is_some(), "status.ipam.used did not change");
        assert!(spec.pools.is_none(), "the operator added a CIDR since");
        let (_, spec) = parts(&fresh, None, "4", &write());
        assert!(spec.pools.is_none(), "unknown base: wait");
    }

    #[test]
    fn the_router_goes_with_the_spec_and_waits_for_another_writers_addresses() {
        let router = NodeWrite {
            cilium_internal_ips: Some(vec!["10.0.0.1".parse().expect("ip")]),
            ..NodeWrite::default()
        };
        let base = json!({"metadata": {"resourceVersion": "5"}, "spec": {"addresses": [{"type": "InternalIP", "ip": "192.0.2.1"}]}});
        let (status, spec) = parts(&base, Some(&base), "5", &router);
        assert!(status.cilium_internal_ips.is_none() && spec.cilium_internal_ips.is_some());
        let fresh = json!({"metadata": {"resourceVersion": "6"}, "spec": {"addresses": [{"type": "InternalIP", "ip": "192.0.2.2"}]}});
        let (_, spec) = parts(&fresh, Some(&base), "5", &router);
        assert!(
            spec.cilium_internal_ips.is_none(),
            "discovery changed spec.addresses since"
        );
    }

    #[test]
    fn an_invalid_field_is_never_overwritten() {
        let fresh = json!({"metadata": {"resourceVersion": "6"}, "spec": {"ipam": {"pools": {"allocated": [{"pool": "a", "cidrs": ["bogus"]}]}}}});
        let (status, spec) = parts(&fresh, Some(&fresh), "6", &write());
        assert!(spec.pools.is_none());
        assert!(status.used.is_some(), "other parts still go");
    }
}

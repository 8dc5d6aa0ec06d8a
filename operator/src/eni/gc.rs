//! The ENI garbage collection (Cilium's `eni_gc.go`): ENIs the operator created but never
//! attached, or that were left detached (an operator killed between creation and attachment,
//! an instance gone without delete-on-termination), carry the cluster's GC tags; every
//! interval the ENIs marked at the previous round are deleted, then up to [`MAX_PER_ROUND`]
//! detached ENIs with the tags are marked. An ENI is therefore deleted only after it was seen
//! detached twice, one interval apart; an ENI without the tags is never touched.

use std::{collections::BTreeMap, time::Duration};

use tracing::{info, warn};

use super::ops::Ec2Ops;

/// ENIs marked per round at most.
pub const MAX_PER_ROUND: usize = 25;
/// The tag every ENI the operator creates carries while GC runs.
pub const MANAGED_TAG: &str = "io.cilium/cilium-managed";
/// The tag naming the cluster.
pub const CLUSTER_TAG: &str = "io.cilium/cluster-name";

/// What the GC deletes and how often.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcSettings {
    /// `eni-gc-interval` (zero: no GC).
    pub interval: Duration,
    /// The tags an ENI must carry to be collected.
    pub tags: BTreeMap<String, String>,
    /// `subnet-ids-filter`: only ENIs in these subnets (empty: any).
    pub subnet_ids: Vec<String>,
}

/// The GC tags: `eni-gc-tags` when given, else the managed tag and the cluster's name.
#[must_use]
pub fn gc_tags(given: &BTreeMap<String, String>, cluster: &str) -> BTreeMap<String, String> {
    if !given.is_empty() {
        return given.clone();
    }
    BTreeMap::from([
        (MANAGED_TAG.to_owned(), "true".to_owned()),
        (CLUSTER_TAG.to_owned(), cluster.to_owned()),
    ])
}

/// One GC round: delete `marked` (errors are logged: the ENI may be gone or attached again),
/// then return the detached tagged ENIs to delete next round.
pub async fn round<C: Ec2Ops>(ops: &C, settings: &GcSettings, marked: Vec<String>) -> Vec<String> {
    for eni in marked {
        match ops.delete(&eni).await {
            Ok(()) => {
                info!(%eni, "deleted a leaked ENI (detached, carrying the GC tags, two rounds in a row)");
            }
            Err(error) => {
                warn!(%eni, %error, "could not delete a leaked ENI; trying again if it is still detached");
            }
        }
    }
    match ops.detached(&settings.tags, &settings.subnet_ids).await {
        Ok(mut found) => {
            found.truncate(MAX_PER_ROUND);
            if !found.is_empty() {
                info!(enis = ?found, "found detached ENIs carrying the GC tags; deleting them at the next round if still detached");
            }
            found
        }
        Err(error) => {
            warn!(%error, "listing detached ENIs for the ENI GC failed; trying again next round");
            Vec::new()
        }
    }
}

/// Rounds every `settings.interval` for ever (none when it is zero).
pub async fn run<C: Ec2Ops>(ops: &C, settings: &GcSettings) {
    if settings.interval.is_zero() {
        return;
    }
    let mut marked = Vec::new();
    loop {
        marked = round(ops, settings, marked).await;
        tokio::time::sleep(settings.interval).await;
    }
}

#[cfg(test)]
mod tests;

//! One collection run's decisions (Cilium's CRD identity GC), pure: an identity a
//! CiliumEndpoint uses is alive; one without a sign of life for the heartbeat timeout is first
//! marked (annotation `io.cilium.heartbeat`, which is itself a change and so a new sign of
//! life), and deleted at a later run if it is still unused a timeout after the mark. Deletes
//! carry the uid and resourceVersion the decision was made on, so an identity changed
//! meanwhile (re-used, its mark removed) is not deleted.

use std::{collections::BTreeSet, time::Instant};

use super::heartbeat::Heartbeats;

pub use weft_k8s::crd::identity::HEARTBEAT_ANNOTATION;

/// A CiliumIdentity as the collector sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityRecord {
    /// The object's name (the numeric identity).
    pub name: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// Whether it carries [`HEARTBEAT_ANNOTATION`].
    pub marked: bool,
}

/// What to do with one identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Set [`HEARTBEAT_ANNOTATION`] (if the object is still at this resourceVersion).
    Mark(IdentityRecord),
    /// Delete it with uid and resourceVersion preconditions.
    Delete(IdentityRecord),
}

/// The decisions of one run over `identities`, given the identities CiliumEndpoints use
/// (`in_use`, by name); refreshes the heartbeats of those in use.
pub fn sweep(
    identities: &[IdentityRecord],
    in_use: &BTreeSet<String>,
    heartbeats: &mut Heartbeats,
    now: Instant,
) -> Vec<Action> {
    let mut actions = Vec::new();
    for identity in identities {
        if in_use.contains(&identity.name) {
            heartbeats.mark_alive(&identity.name, now);
        } else if !heartbeats.is_alive(&identity.name, now) {
            actions.push(if identity.marked {
                Action::Delete(identity.clone())
            } else {
                Action::Mark(identity.clone())
            });
        }
    }
    actions
}

//! What the writer holds for one CiliumNode between the node manager's word and the API
//! server's answer: the parts queued and not yet written ([`Pending`]), and how a newer part is
//! folded onto an older one (a typed part replaces, a merge patch composes, a deletion wins).
//! Pure data; the writer's loop and its queue decide when a node's parts go out.

use serde_json::Value;
use weft_cluster_ipam::manager::SpecPart;

use super::Op;
use crate::cloud::manager::NodePatch;

/// The parts of one CiliumNode waiting to be written.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Pending {
    /// `spec.ipam.podCIDRs` or `spec.ipam.pools.allocated`.
    pub spec: Option<SpecPart>,
    /// `status.ipam.operator-status.error`.
    pub error: Option<String>,
    /// The cloud manager's merge patch of the object.
    pub spec_patch: Option<Value>,
    /// The cloud manager's merge patch of `/status`.
    pub status_patch: Option<Value>,
    /// Delete the CiliumNode (what else is queued is dropped with it).
    pub delete: bool,
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
    /// Fold `op` (one of this node's) onto what is queued.
    pub fn merge(&mut self, op: Op) {
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

    /// Fold `newer` (queued while these parts were in flight and failed) onto these: a newer
    /// part wins over a failed one.
    pub fn absorb(&mut self, newer: Self) {
        if newer.spec.is_some() {
            self.spec = newer.spec;
        }
        if newer.error.is_some() {
            self.error = newer.error;
        }
        self.spec_patch = compose_patches(self.spec_patch.take(), newer.spec_patch);
        self.status_patch = compose_patches(self.status_patch.take(), newer.status_patch);
        self.delete |= newer.delete;
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

    #[test]
    fn a_newer_part_wins_over_a_failed_one() {
        let mut failed = Pending {
            spec: Some(SpecPart::PodCidrs(vec!["10.0.0.0/24".into()])),
            error: Some("old".into()),
            status_patch: Some(json!({"a": 1, "b": 1})),
            ..Pending::default()
        };
        failed.absorb(Pending {
            error: Some(String::new()),
            status_patch: Some(json!({"b": 2})),
            delete: true,
            ..Pending::default()
        });
        assert_eq!(
            failed,
            Pending {
                spec: Some(SpecPart::PodCidrs(vec!["10.0.0.0/24".into()])),
                error: Some(String::new()),
                spec_patch: None,
                status_patch: Some(json!({"a": 1, "b": 2})),
                delete: true,
            }
        );
    }
}

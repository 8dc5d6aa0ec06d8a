//! The `cilium.io/v2` `CiliumIdentity` (cluster-scoped; Cilium
//! `pkg/k8s/apis/cilium.io/v2/types.go`): the CRD-backed identity allocator's record of one
//! security identity. The object's name is the numeric identity, and its top-level
//! `security-labels` map (`source:key` → value) is the label set that defines it. Owns the JSON
//! shape only; allocating identities is not done here.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{Extra, ObjectMeta, ObjectType, TypeMeta};

/// The annotation with which the operator's identity garbage collection marks an identity no
/// endpoint uses (the time it was marked, RFC 3339); an agent that uses the identity again
/// removes it (Cilium's `HeartBeatAnnotation`).
pub const HEARTBEAT_ANNOTATION: &str = "io.cilium.heartbeat";

/// A `CiliumIdentity`, named after its numeric identity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CiliumIdentity {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// Object metadata; the name is the numeric identity in decimal, the labels are the
    /// Kubernetes-sourced subset of `security-labels` (for `kubectl get ciliumid -l`).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::object_meta")]
    pub metadata: ObjectMeta,
    /// The labels that define the identity, keyed `source:key` (`k8s:app`, `reserved:host`, …).
    /// No `omitempty` in Go: always written, `{}` when empty.
    #[serde(rename = "security-labels", default)]
    pub security_labels: BTreeMap<String, String>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectType for CiliumIdentity {
    const API_VERSION: &'static str = "cilium.io/v2";
    const KIND: &'static str = "CiliumIdentity";
}

impl CiliumIdentity {
    /// A `CiliumIdentity` for numeric identity `id` with `security_labels`, with `apiVersion`
    /// and `kind` set.
    #[must_use]
    pub fn new(id: u32, security_labels: BTreeMap<String, String>) -> Self {
        Self {
            types: TypeMeta::of::<Self>(),
            metadata: ObjectMeta {
                name: id.to_string(),
                ..ObjectMeta::default()
            },
            security_labels,
            extra: Extra::new(),
        }
    }

    /// The numeric identity (the object's name), `None` if the name is not a decimal `u32`.
    #[must_use]
    pub fn id(&self) -> Option<u32> {
        let name = &self.metadata.name;
        // Identity names are canonical decimal: `+5` or `007` name no identity.
        let canonical = !name.starts_with('+') && (name == "0" || !name.starts_with('0'));
        canonical.then(|| name.parse().ok()).flatten()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn upstream_shaped_identity_round_trips() {
        // As `kubectl get ciliumid 48712 -o json` prints one the operator allocated.
        let doc = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumIdentity",
            "metadata": {
                "name": "48712",
                "labels": {
                    "app": "web",
                    "io.kubernetes.pod.namespace": "default",
                    "io.cilium.k8s.policy.serviceaccount": "default"
                },
                "resourceVersion": "1017",
                "uid": "7d0e8f4a-1b2c-4d3e-9f5a-6b7c8d9e0f1a",
                "generation": 1,
                "creationTimestamp": "2026-03-01T10:00:00Z"
            },
            "security-labels": {
                "k8s:app": "web",
                "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name": "default",
                "k8s:io.cilium.k8s.policy.cluster": "default",
                "k8s:io.cilium.k8s.policy.serviceaccount": "default",
                "k8s:io.kubernetes.pod.namespace": "default"
            },
            "futureTopLevel": {"kept": true}
        });
        let identity: CiliumIdentity = serde_json::from_value(doc.clone()).expect("decodes");
        assert_eq!(identity.id(), Some(48712));
        assert_eq!(identity.security_labels["k8s:app"], "web");
        assert_eq!(identity.extra["futureTopLevel"], json!({"kept": true}));
        assert_eq!(identity.metadata.extra["generation"], 1);
        assert_eq!(serde_json::to_value(&identity).expect("encodes"), doc);
    }

    #[test]
    fn new_identity_always_writes_security_labels() {
        let identity = CiliumIdentity::new(256, BTreeMap::new());
        assert_eq!(identity.id(), Some(256));
        assert_eq!(
            serde_json::to_value(&identity).expect("encodes"),
            json!({
                "apiVersion": "cilium.io/v2",
                "kind": "CiliumIdentity",
                "metadata": {"name": "256"},
                "security-labels": {}
            })
        );
    }

    #[test]
    fn id_needs_a_canonical_decimal_name() {
        for (name, want) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("4294967295", Some(u32::MAX)),
            ("4294967296", None),
            ("007", None),
            ("+5", None),
            ("-1", None),
            ("", None),
            ("web", None),
        ] {
            let mut identity = CiliumIdentity::default();
            identity.metadata.name = name.to_owned();
            assert_eq!(identity.id(), want, "{name:?}");
        }
    }
}

//! The `cilium.io/v2` `CiliumEndpoint` (namespaced, named after its pod; Cilium
//! `pkg/k8s/apis/cilium.io/v2/types.go` `EndpointStatus`) in Cilium's wire format: the status
//! parts other nodes read (endpoint id, security identity, addresses, host node, encryption key,
//! state). Everything else the agent publishes (controllers, policy, health, log, named ports,
//! …) is kept verbatim in `extra`. Owns the JSON shape only; who writes what is decided
//! elsewhere.
//!
//! Go's `omitempty` is mirrored for strings, numbers and slices. Struct-valued fields Go always
//! writes (`status`, `encryption`) are `Option`s, so whatever was read is written back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    meta::{Extra, ObjectMeta, ObjectType, TypeMeta, is_zero},
    node::{AddressPair, EncryptionSpec},
};

/// A `CiliumEndpoint`: one per pod, in the pod's namespace and named after it. It has no
/// status subresource; the whole object is written at once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CiliumEndpoint {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// Object metadata (always written, as Go's `json:"metadata"`).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::object_meta")]
    pub metadata: ObjectMeta,
    /// What the agent that owns the endpoint reports about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EndpointStatus>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectType for CiliumEndpoint {
    const API_VERSION: &'static str = "cilium.io/v2";
    const KIND: &'static str = "CiliumEndpoint";
}

impl CiliumEndpoint {
    /// An empty `CiliumEndpoint` for pod `namespace/name`, with `apiVersion` and `kind` set.
    #[must_use]
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            types: TypeMeta::of::<Self>(),
            metadata: ObjectMeta {
                name: name.into(),
                namespace: namespace.into(),
                ..ObjectMeta::default()
            },
            ..Self::default()
        }
    }
}

/// `status` of a `CiliumEndpoint` (Cilium `EndpointStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointStatus {
    /// Endpoint id, local to the agent of the node the endpoint runs on; 0 when unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub id: i64,
    /// Security identity of the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<EndpointIdentity>,
    /// Addresses of the endpoint and the node it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<EndpointNetworking>,
    /// Encryption key index used for the endpoint's traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionSpec>,
    /// Endpoint state (`creating`, `waiting-for-identity`, `not-ready`, `waiting-to-regenerate`,
    /// `regenerating`, `restoring`, `ready`, `disconnecting`, `disconnected`, `invalid`); kept as
    /// text so a state added later still decodes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// Unmodelled fields (`controllers`, `policy`, `health`, `log`, `named-ports`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl EndpointStatus {
    /// The state of an endpoint whose datapath is fully set up.
    pub const STATE_READY: &'static str = "ready";
}

/// `status.identity` (Cilium `EndpointIdentity`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointIdentity {
    /// Numeric security identity; 0 when not yet resolved.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub id: i64,
    /// Labels of the identity, each as `source:key=value`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `status.networking` (Cilium `EndpointNetworking`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointNetworking {
    /// The endpoint's addresses (no `omitempty` in Go: always written, `[]` when empty).
    #[serde(default)]
    pub addressing: Vec<AddressPair>,
    /// Address of the node the endpoint runs on, reachable from the other nodes.
    #[serde(rename = "node", default, skip_serializing_if = "String::is_empty")]
    pub node_ip: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn upstream_shaped_endpoint_round_trips() {
        // As `kubectl get cep -o json` prints one written by cilium-agent 1.19.
        let doc = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumEndpoint",
            "metadata": {
                "name": "web-6d4cf56db6-x2x7k",
                "namespace": "default",
                "labels": {"app": "web", "pod-template-hash": "6d4cf56db6"},
                "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Pod", "name": "web-6d4cf56db6-x2x7k",
                    "uid": "2c1f1f7e-9d6b-4f0e-8a4e-3f1e1c0b9a77", "blockOwnerDeletion": true
                }],
                "resourceVersion": "90210",
                "uid": "c8a4b1f2-5e3d-4a6b-8c7d-1e2f3a4b5c6d",
                "generation": 1,
                "creationTimestamp": "2026-03-01T10:00:00Z"
            },
            "status": {
                "id": 1291,
                "identity": {
                    "id": 48712,
                    "labels": [
                        "k8s:app=web",
                        "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=default",
                        "k8s:io.kubernetes.pod.namespace=default"
                    ]
                },
                "networking": {
                    "addressing": [{"ipv4": "10.0.1.23", "ipv6": "fd00::1:17"}],
                    "node": "192.168.1.10"
                },
                "encryption": {},
                "external-identifiers": {
                    "container-id": "3f9c2b",
                    "k8s-namespace": "default",
                    "k8s-pod-name": "web-6d4cf56db6-x2x7k",
                    "pod-name": "default/web-6d4cf56db6-x2x7k"
                },
                "policy": {
                    "ingress": {"enforcing": false, "state": "<status disabled>"},
                    "egress": {"enforcing": false, "state": "<status disabled>"}
                },
                "state": "ready",
                "named-ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
            }
        });
        let cep: CiliumEndpoint = serde_json::from_value(doc.clone()).expect("decodes");
        let status = cep.status.as_ref().expect("status");
        assert_eq!(status.id, 1291);
        assert_eq!(status.identity.as_ref().map(|i| i.id), Some(48712));
        let networking = status.networking.as_ref().expect("networking");
        assert_eq!(networking.addressing[0].ipv4, "10.0.1.23");
        assert_eq!(networking.node_ip, "192.168.1.10");
        assert_eq!(status.encryption, Some(EncryptionSpec::default()));
        assert_eq!(status.state, EndpointStatus::STATE_READY);
        assert!(status.extra.contains_key("policy"));
        assert_eq!(serde_json::to_value(&cep).expect("encodes"), doc);
    }

    #[test]
    fn unknown_fields_survive_at_every_level() {
        let doc = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumEndpoint",
            "metadata": {"name": "p", "namespace": "n", "finalizers": ["x"]},
            "status": {
                "identity": {"id": 5, "future-identity": 1},
                "networking": {"addressing": [{"ipv4": "10.0.0.5", "zone": "a"}], "future": []},
                "encryption": {"key": 3, "spi": 9},
                "future-status": {"deep": {"er": true}}
            },
            "futureTopLevel": null
        });
        let cep: CiliumEndpoint = serde_json::from_value(doc.clone()).expect("decodes");
        assert_eq!(serde_json::to_value(&cep).expect("encodes"), doc);
    }

    #[test]
    fn new_endpoint_writes_go_shape() {
        let mut cep = CiliumEndpoint::new("default", "db");
        cep.status = Some(EndpointStatus {
            networking: Some(EndpointNetworking::default()),
            ..EndpointStatus::default()
        });
        assert_eq!(
            serde_json::to_value(&cep).expect("encodes"),
            json!({
                "apiVersion": "cilium.io/v2",
                "kind": "CiliumEndpoint",
                "metadata": {"name": "db", "namespace": "default"},
                "status": {"networking": {"addressing": []}}
            })
        );
    }
}

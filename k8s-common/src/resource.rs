//! The resources weft talks to, as (group, version, kind, plural) for `DynamicObject` APIs,
//! and the decoding of a `DynamicObject` into a `crate::crd` wire type with the path of the
//! field that does not fit.

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A JSON document that is not a Kubernetes object of the resource it was meant for.
#[derive(Debug, thiserror::Error)]
#[error("{resource}")]
pub struct DecodeError {
    /// The resource's plural name.
    pub resource: String,
    /// What is wrong.
    #[source]
    pub source: serde_json::Error,
}

/// A JSON document that does not decode into a wire type: the field at `path` has the wrong
/// form.
#[derive(Debug, thiserror::Error)]
#[error("field {path}")]
pub struct FieldError {
    /// The field's path (`spec.ipam.pools.allocated[0].cidrs[1]`; `.` for the document).
    pub path: String,
    /// What is wrong with it.
    #[source]
    pub source: serde_json::Error,
}

impl FieldError {
    /// Whether the field is `dotted` or lies under it (`spec.ipam` holds `spec.ipam.pool`).
    #[must_use]
    pub fn is_under(&self, dotted: &str) -> bool {
        self.path
            .strip_prefix(dotted)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    }
}

/// A resource weft reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// Core v1 `nodes`.
    Node,
    /// Core v1 `pods`.
    Pod,
    /// Core v1 `namespaces`.
    Namespace,
    /// Core v1 `events`.
    Event,
    /// `cilium.io/v2` `ciliumnodes`.
    CiliumNode,
    /// `cilium.io/v2alpha1` `ciliumpodippools`.
    CiliumPodIpPool,
    /// `cilium.io/v2` `ciliumpodippools` (with `reservedRanges`; served by weft's CRD).
    CiliumPodIpPoolV2,
    /// `cilium.io/v2` `ciliumnodeconfigs`.
    CiliumNodeConfig,
    /// `cilium.io/v2` `ciliumendpoints`.
    CiliumEndpoint,
    /// `cilium.io/v2` `ciliumidentities`.
    CiliumIdentity,
}

impl Resource {
    /// (group, version, kind, plural).
    #[must_use]
    pub const fn gvkp(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Self::Node => ("", "v1", "Node", "nodes"),
            Self::Pod => ("", "v1", "Pod", "pods"),
            Self::Namespace => ("", "v1", "Namespace", "namespaces"),
            Self::Event => ("", "v1", "Event", "events"),
            Self::CiliumNode => ("cilium.io", "v2", "CiliumNode", "ciliumnodes"),
            Self::CiliumPodIpPool => (
                "cilium.io",
                "v2alpha1",
                "CiliumPodIPPool",
                "ciliumpodippools",
            ),
            Self::CiliumPodIpPoolV2 => ("cilium.io", "v2", "CiliumPodIPPool", "ciliumpodippools"),
            Self::CiliumNodeConfig => ("cilium.io", "v2", "CiliumNodeConfig", "ciliumnodeconfigs"),
            Self::CiliumEndpoint => ("cilium.io", "v2", "CiliumEndpoint", "ciliumendpoints"),
            Self::CiliumIdentity => ("cilium.io", "v2", "CiliumIdentity", "ciliumidentities"),
        }
    }

    /// The plural name (as RBAC rules and error messages name it).
    #[must_use]
    pub const fn plural(self) -> &'static str {
        self.gvkp().3
    }

    /// kube's description of the resource.
    #[must_use]
    pub fn api_resource(self) -> ApiResource {
        let (group, version, kind, plural) = self.gvkp();
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version,
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        }
    }

    /// An API over the objects of this resource in `namespace`.
    #[must_use]
    pub fn namespaced(self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.api_resource())
    }

    /// An API over every object of this resource (all namespaces for namespaced ones).
    #[must_use]
    pub fn all(self, client: &Client) -> Api<DynamicObject> {
        Api::all_with(client.clone(), &self.api_resource())
    }

    /// A JSON document of this resource as the object kube sends.
    ///
    /// # Errors
    /// [`DecodeError`] if `doc` lacks the object's shape (no `metadata`).
    pub fn object(self, doc: Value) -> Result<DynamicObject, DecodeError> {
        serde_json::from_value(doc).map_err(|e| DecodeError {
            resource: self.plural().to_owned(),
            source: e,
        })
    }

    /// `plural/[namespace/]name` of an object, for logs and problem reports.
    #[must_use]
    pub fn key(self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if !ns.is_empty() => format!("{}/{ns}/{name}", self.plural()),
            _ => format!("{}/{name}", self.plural()),
        }
    }
}

/// An object as plain JSON (what the API server sent, field for field).
#[must_use]
pub fn to_json(object: &DynamicObject) -> Value {
    // DynamicObject is metadata plus a JSON map; serialising it cannot fail.
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// Decode JSON into a wire type; the error names the path of the field that does not fit.
///
/// # Errors
/// The field at the returned path has the wrong form.
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| FieldError {
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::node::CiliumNode;

    #[test]
    fn decode_names_the_bad_field() {
        let bad = json!({
            "metadata": {"name": "n1"},
            "spec": {"ipam": {"pools": {"allocated": [{"pool": "a", "cidrs": ["10.0.0.0/24", "banana"]}]}}}
        });
        let e = decode::<CiliumNode>(&bad).expect_err("bad CIDR");
        assert_eq!(e.path, "spec.ipam.pools.allocated[0].cidrs[1]");
        assert!(e.source.is_data(), "{}", e.source);
        assert!(e.is_under("spec.ipam.pools") && e.is_under("spec.ipam"));
        assert!(!e.is_under("spec.ipam.pool") && !e.is_under("status"));
    }

    #[test]
    fn api_versions() {
        assert_eq!(Resource::Pod.api_resource().api_version, "v1");
        assert_eq!(
            Resource::CiliumPodIpPool.api_resource().api_version,
            "cilium.io/v2alpha1"
        );
        assert_eq!(
            Resource::CiliumNodeConfig.key(Some("kube-system"), "x"),
            "ciliumnodeconfigs/kube-system/x"
        );
    }
}

//! The `CiliumPodIPPool` (Cilium `ippool_types.go`), `cilium.io/v2alpha1` and `v2`: per-family
//! CIDRs and mask sizes, first/last-IP flags, pod and namespace selectors, the skip-masquerade
//! annotation, and (v2 only) per-CIDR `pool` entries with `reservedRanges`. One type serves both
//! versions: v2alpha1 objects simply have no `pool` entries. The agent reads pools to select one
//! for a pod; the operator carves node blocks out of them. Neither rule lives here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{Extra, LabelSelector, ObjectMeta, ObjectType, TypeMeta};

/// Pool annotation: `"true"` (exactly) makes pods of this pool skip masquerading.
pub const SKIP_MASQUERADE_ANNOTATION: &str = "ipam.cilium.io/skip-masquerade";

/// A `CiliumPodIPPool` (cluster-scoped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CiliumPodIPPool {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// Object metadata; the name is the pool name.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::object_meta")]
    pub metadata: ObjectMeta,
    /// The pool.
    #[serde(default)]
    pub spec: IpPoolSpec,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectType for CiliumPodIPPool {
    /// The version Cilium's operators serve (v2 is weft's, with `reservedRanges`).
    const API_VERSION: &'static str = "cilium.io/v2alpha1";
    const KIND: &'static str = "CiliumPodIPPool";
}

impl CiliumPodIPPool {
    /// `apiVersion` of the v2 `CiliumPodIPPool` (with `reservedRanges`).
    pub const API_VERSION_V2: &'static str = "cilium.io/v2";

    /// The pool name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// Whether the pool carries `ipam.cilium.io/skip-masquerade: "true"` (exact string).
    #[must_use]
    pub fn skip_masquerade(&self) -> bool {
        self.metadata
            .annotations
            .get(SKIP_MASQUERADE_ANNOTATION)
            .is_some_and(|v| v == "true")
    }
}

/// `spec` of a `CiliumPodIPPool`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpPoolSpec {
    /// IPv4 part; the pool serves IPv4 only when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<PoolFamilySpec>,
    /// IPv6 part; the pool serves IPv6 only when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<PoolFamilySpec>,
    /// The network address of each CIDR may be handed out (CRD default `false`, which the
    /// API server fills in, hence kept as written).
    #[serde(
        rename = "allowFirstIP",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_first_ip: Option<bool>,
    /// The last address of each CIDR may be handed out (as `allowFirstIP`).
    #[serde(
        rename = "allowLastIP",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_last_ip: Option<bool>,
    /// Pods this pool serves (`None`: any pod, if a namespace selector is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// Namespaces this pool serves (`None`: any namespace, if a pod selector is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.ipv4` / `spec.ipv6` of a pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolFamilySpec {
    /// CIDRs the operator carves node blocks from, as written (a plain string type in Cilium,
    /// so a bad one does not fail decoding).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::cidr_list")]
    pub cidrs: Vec<String>,
    /// Prefix length of each node block.
    #[serde(default)]
    pub mask_size: u8,
    /// v2 only: settings of single CIDRs of `cidrs` (each entry names one of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pool: Vec<PoolCidr>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `spec.ipv4.pool[]` / `spec.ipv6.pool[]` entry (v2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolCidr {
    /// The CIDR of `cidrs` these settings are for, as written.
    #[serde(default)]
    pub cidr: String,
    /// Address ranges of that CIDR no new node block may overlap (blocks already handed out
    /// stay with their node until it releases them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_ranges: Vec<ReservedRange>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An inclusive address range (`start` to `end`), as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReservedRange {
    /// First address of the range.
    #[serde(default)]
    pub start: String,
    /// Last address of the range.
    #[serde(default)]
    pub end: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pool_with_selectors_round_trips() {
        let doc = json!({
            "apiVersion": "cilium.io/v2alpha1",
            "kind": "CiliumPodIPPool",
            "metadata": {
                "name": "mars",
                "annotations": {"ipam.cilium.io/skip-masquerade": "true"},
                "resourceVersion": "812",
                "creationTimestamp": "2026-01-02T03:04:05Z"
            },
            "spec": {
                "ipv4": {"cidrs": ["10.0.11.0/24", "10.0.12.0/24"], "maskSize": 27},
                "ipv6": {"cidrs": ["fd00:11::/104"], "maskSize": 123},
                "allowFirstIP": false,
                "allowLastIP": true,
                "podSelector": {
                    "matchLabels": {"app": "rover"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": ["front", "back"]},
                        {"key": "legacy", "operator": "DoesNotExist"}
                    ]
                },
                "namespaceSelector": {},
                "futureField": {"x": 1}
            },
            "futureTopLevel": true
        });
        let pool: CiliumPodIPPool = serde_json::from_value(doc.clone()).expect("decodes");
        assert_eq!(pool.name(), "mars");
        assert!(pool.skip_masquerade());
        assert_eq!(pool.spec.ipv4.as_ref().map(|v4| v4.mask_size), Some(27));
        assert_eq!(pool.spec.namespace_selector, Some(LabelSelector::default()));
        assert_eq!(serde_json::to_value(&pool).expect("encodes"), doc);
    }

    #[test]
    fn v2_reserved_ranges_round_trip() {
        let doc = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumPodIPPool",
            "metadata": {"name": "default"},
            "spec": {"ipv4": {
                "cidrs": ["10.10.0.0/16", "10.20.0.0/16"],
                "maskSize": 24,
                "pool": [{"cidr": "10.10.0.0/16",
                          "reservedRanges": [{"start": "10.10.0.0", "end": "10.10.255.255"}]}]
            }}
        });
        let pool: CiliumPodIPPool = serde_json::from_value(doc.clone()).expect("decodes");
        let v4 = pool.spec.ipv4.as_ref().expect("ipv4");
        assert_eq!(v4.pool.len(), 1);
        assert_eq!(v4.pool[0].reserved_ranges[0].end, "10.10.255.255");
        assert_eq!(serde_json::to_value(&pool).expect("encodes"), doc);
    }

    #[test]
    fn skip_masquerade_needs_exact_true() {
        for (value, want) in [("true", true), ("True", false), ("1", false), ("", false)] {
            let mut pool = CiliumPodIPPool::default();
            pool.metadata
                .annotations
                .insert(SKIP_MASQUERADE_ANNOTATION.into(), value.into());
            assert_eq!(pool.skip_masquerade(), want, "{value:?}");
        }
        assert!(!CiliumPodIPPool::default().skip_masquerade());
    }
}

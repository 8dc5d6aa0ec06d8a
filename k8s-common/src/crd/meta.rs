//! The Kubernetes wire shapes weft reads next to Cilium's resources: object metadata, label
//! selectors, and minimal Pod and Namespace objects; plus what every crd object type shares: the
//! flattened `apiVersion` and `kind` ([`TypeMeta`], named per type by [`ObjectType`]) and the
//! flattened [`Extra`] map that keeps what a struct does not model. Only what weft reads
//! is typed; everything else survives a read-modify-write untouched. No matching logic lives
//! here (that is `crate::labels`), and no IO.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Fields a struct does not model, kept verbatim. Every crd struct ends with
/// `#[serde(flatten)] pub extra: Extra`, so unknown keys round-trip at every level.
pub type Extra = Map<String, Value>;

/// `apiVersion` and `kind`, which every Kubernetes object carries at its top level. Each crd
/// object type holds one flattened as its first field (the API server fills both in; a read
/// object always has them, one built here gets them from [`TypeMeta::of`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypeMeta {
    /// The versioned schema of the object, `group/version` (just the version for the core
    /// group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The type of the object, in CamelCase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

impl TypeMeta {
    /// The `apiVersion` and `kind` of object type `T`.
    #[must_use]
    pub fn of<T: ObjectType>() -> Self {
        Self {
            api_version: T::API_VERSION.to_owned(),
            kind: T::KIND.to_owned(),
        }
    }
}

/// A Kubernetes object type modelled here: the `apiVersion` and `kind` it is written with.
pub trait ObjectType {
    /// `apiVersion` of the type (the version weft writes when it has several).
    const API_VERSION: &'static str;
    /// `kind` of the type.
    const KIND: &'static str;
}

/// `metadata` of any Kubernetes object (only the fields weft reads are typed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Namespace (empty for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Optimistic-concurrency token; an update must carry the one it read.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Server-assigned unique id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Owner references, kept opaque.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<Value>,
    /// Everything else (`creationTimestamp`, `managedFields`, `finalizers`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A Kubernetes `metav1.LabelSelector`. `None` where one is optional means "no selector", which
/// callers interpret per field; an empty selector (`{}`) matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// `key: value` pairs that must all be present.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `matchExpressions` entry. The operator stays a string on the wire: an unknown one is a
/// selector compile error, not a decoding error of the whole object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LabelSelectorRequirement {
    /// Label key.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(default)]
    pub operator: String,
    /// Values for `In` / `NotIn`; must be empty for `Exists` / `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A core/v1 Pod, reduced to what pool selection and the CNI path read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// Name, namespace, labels, annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` (only `nodeName` is typed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    /// `status` (only `podIPs` is typed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectType for Pod {
    const API_VERSION: &'static str = "v1";
    const KIND: &'static str = "Pod";
}

/// The part of a Pod's `spec` weft reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// Node the pod is scheduled on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// Unmodelled fields (containers, volumes, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// The part of a Pod's `status` weft reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodStatus {
    /// Addresses assigned to the pod, as reported by the kubelet.
    #[serde(rename = "podIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<PodIp>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `status.podIPs` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodIp {
    /// The address, as written by the kubelet.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A core/v1 Namespace: only its metadata is read (labels and annotations).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// Name, labels, annotations.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Unmodelled fields (`spec`, `status`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectType for Namespace {
    const API_VERSION: &'static str = "v1";
    const KIND: &'static str = "Namespace";
}

/// `skip_serializing_if` for Go's `omitempty` on numbers.
pub(crate) fn is_zero<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Serde for Cilium's text-marshalled address fields (`pkg/ip.Addr` / `Prefix`) held as
/// `Option<T>`: `""` (and `null`) decode to `None` as Go's `UnmarshalText` does, any other
/// unparsable text fails the whole object, and `None` encodes as `""`. Pair it with
/// `skip_serializing_if = "Option::is_none"` for `omitzero` fields; leave that out where Go
/// always writes the field.
pub(crate) mod opt_text {
    use std::{fmt::Display, str::FromStr};

    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    /// Writes the value's text, or `""` for `None`.
    #[expect(clippy::ref_option, reason = "serde's serialize_with signature")]
    pub(crate) fn serialize<T: Display, S: Serializer>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.collect_str(value),
            None => serializer.serialize_str(""),
        }
    }

    /// Parses the text; `""` and `null` give `None`.
    pub(crate) fn deserialize<'de, T, D>(deserializer: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        match Option::<String>::deserialize(deserializer)? {
            None => Ok(None),
            Some(text) if text.is_empty() => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|error| D::Error::custom(format!("{text:?}: {error}"))),
        }
    }
}

//! What the cloud node manager reads of a CiliumNode, field by field from the object's JSON
//! (as [`weft_cluster_ipam::node::NodeView`] does for the block allocators), so that a wrong shape in one
//! field becomes an error naming that field on that node, and values the strict wire type
//! would refuse (a negative `pre-allocate`, which Cilium keeps) are read as Cilium reads them.
//! Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_k8s::resource::decode;

use weft_cluster_ipam::node::IGNORE_ANNOTATION;

use super::CloudProvider;

/// The view of a node under provider `P`.
pub type ViewOf<P> =
    CloudNodeView<<P as CloudProvider>::NodeSpec, <P as CloudProvider>::NodeStatus>;

/// The cloud manager's view of one CiliumNode: what every cloud reads, and the provider's parts
/// of spec (`S`) and status (`T`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CloudNodeView<S, T> {
    /// `metadata.name`.
    pub name: String,
    /// Annotated `ipam.cilium.io/ignore: "true"`.
    pub ignored: bool,
    /// `spec.instance-id` (lower-cased provider ID).
    pub instance_id: String,
    /// The provider's part of the spec (`spec.azure`, `spec.eni`).
    pub provider: S,
    /// `spec.ipam.pre-allocate` (0 when unset).
    pub pre_allocate: i64,
    /// `spec.ipam.min-allocate`.
    pub min_allocate: i64,
    /// `spec.ipam.max-allocate`.
    pub max_allocate: i64,
    /// `spec.ipam.max-above-watermark`.
    pub max_above_watermark: i64,
    /// `spec.ipam.static-ip-tags`.
    pub static_ip_tags: BTreeMap<String, String>,
    /// `spec.ipam.pool`: address → owning resource.
    pub pool: BTreeMap<String, String>,
    /// Keys of `status.ipam.used`.
    pub used: BTreeSet<String>,
    /// `status.ipam.release-ips`: address → handshake state.
    pub release_ips: BTreeMap<String, String>,
    /// `status.ipam.assigned-static-ip`.
    pub assigned_static_ip: String,
    /// `status.ipam.operator-status.error`.
    pub operator_error: String,
    /// The provider's part of the status as the object shows it (compared before writing it
    /// again; a part that does not read as the provider's reads as empty, and is rewritten).
    pub provider_status: T,
    /// A field has the wrong shape: `(field path, what is wrong)`.
    pub invalid: Option<(String, String)>,
}

type FieldError = (String, String);

fn text(value: &Value, field: &str) -> Result<String, FieldError> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        other => Err((field.to_owned(), format!("{other} is not a string"))),
    }
}

fn count(value: &Value, field: &str) -> Result<i64, FieldError> {
    match value {
        Value::Null => Ok(0),
        v => v.as_i64().ok_or_else(|| {
            (
                field.to_owned(),
                format!("{v} is not a whole number of addresses"),
            )
        }),
    }
}

fn string_map(
    value: &Value,
    field: &str,
    item: impl Fn(&Value, &str) -> Result<String, FieldError>,
) -> Result<BTreeMap<String, String>, FieldError> {
    match value {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| Ok((k.clone(), item(v, &format!("{field}.{k}"))?)))
            .collect(),
        other => Err((field.to_owned(), format!("{other} is not a map"))),
    }
}

/// The provider's part at `doc`, `Default` when absent.
fn part<S: DeserializeOwned + Default>(doc: &Value, field: &str) -> Result<S, FieldError> {
    if doc.is_null() {
        return Ok(S::default());
    }
    decode(doc).map_err(|e| {
        let path = if e.path == "." {
            field.to_owned()
        } else {
            format!("{field}.{}", e.path)
        };
        (path, e.source.to_string())
    })
}

impl<S: DeserializeOwned + Default, T: DeserializeOwned + Default> CloudNodeView<S, T> {
    /// Read a CiliumNode object (as the API server sent it); the provider's parts are
    /// `spec.<field>` and `status.<field>`.
    #[must_use]
    pub fn from_json(doc: &Value, field: &str) -> Self {
        let spec = &doc["spec"];
        let ipam = &spec["ipam"];
        let status = &doc["status"]["ipam"];
        let mut view = Self {
            name: doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            ignored: doc["metadata"]["annotations"][IGNORE_ANNOTATION]
                .as_str()
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            operator_error: status["operator-status"]["error"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            provider_status: part(&doc["status"][field], "").unwrap_or_default(),
            instance_id: String::new(),
            provider: S::default(),
            pre_allocate: 0,
            min_allocate: 0,
            max_allocate: 0,
            max_above_watermark: 0,
            static_ip_tags: BTreeMap::new(),
            pool: BTreeMap::new(),
            used: BTreeSet::new(),
            release_ips: BTreeMap::new(),
            assigned_static_ip: String::new(),
            invalid: None,
        };
        let parsed = (|| {
            view.instance_id = text(&spec["instance-id"], "spec.instance-id")?;
            view.provider = part(&spec[field], &format!("spec.{field}"))?;
            view.pre_allocate = count(&ipam["pre-allocate"], "spec.ipam.pre-allocate")?;
            view.min_allocate = count(&ipam["min-allocate"], "spec.ipam.min-allocate")?;
            view.max_allocate = count(&ipam["max-allocate"], "spec.ipam.max-allocate")?;
            view.max_above_watermark = count(
                &ipam["max-above-watermark"],
                "spec.ipam.max-above-watermark",
            )?;
            view.static_ip_tags =
                string_map(&ipam["static-ip-tags"], "spec.ipam.static-ip-tags", text)?;
            view.pool = string_map(&ipam["pool"], "spec.ipam.pool", |v, f| {
                text(&v["resource"], &format!("{f}.resource"))
            })?;
            view.used = string_map(
                &status["used"],
                "status.ipam.used",
                |_, _| Ok(String::new()),
            )?
            .into_keys()
            .collect();
            view.release_ips = string_map(&status["release-ips"], "status.ipam.release-ips", text)?;
            view.assigned_static_ip = text(
                &status["assigned-static-ip"],
                "status.ipam.assigned-static-ip",
            )?;
            Ok::<_, FieldError>(())
        })();
        view.invalid = parsed.err();
        view
    }

    /// The error text for `operator-status` when a field has the wrong shape.
    #[must_use]
    pub fn invalid_text(&self) -> Option<String> {
        self.invalid
            .as_ref()
            .map(|(field, reason)| format!("{field}: {reason}"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use weft_k8s::crd::azure::{AzureSpec, AzureStatus};

    use super::*;

    type View = CloudNodeView<AzureSpec, AzureStatus>;

    #[test]
    fn reads_what_the_cloud_manager_needs() {
        let view = View::from_json(
            &json!({
                "metadata": {"name": "n1"},
                "spec": {
                    "instance-id": "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1",
                    "azure": {"interface-name": "eth0"},
                    "ipam": {
                        "pre-allocate": -1, "min-allocate": 2, "max-above-watermark": 3,
                        "static-ip-tags": {"env": "prod"},
                        "pool": {"10.0.0.5": {"resource": "/nic/a"}, "10.0.0.6": {}}
                    }
                },
                "status": {"ipam": {
                    "used": {"10.0.0.5": {"owner": "default/p"}},
                    "release-ips": {"10.0.0.6": "ready-for-release"},
                    "assigned-static-ip": "20.0.0.1"
                }}
            }),
            "azure",
        );
        assert_eq!(view.invalid, None);
        assert!(view.instance_id.ends_with("/vm1"));
        assert_eq!(view.provider.interface_name, "eth0");
        assert_eq!(
            (
                view.pre_allocate,
                view.min_allocate,
                view.max_allocate,
                view.max_above_watermark
            ),
            (-1, 2, 0, 3)
        );
        assert_eq!(view.static_ip_tags["env"], "prod");
        assert_eq!(view.pool["10.0.0.5"], "/nic/a");
        assert_eq!(view.pool["10.0.0.6"], "");
        assert!(view.used.contains("10.0.0.5"));
        assert_eq!(view.release_ips["10.0.0.6"], "ready-for-release");
        assert_eq!(view.assigned_static_ip, "20.0.0.1");
    }

    #[test]
    fn garbage_names_the_field() {
        for (doc, field) in [
            (json!({"spec": {"instance-id": 5}}), "spec.instance-id"),
            (
                json!({"spec": {"azure": {"interface-name": 5}}}),
                "spec.azure.interface-name",
            ),
            (json!({"spec": {"azure": []}}), "spec.azure"),
            (
                json!({"spec": {"ipam": {"pre-allocate": "8"}}}),
                "spec.ipam.pre-allocate",
            ),
            (json!({"spec": {"ipam": {"pool": []}}}), "spec.ipam.pool"),
            (
                json!({"spec": {"ipam": {"pool": {"10.0.0.1": {"resource": 1}}}}}),
                "spec.ipam.pool.10.0.0.1.resource",
            ),
            (
                json!({"spec": {"ipam": {"static-ip-tags": {"a": 1}}}}),
                "spec.ipam.static-ip-tags.a",
            ),
            (
                json!({"status": {"ipam": {"used": "x"}}}),
                "status.ipam.used",
            ),
        ] {
            let view = View::from_json(&doc, "azure");
            assert_eq!(
                view.invalid.as_ref().map(|(f, _)| f.as_str()),
                Some(field),
                "{doc}"
            );
        }
    }
}

//! What the operator reads of a CiliumNode, taken from the object's JSON field by field rather
//! than through the strict wire type, so that garbage in `spec.ipam.podCIDRs` or
//! `spec.ipam.pools` becomes an error on that node (in its `operator-status`) instead of an
//! object nobody can decode. Pure.

use serde_json::Value;
use weft_cluster_ipam::multipool::{Allocated, Requested};

/// The annotation that makes the operator leave a CiliumNode alone (value compared
/// case-insensitively, as Cilium does).
pub const IGNORE_ANNOTATION: &str = "ipam.cilium.io/ignore";

/// The operator's view of one CiliumNode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    /// `metadata.name`.
    pub name: String,
    /// Annotated `ipam.cilium.io/ignore: "true"`.
    pub ignored: bool,
    /// `spec.ipam.podCIDRs` as written.
    pub pod_cidrs: Vec<String>,
    /// `spec.ipam.pools.requested`.
    pub requested: Vec<Requested>,
    /// `spec.ipam.pools.allocated`, each entry's CIDRs as written.
    pub allocated: Vec<Allocated>,
    /// `status.ipam.operator-status.error`.
    pub operator_error: String,
    /// Entries of `status.ipam.used`.
    pub used: usize,
    /// A field the operator needs has the wrong shape: `(field path, what is wrong)`.
    pub invalid: Option<(String, String)>,
}

fn strings(value: &Value, field: &str) -> Result<Vec<String>, (String, String)> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str().map(str::to_owned).ok_or_else(|| {
                    (
                        format!("{field}[{i}]"),
                        format!("{item} is not a string; write CIDRs such as \"10.0.1.0/24\""),
                    )
                })
            })
            .collect(),
        other => Err((
            field.to_owned(),
            format!("{other} is not a list; write a list of CIDRs"),
        )),
    }
}

fn requested(value: &Value) -> Result<Vec<Requested>, (String, String)> {
    let field = "spec.ipam.pools.requested";
    let Some(items) = value.as_array() else {
        return if value.is_null() {
            Ok(Vec::new())
        } else {
            Err((field.to_owned(), format!("{value} is not a list")))
        };
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let pool = item["pool"]
                .as_str()
                .filter(|p| !p.is_empty())
                .ok_or_else(|| {
                    (
                        format!("{field}[{i}].pool"),
                        "missing; name the CiliumPodIPPool".to_owned(),
                    )
                })?;
            let count = |key: &str| -> Result<u64, (String, String)> {
                match &item["needed"][key] {
                    Value::Null => Ok(0),
                    v => v.as_u64().ok_or_else(|| {
                        (
                            format!("{field}[{i}].needed.{key}"),
                            format!("{v} is not a non-negative number of addresses"),
                        )
                    }),
                }
            };
            Ok(Requested {
                pool: pool.to_owned(),
                ipv4_addrs: count("ipv4-addrs")?,
                ipv6_addrs: count("ipv6-addrs")?,
            })
        })
        .collect()
}

fn allocated(value: &Value) -> Result<Vec<Allocated>, (String, String)> {
    let field = "spec.ipam.pools.allocated";
    let Some(items) = value.as_array() else {
        return if value.is_null() {
            Ok(Vec::new())
        } else {
            Err((field.to_owned(), format!("{value} is not a list")))
        };
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let pool = item["pool"].as_str().ok_or_else(|| {
                (
                    format!("{field}[{i}].pool"),
                    "missing; name the CiliumPodIPPool".to_owned(),
                )
            })?;
            Ok(Allocated {
                pool: pool.to_owned(),
                cidrs: strings(&item["cidrs"], &format!("{field}[{i}].cidrs"))?,
                allow_first_ip: item["allowFirstIP"].as_bool().unwrap_or(false),
                allow_last_ip: item["allowLastIP"].as_bool().unwrap_or(false),
            })
        })
        .collect()
}

impl NodeView {
    /// Read a CiliumNode object (as the API server sent it).
    #[must_use]
    pub fn from_json(doc: &Value) -> Self {
        let ipam = &doc["spec"]["ipam"];
        let mut view = Self {
            name: doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            ignored: doc["metadata"]["annotations"][IGNORE_ANNOTATION]
                .as_str()
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
            operator_error: doc["status"]["ipam"]["operator-status"]["error"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            used: doc["status"]["ipam"]["used"]
                .as_object()
                .map_or(0, serde_json::Map::len),
            ..Self::default()
        };
        let parsed = (|| {
            view.pod_cidrs = strings(&ipam["podCIDRs"], "spec.ipam.podCIDRs")?;
            view.requested = requested(&ipam["pools"]["requested"])?;
            view.allocated = allocated(&ipam["pools"]["allocated"])?;
            Ok::<_, (String, String)>(())
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

    use super::*;

    #[test]
    fn reads_what_the_allocators_need() {
        let view = NodeView::from_json(&json!({
            "metadata": {"name": "n1", "annotations": {"ipam.cilium.io/ignore": "TRUE"}},
            "spec": {"ipam": {
                "podCIDRs": ["10.0.1.0/24"],
                "pools": {
                    "requested": [{"pool": "default", "needed": {"ipv4-addrs": 40}}],
                    "allocated": [{"pool": "default", "cidrs": ["10.10.0.0/28"], "allowLastIP": true}]
                }
            }},
            "status": {"ipam": {"used": {"10.0.1.5": {"owner": "a/b"}}, "operator-status": {"error": "x"}}}
        }));
        assert_eq!(view.name, "n1");
        assert!(view.ignored);
        assert_eq!(view.pod_cidrs, ["10.0.1.0/24"]);
        assert_eq!(view.requested[0].ipv4_addrs, 40);
        assert_eq!(view.requested[0].ipv6_addrs, 0);
        assert!(view.allocated[0].allow_last_ip);
        assert_eq!((view.used, view.operator_error.as_str()), (1, "x"));
        assert_eq!(view.invalid, None);
    }

    #[test]
    fn garbage_names_the_field() {
        for (ipam, field) in [
            (json!({"podCIDRs": "10.0.0.0/24"}), "spec.ipam.podCIDRs"),
            (json!({"podCIDRs": [7]}), "spec.ipam.podCIDRs[0]"),
            (
                json!({"pools": {"requested": [{"needed": {}}]}}),
                "spec.ipam.pools.requested[0].pool",
            ),
            (
                json!({"pools": {"requested": [{"pool": "a", "needed": {"ipv4-addrs": -1}}]}}),
                "spec.ipam.pools.requested[0].needed.ipv4-addrs",
            ),
            (
                json!({"pools": {"allocated": [{"pool": "a", "cidrs": [{}]}]}}),
                "spec.ipam.pools.allocated[0].cidrs[0]",
            ),
        ] {
            let view =
                NodeView::from_json(&json!({"metadata": {"name": "n"}, "spec": {"ipam": ipam}}));
            assert_eq!(
                view.invalid.as_ref().map(|(f, _)| f.as_str()),
                Some(field),
                "{ipam}"
            );
            assert!(view.invalid_text().expect("text").starts_with(field));
        }
        assert!(
            !NodeView::from_json(
                &json!({"metadata": {"name": "n", "annotations": {"ipam.cilium.io/ignore": "yes"}}})
            )
            .ignored
        );
    }
}

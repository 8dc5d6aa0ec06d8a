//! The upstream-compatibility check of a generated CRD against Cilium's own: same group,
//! names, scope and versions (served, storage, deprecation, subresources, printer columns), and
//! for every property path of our schema (through `properties`, `items` and
//! `additionalProperties`) the same path upstream, with the same `type` and, where both set one,
//! the same `format`. Upstream fields weft does not model are fine: they survive through the
//! flattened `Extra`. Pure comparison of JSON values; reading the fixtures is the caller's job.

use std::collections::BTreeMap;

use serde_json::Value;

/// `type` and `format` of one schema node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaNode {
    /// `type`, if set.
    pub kind: Option<String>,
    /// `format`, if set.
    pub format: Option<String>,
}

/// Every node of `schema` by path: `""` is the root, `.a.b` a property, `[]` the items of an
/// array, `{}` the values of a map (`additionalProperties`).
#[must_use]
pub fn schema_paths(schema: &Value) -> BTreeMap<String, SchemaNode> {
    let mut paths = BTreeMap::new();
    walk(schema, String::new(), &mut paths);
    paths
}

fn walk(schema: &Value, path: String, paths: &mut BTreeMap<String, SchemaNode>) {
    let text = |key: &str| schema.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            walk(property, format!("{path}.{name}"), paths);
        }
    }
    if let Some(items) = schema.get("items").filter(|items| items.is_object()) {
        walk(items, format!("{path}[]"), paths);
    }
    if let Some(values) = schema
        .get("additionalProperties")
        .filter(|values| values.is_object())
    {
        walk(values, format!("{path}{{}}"), paths);
    }
    paths.insert(
        path,
        SchemaNode {
            kind: text("type"),
            format: text("format"),
        },
    );
}

/// Differences of `ours` from `upstream` (two `CustomResourceDefinition` documents), one line
/// each; empty when compatible. `newer` lists property paths (as [`schema_paths`] spells them)
/// that weft models but the upstream document predates: their absence upstream (with everything
/// below them) is expected, and an entry that upstream does have, or that ours lacks, is
/// reported as stale.
#[must_use]
pub fn crd_mismatches(ours: &Value, upstream: &Value, newer: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["group", "names", "scope"] {
        let (a, b) = (&ours["spec"][key], &upstream["spec"][key]);
        if a != b {
            out.push(format!("spec.{key}: ours {a}, upstream {b}"));
        }
    }
    let versions = |crd: &Value| -> BTreeMap<String, Value> {
        crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| (v["name"].as_str().unwrap_or_default().to_owned(), v.clone()))
            .collect()
    };
    let (our_versions, upstream_versions) = (versions(ours), versions(upstream));
    let names = |versions: &BTreeMap<String, Value>| versions.keys().cloned().collect::<Vec<_>>();
    if names(&our_versions) != names(&upstream_versions) {
        out.push(format!(
            "versions: ours {:?}, upstream {:?}",
            names(&our_versions),
            names(&upstream_versions)
        ));
    }
    for (name, our_version) in &our_versions {
        if let Some(upstream_version) = upstream_versions.get(name) {
            version_mismatches(name, our_version, upstream_version, newer, &mut out);
        }
    }
    out
}

/// Whether `path` is one of `newer` or below one.
fn covered(path: &str, newer: &[&str]) -> bool {
    newer.iter().any(|entry| {
        path.strip_prefix(entry)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[', '{']))
    })
}

fn version_mismatches(
    name: &str,
    ours: &Value,
    upstream: &Value,
    newer: &[&str],
    out: &mut Vec<String>,
) {
    for key in [
        "served",
        "storage",
        "deprecated",
        "deprecationWarning",
        "subresources",
        "additionalPrinterColumns",
    ] {
        let absent = if key == "subresources" {
            serde_json::json!({})
        } else {
            Value::Null
        };
        let field = |version: &Value| version.get(key).cloned().unwrap_or_else(|| absent.clone());
        let (a, b) = (field(ours), field(upstream));
        if a != b {
            out.push(format!("{name}: {key}: ours {a}, upstream {b}"));
        }
    }
    let schema = |version: &Value| schema_paths(&version["schema"]["openAPIV3Schema"]);
    let (our_paths, upstream_paths) = (schema(ours), schema(upstream));
    for (path, node) in &our_paths {
        let shown = if path.is_empty() { "(root)" } else { path };
        match upstream_paths.get(path) {
            None if covered(path, newer) => {}
            None => out.push(format!("{name}: {shown}: not in the upstream schema")),
            Some(theirs) => {
                if node.kind != theirs.kind {
                    out.push(format!(
                        "{name}: {shown}: type {:?}, upstream {:?}",
                        node.kind, theirs.kind
                    ));
                }
                if let (Some(a), Some(b)) = (&node.format, &theirs.format)
                    && a != b
                {
                    out.push(format!("{name}: {shown}: format {a:?}, upstream {b:?}"));
                }
            }
        }
    }
    for path in newer {
        if upstream_paths.contains_key(*path) {
            out.push(format!(
                "{name}: {path}: listed as newer than upstream, but upstream has it"
            ));
        }
        if !our_paths.contains_key(*path) {
            out.push(format!(
                "{name}: {path}: listed as newer than upstream, but ours lacks it"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_walk_properties_items_and_maps() {
        let schema = json!({
            "type": "object",
            "properties": {
                "list": {"type": "array", "items": {"type": "string", "format": "cidr"}},
                "map": {"type": "object", "additionalProperties": {"type": "integer"}}
            }
        });
        let paths: Vec<(String, Option<String>)> = schema_paths(&schema)
            .into_iter()
            .map(|(path, node)| (path, node.kind))
            .collect();
        let want = [
            ("", "object"),
            (".list", "array"),
            (".list[]", "string"),
            (".map", "object"),
            (".map{}", "integer"),
        ]
        .map(|(path, kind)| (path.to_owned(), Some(kind.to_owned())));
        assert_eq!(paths, want);
        assert_eq!(
            schema_paths(&schema)[".list[]"].format.as_deref(),
            Some("cidr")
        );
    }
}

//! The discovery documents kube-rs reads: `/version` (version.Info), `/api` (APIVersions),
//! `/apis` (APIGroupList), `/apis/<group>` (APIGroup), `/api/v1` and `/apis/<group>/<version>`
//! (APIResourceList with verbs, scope, kind, short names, categories and the `status`
//! subresource), and the aggregated form of `/api` and `/apis` (`apidiscovery.k8s.io/v2`
//! APIGroupDiscoveryList) when the `Accept` header asks for it. Built from the resource table.

use serde_json::{Value, json};

use super::resources::{ResourceDef, version_priority};

/// The Kubernetes version the emulator claims to be.
pub const MINOR: &str = "33";

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];

/// `Content-Type` of an aggregated discovery answer.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header asks for aggregated discovery.
#[must_use]
pub fn wants_aggregated(accept: &str) -> bool {
    accept.contains("as=APIGroupDiscoveryList")
}

/// `/version`.
#[must_use]
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": MINOR,
        "gitVersion": format!("v1.{MINOR}.0-weft-emulator"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
#[must_use]
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

/// Non-core groups and their versions, most preferred first.
fn groups(defs: &[ResourceDef]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for def in defs.iter().filter(|d| !d.group.is_empty()) {
        let index = out
            .iter()
            .position(|(g, _)| *g == def.group)
            .unwrap_or_else(|| {
                out.push((def.group.clone(), Vec::new()));
                out.len() - 1
            });
        let entry = &mut out[index];
        for v in &def.versions {
            if !entry.1.contains(v) {
                entry.1.push(v.clone());
            }
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    out
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": gv(&versions[0]),
    })
}

/// `/apis`.
#[must_use]
pub fn group_list(defs: &[ResourceDef]) -> Value {
    let groups: Vec<Value> = groups(defs).iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if the group is served.
#[must_use]
pub fn group(defs: &[ResourceDef], name: &str) -> Option<Value> {
    let (g, versions) = groups(defs).into_iter().find(|(g, _)| g == name)?;
    let mut doc = group_doc(&g, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn served<'a>(
    defs: &'a [ResourceDef],
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a ResourceDef> {
    defs.iter()
        .filter(move |d| d.group == group && d.versions.iter().any(|v| v == version))
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
#[must_use]
pub fn resource_list(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for def in served(defs, group, version) {
        resources.push(json!({
            "name": def.plural,
            "singularName": def.singular,
            "namespaced": def.namespaced,
            "kind": def.kind,
            "verbs": VERBS,
            "shortNames": def.short_names,
            "categories": def.categories,
        }));
        if def.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", def.plural),
                "singularName": "",
                "namespaced": def.namespaced,
                "kind": def.kind,
                "verbs": STATUS_VERBS,
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

fn aggregated_group(defs: &[ResourceDef], group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let resources: Vec<Value> = served(defs, group, version)
                .map(|def| {
                    let gvk = json!({"group": group, "version": version, "kind": def.kind});
                    let subresources: Vec<Value> = def
                        .status_subresource
                        .then(|| json!({"subresource": "status", "responseKind": gvk, "verbs": STATUS_VERBS}))
                        .into_iter()
                        .collect();
                    json!({
                        "resource": def.plural,
                        "responseKind": gvk,
                        "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": def.singular,
                        "verbs": VERBS,
                        "shortNames": def.short_names,
                        "categories": def.categories,
                        "subresources": subresources,
                    })
                })
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let metadata = if group.is_empty() {
        json!({})
    } else {
        json!({"name": group})
    };
    json!({"metadata": metadata, "versions": versions})
}

/// Aggregated discovery for `/api` (`core` true) or `/apis`.
#[must_use]
pub fn aggregated(defs: &[ResourceDef], core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group(defs, "", &["v1".to_owned()])]
    } else {
        groups(defs)
            .iter()
            .map(|(g, v)| aggregated_group(defs, g, v))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

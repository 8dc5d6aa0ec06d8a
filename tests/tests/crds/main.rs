//! The generated CustomResourceDefinitions (`deploy/crds/`, `weft_tests::crds`): the checked-in
//! files equal a fresh generation byte for byte; each document is a well-formed Kubernetes CRD
//! with a structural schema; each is compatible with upstream Cilium's CRD of the same resource
//! (names, scope, versions, subresources, and every property path with the same type and
//! format); the compatibility check itself can fail; and the example store objects, and
//! objects round-tripped through the crd types, validate against both upstream's schema and
//! ours. No root, no network: pure file and JSON work.
//!
//! The upstream CRDs are `shared/fixtures/cilium-crds/` beside the workspace
//! (`WEFT_CILIUM_CRDS` may name another directory holding them).

mod compat;
mod examples;

use std::{fs, path::Path};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;
use weft_tests::crds::{self, GeneratedCrd};

/// Every generated CRD (panics with the reason when generation fails).
pub(crate) fn generated() -> Vec<GeneratedCrd> {
    crds::generate().unwrap_or_else(|e| panic!("generating the CRDs: {}", weft_tests::report(&e)))
}

/// The generated CRD of `kind`.
pub(crate) fn generated_crd(kind: &str) -> GeneratedCrd {
    generated()
        .into_iter()
        .find(|crd| crd.kind == kind)
        .unwrap_or_else(|| panic!("no generated CRD of kind {kind}"))
}

/// A YAML or JSON file as a JSON value.
pub(crate) fn read_yaml(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The upstream CRD that `file_name` (`ciliumnodes.yaml`) regenerates.
pub(crate) fn upstream_crd(file_name: &str) -> Value {
    read_yaml(&crds::upstream_dir().join(file_name))
}

/// `openAPIV3Schema` of `version` of a CRD document.
pub(crate) fn version_schema(crd: &Value, version: &str) -> Value {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == version)
        .map_or_else(
            || panic!("{}: no version {version}", crd["metadata"]["name"]),
            |v| v["schema"]["openAPIV3Schema"].clone(),
        )
}

#[test]
fn checked_in_crds_are_current() {
    let dir = crds::deploy_dir();
    let crds = generated();
    let mut stale = Vec::new();
    for crd in &crds {
        let path = dir.join(&crd.file_name);
        match fs::read_to_string(&path) {
            Err(e) => stale.push(format!("{}: {e}", path.display())),
            Ok(text) if text != crd.yaml => {
                let line = text
                    .lines()
                    .zip(crd.yaml.lines())
                    .position(|(a, b)| a != b)
                    .map_or_else(|| "the length".to_owned(), |n| format!("line {}", n + 1));
                stale.push(format!("{} differs at {line}", path.display()));
            }
            Ok(_) => {}
        }
    }
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // The base's kustomization.yaml lists the CRDs; it is not generated.
        if name != "kustomization.yaml" && !crds.iter().any(|crd| crd.file_name == name) {
            stale.push(format!(
                "{}: not generated any more",
                entry.path().display()
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "the checked-in CRDs are stale; run `cargo xtask gen-crds` and commit deploy/crds/:\n{}",
        stale.join("\n")
    );
}

#[test]
fn generated_crds_are_well_formed_kubernetes_crds() {
    let crds = generated();
    assert_eq!(
        crds.iter()
            .map(|c| c.file_name.as_str())
            .collect::<Vec<_>>(),
        [
            "ciliumendpoints.yaml",
            "ciliumidentities.yaml",
            "ciliumnodeconfigs.yaml",
            "ciliumnodes.yaml",
            "ciliumpodippools.yaml"
        ]
    );
    for crd in crds {
        let name = &crd.file_name;
        assert!(crd.yaml.starts_with(crds::HEADER), "{name}: no header");
        let reparsed: Value = serde_norway::from_str(&crd.yaml)
            .unwrap_or_else(|e| panic!("{name}: the YAML does not parse: {e}"));
        assert_eq!(reparsed, crd.document, "{name}: YAML and document differ");
        // Every key is one the Kubernetes API knows: k8s-openapi drops none of them.
        let typed: CustomResourceDefinition = serde_json::from_value(crd.document.clone())
            .unwrap_or_else(|e| panic!("{name}: not a CustomResourceDefinition: {e}"));
        let retyped = serde_json::to_value(&typed).expect("a CRD serializes");
        assert_eq!(
            floats(retyped),
            floats(crd.document.clone()),
            "{name}: keys Kubernetes does not know"
        );
        for version in crd.document["spec"]["versions"]
            .as_array()
            .expect("versions")
        {
            let schema = &version["schema"]["openAPIV3Schema"];
            let mut problems = Vec::new();
            structural_problems(schema, "", &mut problems);
            assert_eq!(
                schema["properties"]["metadata"],
                serde_json::json!({"type": "object"}),
                "{name}: metadata"
            );
            assert!(
                problems.is_empty(),
                "{name} {}: not structural:\n{}",
                version["name"],
                problems.join("\n")
            );
        }
    }
}

/// `value` with every number as a float (k8s-openapi holds schema bounds as `f64`).
fn floats(value: Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(n), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(floats).collect()),
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .map(|(key, value)| (key, floats(value)))
                .collect(),
        ),
        other => other,
    }
}

/// Kubernetes' structural-schema rules weft's schemas could break.
fn structural_problems(schema: &Value, path: &str, out: &mut Vec<String>) {
    let preserves = schema["x-kubernetes-preserve-unknown-fields"] == true;
    if !schema["type"].is_string() && !preserves {
        out.push(format!("{path}: no type"));
    }
    if schema.get("properties").is_some() && schema.get("additionalProperties").is_some() {
        out.push(format!("{path}: properties and additionalProperties"));
    }
    for key in [
        "$ref",
        "$schema",
        "$defs",
        "definitions",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
    ] {
        if schema.get(key).is_some() {
            out.push(format!("{path}: {key}"));
        }
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            structural_problems(property, &format!("{path}.{name}"), out);
        }
    }
    for (key, suffix) in [("items", "[]"), ("additionalProperties", "{}")] {
        match schema.get(key) {
            Some(Value::Object(_)) => {
                structural_problems(&schema[key], &format!("{path}{suffix}"), out);
            }
            Some(other) => out.push(format!("{path}: {key}: {other}")),
            None => {}
        }
    }
}

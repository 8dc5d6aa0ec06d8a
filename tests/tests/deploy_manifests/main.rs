//! The `deploy/` manifests, checked as an API server would check them and against the programs
//! they run:
//!
//! - every YAML under `deploy/` but the Helm chart (the bases `crds/`, `agent/`, `operator/`, the overlays
//!   `standalone/` and `with-cilium/`, the `components/`) validates with
//!   `kubernetes-validate --strict` against Kubernetes 1.33, every resource in it is actually
//!   checked (no "no schema" pass), and the tool does reject a broken copy of our DaemonSet;
//! - each `kustomization.yaml` lists exactly the manifests beside it, and only files beside it
//!   and directories with a kustomization of their own;
//! - [`kustomize`]: `kubectl kustomize` builds every base, overlay and component, each build
//!   validates, pins the one image, and holds what its install path promises (weft alone:
//!   CRDs, agent and operator; beside Cilium: the agent on cilium-config, nothing else);
//! - [`helm`]: the Helm chart `helm/weft`, rendered by Helm's engine in every IPAM mode, validates
//!   and renders the kustomize install's objects;
//! - [`documented`]: every overlay and `kubectl` kustomize command of `docs/install.md` builds,
//!   and no page needs a `kustomize` binary;
//! - the ConfigMap's keys are cilium-config keys the agent or weft-operator reads, with values
//!   both accept;
//! - [`agent`]: the agent's ClusterRole grants exactly its table, and the DaemonSet agrees with
//!   the agent's CLI;
//! - [`operator`]: the operator's ClusterRole and lease Role grant exactly their tables, and the
//!   Deployment agrees with the operator's CLI and configuration.
//!
//! Changing RBAC is a deliberate act: the tables change with the manifests. No root needed;
//! `kubernetes-validate` comes from `cargo xtask setup`, `kubectl` from the system.

mod agent;
mod documented;
mod helm;
mod kustomize;
mod operator;

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use serde::Deserialize as _;
use serde_json::{Value, json};
use weft_agent::config::{AgentConfig, KEYS};
use weft_tests::unique;

/// Where `cargo xtask setup` installs kubernetes-validate (its venv).
const KUBERNETES_VALIDATE: &str = "/opt/weft-tools/venv/bin/kubernetes-validate";
/// The Kubernetes version the manifests must be valid for.
const KUBERNETES_VERSION: &str = "1.33";

/// The directory of the Helm chart, checked by [`helm`] rather than as plain manifests.
const HELM_CHARTS: &str = "helm";

/// The name kustomize looks for in a directory.
const KUSTOMIZATION: &str = "kustomization.yaml";

/// The agent's DaemonSet (the image test reads it from there too).
pub(crate) const AGENT_DAEMONSET: &str = "agent/daemonset.yaml";
/// The agent's ServiceAccount, ClusterRole and binding.
pub(crate) const AGENT_RBAC: &str = "agent/rbac.yaml";
/// weft-config, the cilium-config keys of the agents and weft-operator.
pub(crate) const AGENT_CONFIGMAP: &str = "agent/configmap.yaml";

pub(crate) fn deploy_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    fs::canonicalize(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// Every `*.yaml`/`*.yml` under `deploy/`, recursively, sorted.
fn manifests() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                // Helm templates are not YAML until rendered: helm.rs renders and checks them.
                if path != deploy_dir().join(HELM_CHARTS) {
                    walk(&path, out);
                }
            } else if path
                .extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&deploy_dir(), &mut out);
    out.sort();
    assert!(
        !out.is_empty(),
        "no manifests under {}",
        deploy_dir().display()
    );
    out
}

/// `path` relative to `deploy/`, as kustomization.yaml spells it.
fn relative(path: &Path) -> String {
    path.strip_prefix(deploy_dir())
        .expect("under deploy/")
        .to_string_lossy()
        .into_owned()
}

/// The documents of a (multi-document) YAML file.
pub(crate) fn documents(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
        })
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The one document of `kind` in deploy/`file`.
pub(crate) fn resource(file: &str, kind: &str) -> Value {
    let docs: Vec<_> = documents(&deploy_dir().join(file))
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect();
    assert_eq!(docs.len(), 1, "expected one {kind} in deploy/{file}");
    docs.into_iter().next().expect("one")
}

fn kubernetes_validate() -> Command {
    assert!(
        Path::new(KUBERNETES_VALIDATE).exists(),
        "kubernetes-validate is not installed at {KUBERNETES_VALIDATE}: run `cargo xtask setup` \
         (it installs it from PyPI into /opt/weft-tools/venv); refusing to skip the manifest checks"
    );
    let mut cmd = Command::new(KUBERNETES_VALIDATE);
    cmd.args(["--strict", "--kubernetes-version", KUBERNETES_VERSION]);
    cmd
}

#[test]
fn every_manifest_is_valid_for_kubernetes_1_33() {
    assert_valid(&manifests(), "deploy/");
}

/// `kubernetes-validate --strict` accepts `files` and checked every resource in them: only a
/// `kustomization.yaml` (a Kustomization or a Component) may have no schema; anything else
/// without one was not checked at all (a mistyped apiVersion, say) and fails here.
pub(crate) fn assert_valid(files: &[PathBuf], what: &str) {
    let out = kubernetes_validate()
        .args(files)
        .output()
        .expect("run kubernetes-validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "kubernetes-validate rejected {what}:\n{text}"
    );
    for line in text.lines().filter(|l| !l.starts_with("INFO")) {
        assert!(
            line.starts_with("WARN")
                && line.contains(KUSTOMIZATION)
                && (line.contains("kind Kustomization") || line.contains("kind Component")),
            "unexpected kubernetes-validate output for {what}: {line}\n{text}"
        );
    }
    let resources: usize = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != KUSTOMIZATION))
        .map(|f| documents(f).len())
        .sum();
    assert!(resources > 0, "{what}: nothing to validate");
    let passed = text.lines().filter(|l| l.contains(" passed for ")).count();
    assert_eq!(
        passed, resources,
        "{what}: every resource must be validated:\n{text}"
    );
}

#[test]
fn kubernetes_validate_rejects_a_broken_daemonset() {
    // It reports the first error of a resource, so one breakage per run: a misspelt field
    // (what --strict is for) and a wrongly typed one.
    type Breakage = (&'static str, fn(&mut Value));
    let breakages: [Breakage; 2] = [
        ("hostNetwrk", |ds| {
            ds["spec"]["template"]["spec"]["hostNetwrk"] = json!(true);
        }),
        ("livenessProbe.httpGet.port", |ds| {
            ds["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] =
                json!(["9879"]);
        }),
    ];
    for (field, break_it) in breakages {
        let mut broken = resource(AGENT_DAEMONSET, "DaemonSet");
        break_it(&mut broken);
        let path = std::env::temp_dir().join(format!("{}.yaml", unique("weft-broken-ds")));
        fs::write(&path, serde_norway::to_string(&broken).expect("yaml")).expect("write");
        let out = kubernetes_validate()
            .arg(&path)
            .output()
            .expect("run kubernetes-validate");
        let _ = fs::remove_file(&path);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success(),
            "kubernetes-validate accepted a DaemonSet with a broken {field}:\n{text}"
        );
        assert!(text.contains(field), "{text}");
    }
}

/// The directories under `deploy/` with a `kustomization.yaml`.
pub(crate) fn kustomization_dirs() -> Vec<PathBuf> {
    manifests()
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n == KUSTOMIZATION))
        .map(|p| p.parent().expect("in a directory").to_path_buf())
        .collect()
}

/// The `kustomization.yaml` of `dir` (a Kustomization or a Component).
pub(crate) fn read_kustomization(dir: &Path) -> Value {
    let docs = documents(&dir.join(KUSTOMIZATION));
    assert_eq!(docs.len(), 1, "{}: one document", dir.display());
    docs.into_iter().next().expect("one")
}

#[test]
fn each_kustomization_lists_exactly_its_manifests() {
    let dirs = kustomization_dirs();
    assert!(
        !deploy_dir().join(KUSTOMIZATION).exists(),
        "deploy/{KUSTOMIZATION}: the install paths are deploy/standalone/ and deploy/with-cilium/"
    );
    for path in manifests() {
        let dir = path.parent().expect("in a directory");
        let name = path.file_name().expect("a file name").to_string_lossy();
        assert!(
            dirs.iter().any(|d| d == dir),
            "{} is in a directory without a {KUSTOMIZATION}",
            relative(&path)
        );
        if name == KUSTOMIZATION {
            continue;
        }
        let kustomization = read_kustomization(dir);
        assert_eq!(
            kustomization["kind"],
            "Kustomization",
            "{}: a Component keeps its patches inline, so no manifest is beside it",
            relative(&path)
        );
        assert!(
            strings_of(&kustomization["resources"])
                .iter()
                .any(|r| r.as_str() == Some(name.as_ref())),
            "{} is not in the resources of its {KUSTOMIZATION}",
            relative(&path)
        );
    }
    for dir in &dirs {
        let file = format!("{}/{KUSTOMIZATION}", relative(dir));
        let kustomization = read_kustomization(dir);
        let (api_version, kind) = (&kustomization["apiVersion"], &kustomization["kind"]);
        assert!(
            (kind == "Kustomization" && api_version == "kustomize.config.k8s.io/v1beta1")
                || (kind == "Component" && api_version == "kustomize.config.k8s.io/v1alpha1"),
            "deploy/{file}: {api_version} {kind}"
        );
        let listed = strings_of(&kustomization["resources"]);
        let unique: BTreeSet<_> = listed.iter().map(Value::to_string).collect();
        assert_eq!(unique.len(), listed.len(), "duplicates in deploy/{file}");
        // A resource is a manifest beside it or a base with its own kustomization; a
        // component is a directory of a Component.
        for entry in listed.iter().map(|r| r.as_str().expect("a resource path")) {
            let target = dir.join(entry);
            assert!(
                target.is_file() || target.join(KUSTOMIZATION).is_file(),
                "deploy/{file} lists {entry}, which is neither a file beside it nor a \
                 kustomization directory"
            );
        }
        for component in strings_of(&kustomization["components"]) {
            let entry = component.as_str().expect("a component path");
            assert_eq!(
                read_kustomization(&dir.join(entry))["kind"],
                "Component",
                "deploy/{file}: component {entry}"
            );
        }
    }
}

pub(crate) fn strings(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {list}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

/// The ConfigMap's data (the keys the agents and the operator read from their config
/// directories).
pub(crate) fn config_data() -> BTreeMap<String, String> {
    let config_map = resource(AGENT_CONFIGMAP, "ConfigMap");
    serde_json::from_value(config_map["data"].clone()).expect("ConfigMap data is a map of strings")
}

#[test]
fn configmap_holds_cilium_config_keys_weft_accepts() {
    assert_config_accepted(&config_data(), &format!("deploy/{AGENT_CONFIGMAP}"));
}

/// The agent and weft-operator (with the Deployment's flags) accept the config keys `data`
/// (from `what`), and each key is one of them reads.
pub(crate) fn assert_config_accepted(data: &BTreeMap<String, String>, what: &str) {
    let agent =
        AgentConfig::resolve([data]).unwrap_or_else(|e| panic!("the agent rejects {what}: {e}"));
    assert_eq!(agent.ipam.to_string(), data["ipam"]);
    let resolved =
        operator::resolve(data).unwrap_or_else(|e| panic!("weft-operator rejects {what}: {e}"));
    // A key the agent does not read is the operator's: without it, the operator (with the
    // Deployment's flags) would run with another configuration.
    for key in data.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        let mut without = data.clone();
        without.remove(key);
        let changed = operator::resolve(&without).map_or(true, |other| other != resolved);
        assert!(
            changed,
            "{what}: {key} is not a cilium-config key weft reads: the agent does not know it \
             and it changes nothing in weft-operator's configuration"
        );
    }
}

/// One permission a role grants: (API group, resource, verb, resource name; `None`: any name).
pub(crate) type Grant = (String, String, String, Option<String>);

/// Everything `role` (a ClusterRole or a Role) grants, one grant per group, resource, verb and
/// name. Wildcards and non-resource URLs are refused outright.
fn grants(role: &Value) -> BTreeSet<Grant> {
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        assert!(rule.get("nonResourceURLs").is_none(), "{rule}");
        let names: Vec<Option<String>> = match rule.get("resourceNames") {
            None => vec![None],
            Some(names) => strings(names).into_iter().map(Some).collect(),
        };
        for group in strings(&rule["apiGroups"]) {
            for res in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(
                        ![group.as_str(), res.as_str(), verb.as_str()].contains(&"*"),
                        "wildcard in {rule}"
                    );
                    for name in &names {
                        granted.insert((group.clone(), res.clone(), verb.clone(), name.clone()));
                    }
                }
            }
        }
    }
    granted
}

/// The grants of a table's rows: (API group, resource, verbs, resource names; empty: any).
pub(crate) fn table_grants<'a>(
    rows: impl IntoIterator<Item = (&'a str, &'a str, &'a [&'a str], &'a [&'a str])>,
) -> BTreeSet<Grant> {
    let mut expected = BTreeSet::new();
    for (group, res, verbs, names) in rows {
        let names: Vec<Option<String>> = if names.is_empty() {
            vec![None]
        } else {
            names.iter().map(|n| Some((*n).to_owned())).collect()
        };
        for verb in verbs {
            for name in &names {
                expected.insert((
                    group.to_owned(),
                    res.to_owned(),
                    (*verb).to_owned(),
                    name.clone(),
                ));
            }
        }
    }
    expected
}

/// `role` grants exactly `expected`, no more, no less.
pub(crate) fn assert_grants(role: &Value, expected: &BTreeSet<Grant>) {
    let granted = grants(role);
    let extra: Vec<_> = granted.difference(expected).collect();
    let missing: Vec<_> = expected.difference(&granted).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "{} {} differs from the table: grants {extra:?} beyond it, lacks {missing:?}",
        role["kind"].as_str().unwrap_or("?"),
        role["metadata"]["name"].as_str().unwrap_or("?")
    );
}

/// `binding` (a ClusterRoleBinding or a RoleBinding) gives `role` to `account` and nobody else.
pub(crate) fn assert_binds(binding: &Value, role: &Value, account: &Value) {
    assert_eq!(binding["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(binding["roleRef"]["kind"], role["kind"]);
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["subjects"],
        json!([{
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }]),
        "{} {}",
        binding["kind"].as_str().unwrap_or("?"),
        binding["metadata"]["name"].as_str().unwrap_or("?")
    );
    if role["kind"] == "Role" {
        assert_eq!(binding["kind"], "RoleBinding");
        assert_eq!(
            binding["metadata"]["namespace"], role["metadata"]["namespace"],
            "a RoleBinding binds a Role of its own namespace"
        );
    }
}

/// The items of a YAML list (empty when absent).
pub(crate) fn strings_of(list: &Value) -> Vec<Value> {
    list.as_array().cloned().unwrap_or_default()
}

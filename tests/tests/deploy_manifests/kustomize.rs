//! The install paths as `kubectl kustomize` builds them: every base (`crds/`, `agent/`,
//! `operator/`), overlay (`standalone/`, `with-cilium/`) and component (on the overlay or base
//! it is made for) builds, the build validates with `kubernetes-validate --strict`, pins the one
//! image, and holds what the path promises: weft alone is exactly the agent and operator bases,
//! the CRDs apart in `crds/` (no other kustomization holds one, so `kubectl delete -k` of a
//! workload keeps every cilium.io object); beside
//! Cilium it is the agent alone, reading `cilium-config`, with no CRD, no weft-operator and no
//! ConfigMap of its own; the cluster-pool and azure components configure agent and operator
//! alike; only the azure install lets the operator watch pods cluster-wide.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;
use weft_agent::config::AgentConfig;
use weft_tests::unique;

use crate::{
    KUSTOMIZATION, assert_config_accepted, assert_grants, assert_valid, deploy_dir, documents,
    kustomization_dirs,
    operator::{AZURE_RBAC, CLUSTER_RBAC, assert_serves_the_agents},
    read_kustomization, relative, strings_of, table_grants,
};

/// The one image of weft-agent, weft-cni and weft-operator.
const IMAGE: &str = "ghcr.io/weft-project/weft";
/// Its tag in the manifests.
const TAG: &str = "0.1.0";

/// Every component and the directory (relative to `deploy/`) it is built on in this test.
const COMPONENTS: [(&str, &str); 3] = [
    ("components/cluster-pool", "standalone"),
    ("components/azure", "standalone"),
    ("components/cilium-config", "agent"),
];

/// A built kustomization: its objects, keyed by (kind, namespace, name).
pub(crate) type Objects = BTreeMap<(String, String, String), Value>;

/// A scratch directory under the temp dir, removed on drop.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("weft-kustomize-"));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `kubectl kustomize <dir>`'s output, written to `out`.
fn build_into(dir: &Path, out: &Path) {
    let result = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run kubectl ({e}): install kubectl; refusing to skip the kustomize checks"
            )
        });
    assert!(
        result.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    fs::write(out, &result.stdout).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}

/// `dir`'s build (a directory with a Kustomization) as objects.
pub(crate) fn build(dir: &Path) -> Objects {
    let scratch = Scratch::new();
    let out = scratch.0.join("build.yaml");
    build_into(dir, &out);
    objects(&out)
}

/// The objects of a YAML file, keyed by (kind, namespace, name).
pub(crate) fn objects(file: &Path) -> Objects {
    let mut objects = BTreeMap::new();
    for doc in documents(file) {
        let key = (
            doc["kind"].as_str().expect("kind").to_owned(),
            doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            doc["metadata"]["name"].as_str().expect("name").to_owned(),
        );
        assert!(
            objects.insert(key.clone(), doc).is_none(),
            "{key:?} twice in {}",
            file.display()
        );
    }
    objects
}

/// A Kustomization in `scratch` of `base` (relative to `deploy/`) with `component`; its dir.
pub(crate) fn overlay(scratch: &Scratch, base: &str, component: &str) -> PathBuf {
    let dir = scratch.0.join("overlay");
    // kustomize takes only relative paths to bases and components.
    let up = dir.components().count() - 1;
    let root = Path::new(&"../".repeat(up))
        .join(deploy_dir().strip_prefix("/").expect("an absolute path"));
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - \
         {}\ncomponents:\n  - {}\n",
        root.join(base).display(),
        root.join(component).display()
    );
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join(KUSTOMIZATION), text).expect("write the overlay");
    dir
}

/// The images of the pod templates in `objects`.
fn images(objects: &Objects) -> BTreeSet<String> {
    objects
        .values()
        .flat_map(|doc| {
            let spec = &doc["spec"]["template"]["spec"];
            let mut all = strings_of(&spec["initContainers"]);
            all.extend(strings_of(&spec["containers"]));
            all
        })
        .map(|c| c["image"].as_str().expect("an image").to_owned())
        .collect()
}

#[test]
fn every_base_overlay_and_component_builds_and_validates() {
    let scratch = Scratch::new();
    let mut built = Vec::new();
    let mut components = BTreeSet::new();
    for dir in kustomization_dirs() {
        let name = relative(&dir);
        let out = scratch.0.join(format!("{}.yaml", name.replace('/', "-")));
        if read_kustomization(&dir)["kind"] == "Component" {
            let (_, base) = COMPONENTS
                .iter()
                .find(|(component, _)| *component == name)
                .unwrap_or_else(|| panic!("deploy/{name}: add it to COMPONENTS with its base"));
            let with = Scratch::new();
            build_into(&overlay(&with, base, &name), &out);
            components.insert(name.clone());
        } else {
            build_into(&dir, &out);
            let pinned: Vec<String> = strings_of(&read_kustomization(&dir)["images"])
                .iter()
                .map(|i| {
                    format!(
                        "{}:{}",
                        i["name"].as_str().unwrap_or("?"),
                        i["newTag"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            assert_eq!(
                pinned,
                if images(&objects(&out)).is_empty() {
                    Vec::new()
                } else {
                    vec![format!("{IMAGE}:{TAG}")]
                },
                "deploy/{name}/{KUSTOMIZATION} pins the image of its workloads, and only that"
            );
        }
        let used = images(&objects(&out));
        assert!(
            used.iter().all(|i| *i == format!("{IMAGE}:{TAG}")),
            "deploy/{name}: {used:?}"
        );
        built.push(out);
    }
    assert_eq!(
        components,
        COMPONENTS.iter().map(|(c, _)| (*c).to_owned()).collect(),
        "every component in COMPONENTS is under deploy/"
    );
    for path in &built {
        assert_valid(std::slice::from_ref(path), &path.display().to_string());
    }
}

#[test]
fn standalone_is_agent_and_operator_and_crds_are_apart() {
    let root = deploy_dir();
    let standalone = build(&root.join("standalone"));
    let mut parts = Objects::new();
    for base in ["agent", "operator"] {
        parts.extend(build(&root.join(base)));
    }
    assert_eq!(
        standalone.keys().collect::<Vec<_>>(),
        parts.keys().collect::<Vec<_>>()
    );
    assert_eq!(standalone, parts, "the bases as they are");
    let crds = build(&root.join("crds"));
    assert_eq!(crds.len(), 5, "the five cilium.io CRDs: {:?}", crds.keys());
    assert!(
        crds.keys()
            .all(|(kind, _, _)| kind == "CustomResourceDefinition"),
        "deploy/crds/ holds the CRDs and nothing else: {:?}",
        crds.keys()
    );
}

/// Deleting a CRD deletes every object of its kind: `kubectl delete -k` of anything but
/// `deploy/crds/` (every install path, base and overlay) must not hold one.
#[test]
fn no_workload_kustomization_holds_a_crd() {
    for dir in kustomization_dirs() {
        let name = relative(&dir);
        if name == "crds" || read_kustomization(&dir)["kind"] == "Component" {
            continue;
        }
        let built = build(&dir);
        let crds: Vec<_> = built
            .keys()
            .filter(|(kind, _, _)| kind == "CustomResourceDefinition")
            .collect();
        assert!(
            crds.is_empty(),
            "deploy/{name} holds {crds:?}: `kubectl delete -k deploy/{name}` would delete every \
             object of those kinds"
        );
    }
}

#[test]
fn beside_cilium_is_the_agent_alone_on_cilium_config() {
    let root = deploy_dir();
    let with = build(&root.join("with-cilium"));
    let agent = build(&root.join("agent"));
    for (kind, namespace, name) in with.keys() {
        assert!(
            kind != "CustomResourceDefinition" && kind != "ConfigMap" && !name.contains("operator"),
            "deploy/with-cilium/ installs {kind} {namespace}/{name}: Cilium's CRDs, cilium-config \
             and cilium-operator stay"
        );
    }
    let mut expected = agent.clone();
    expected.retain(|(kind, _, _), _| kind != "ConfigMap");
    assert_eq!(
        with.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "the agent base without its ConfigMap"
    );
    let key = |kind: &str| {
        with.keys()
            .find(|k| k.0 == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    let daemonset = &with[&key("DaemonSet")];
    let config_volumes: Vec<_> = strings_of(&daemonset["spec"]["template"]["spec"]["volumes"])
        .into_iter()
        .filter(|v| v.get("configMap").is_some())
        .collect();
    assert_eq!(config_volumes.len(), 1, "{config_volumes:?}");
    assert_eq!(config_volumes[0]["configMap"]["name"], "cilium-config");
    // Cilium's Helm chart puts cilium-config in the agent's namespace.
    assert_eq!(daemonset["metadata"]["namespace"], "kube-system");
    // Nothing else of the DaemonSet changed.
    let mut base = agent[&key("DaemonSet")].clone();
    let mut ours = daemonset.clone();
    for ds in [&mut base, &mut ours] {
        ds["spec"]["template"]["spec"]["volumes"] = Value::Null;
    }
    assert_eq!(
        ours, base,
        "only the config volume differs from deploy/agent/"
    );
}

#[test]
fn cluster_pool_component_configures_agent_and_operator() {
    let scratch = Scratch::new();
    let built = build(&overlay(&scratch, "standalone", "components/cluster-pool"));
    let config_map = built
        .iter()
        .find(|((kind, _, name), _)| kind == "ConfigMap" && name == "weft-config")
        .map(|(_, doc)| doc)
        .expect("weft-config");
    let data: BTreeMap<String, String> =
        serde_json::from_value(config_map["data"].clone()).expect("a map of strings");
    let what = "weft-config with components/cluster-pool";
    assert_eq!(data["ipam"], "cluster-pool");
    let agent = AgentConfig::resolve([&data]).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(agent.ipam.to_string(), "cluster-pool");
    assert_config_accepted(&data, what);
    assert_serves_the_agents(&data, what);
}

/// The ClusterRoles of `objects` bound to weft-operator's service account.
fn operator_cluster_roles(objects: &Objects) -> Vec<Value> {
    objects
        .iter()
        .filter(|((kind, _, _), binding)| {
            kind == "ClusterRoleBinding"
                && strings_of(&binding["subjects"])
                    .iter()
                    .any(|s| s["name"] == "weft-operator")
        })
        .map(|(_, binding)| {
            let name = binding["roleRef"]["name"].as_str().expect("a role name");
            objects
                .get(&("ClusterRole".to_owned(), String::new(), name.to_owned()))
                .unwrap_or_else(|| panic!("ClusterRole {name} is bound but not installed"))
                .clone()
        })
        .collect()
}

/// Whether any of `roles` grants reading pods (any verb, any group wildcard).
fn reads_pods(roles: &[Value]) -> bool {
    roles.iter().any(|role| {
        strings_of(&role["rules"]).iter().any(|rule| {
            strings_of(&rule["apiGroups"])
                .iter()
                .any(|g| g == "" || g == "*")
                && strings_of(&rule["resources"])
                    .iter()
                    .any(|r| r == "pods" || r == "*")
        })
    })
}

#[test]
fn only_the_azure_install_lets_the_operator_watch_pods() {
    let root = deploy_dir();
    for base in ["standalone", "operator"] {
        let roles = operator_cluster_roles(&build(&root.join(base)));
        assert!(
            !roles.is_empty(),
            "deploy/{base}: no role bound to weft-operator"
        );
        assert!(
            !reads_pods(&roles),
            "deploy/{base}: weft-operator may read pods, which only azure mode needs"
        );
    }
    let scratch = Scratch::new();
    let built = build(&overlay(&scratch, "standalone", "components/azure"));
    let roles = operator_cluster_roles(&built);
    assert_eq!(roles.len(), 1, "one ClusterRole");
    let table = CLUSTER_RBAC.iter().chain(AZURE_RBAC);
    assert_grants(
        &roles[0],
        &table_grants(table.map(|&(group, res, verbs)| (group, res, verbs, &[][..]))),
    );
    assert!(reads_pods(&roles), "the pod watch of azure mode");
    let config_map = built
        .iter()
        .find(|((kind, _, name), _)| kind == "ConfigMap" && name == "weft-config")
        .map(|(_, doc)| doc)
        .expect("weft-config");
    let data: BTreeMap<String, String> =
        serde_json::from_value(config_map["data"].clone()).expect("a map of strings");
    let what = "weft-config with components/azure";
    assert_eq!(data["ipam"], "azure");
    let agent = AgentConfig::resolve([&data]).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(agent.ipam.to_string(), "azure");
    assert_config_accepted(&data, what);
    let operator = crate::operator::resolve(&data).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(operator.ipam, weft_operator::config::IpamMode::Azure);
}

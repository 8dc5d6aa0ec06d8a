//! The Helm chart `deploy/helm/weft`, rendered by Helm's own engine (helm-python-sdk: Helm's Go
//! SDK, helm.sh/helm/v4, behind a C ABI; `cargo xtask setup` installs it) as
//! `helm template --include-crds` would:
//!
//! - in every IPAM mode it installs (multi-pool, cluster-pool, azure, kubernetes, eni)
//!   `helm lint --strict` finds nothing above "info", every manifest validates with `kubernetes-validate --strict`, the ConfigMap is one the agent (and
//!   weft-operator where it runs) accepts, weft-operator runs exactly in the modes it serves, and
//!   every container runs the one image;
//! - with its defaults it renders exactly the objects of `deploy/standalone/` and its CRDs
//!   exactly those of `deploy/crds/` (the same files, so `cargo xtask gen-crds` writes both);
//!   with `ipam.mode: cluster-pool` exactly `deploy/standalone/` with the cluster-pool
//!   component;
//! - the values named like Cilium's reach the keys Cilium's chart writes them to, and values no
//!   template could render sensibly fail the install with a message.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use serde::Deserialize;
use serde_json::{Value, json};
use weft_agent::config::AgentConfig;

use crate::{
    assert_config_accepted, assert_valid, deploy_dir,
    kustomize::{Objects, Scratch, build, objects, overlay},
    strings_of,
};

/// The venv's Python of `cargo xtask setup`, with helm-python-sdk.
const PYTHON: &str = "/opt/weft-tools/venv/bin/python3";
/// The Helm SDK release helm-python-sdk carries (`cargo xtask setup` pins the package).
const HELM_SDK: &str = "v4.2.3";
/// The release name and namespace the chart is rendered for (docs/install.md installs it so).
const RELEASE: (&str, &str) = ("weft", "kube-system");
/// The image of every container.
const IMAGE: &str = "ghcr.io/weft-project/weft:0.1.0";

/// One `helm template --include-crds`.
#[derive(Debug, Deserialize)]
pub(crate) struct Rendered {
    /// The Helm SDK version that rendered it.
    helm: String,
    /// `crds/` files by name.
    crds: BTreeMap<String, String>,
    /// Rendered templates by path (those that render to nothing left out).
    manifests: BTreeMap<String, String>,
}

fn chart_dir() -> PathBuf {
    deploy_dir().join("helm/weft")
}

/// The chart rendered with `values`: Ok, or Helm's error.
pub(crate) fn try_render(values: &Value) -> Result<Rendered, String> {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is missing: run `cargo xtask setup` (it installs helm-python-sdk from PyPI into \
         /opt/weft-tools/venv); refusing to skip the Helm chart checks"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/helm_template.py");
    let out = Command::new(PYTHON)
        .arg(&script)
        .arg(chart_dir())
        .args([RELEASE.0, RELEASE.1])
        .arg(values.to_string())
        .output()
        .expect("run the Helm renderer");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let rendered: Rendered = serde_json::from_slice(&out.stdout).expect("the renderer's JSON");
    assert_eq!(rendered.helm, HELM_SDK, "rendered by another Helm");
    Ok(rendered)
}

fn render(values: &Value) -> Rendered {
    try_render(values).unwrap_or_else(|e| panic!("the chart does not render with {values}:\n{e}"))
}

/// The values a helm command line's `--set` `expressions` give, by Helm's own parser.
pub(crate) fn set_values(expressions: &[String]) -> Result<Value, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/helm_template.py");
    let out = Command::new(PYTHON)
        .arg(&script)
        .arg("--set")
        .args(expressions)
        .output()
        .expect("run the --set parser");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).expect("the values' JSON"))
}

/// `helm lint --strict`'s findings with `values` above "info" (severity 1), and its errors.
fn lint_findings(values: &Value) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/helm_template.py");
    let out = Command::new(PYTHON)
        .arg(&script)
        .arg("--lint")
        .arg(chart_dir())
        .arg(RELEASE.1)
        .arg(values.to_string())
        .output()
        .expect("run helm lint");
    assert!(
        out.status.success(),
        "helm lint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the lint report's JSON");
    assert_eq!(report["helm"], HELM_SDK, "linted by another Helm");
    let mut findings: Vec<Value> = strings_of(&report["messages"])
        .into_iter()
        .filter(|m| m["severity"].as_u64().is_none_or(|s| s > 1))
        .collect();
    findings.extend(strings_of(&report["errors"]));
    findings
}

/// The rendered templates (not the CRDs), written to `scratch` as files named `<prefix>-…`.
fn write(scratch: &Scratch, prefix: &str, files: &BTreeMap<String, String>) -> Vec<PathBuf> {
    files
        .iter()
        .map(|(name, text)| {
            let file = name.rsplit('/').next().expect("a file name");
            let path = scratch.0.join(format!("{prefix}-{file}"));
            fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            path
        })
        .collect()
}

/// The objects of the rendered templates (`crds`: of the `crds/` files instead).
fn rendered_objects(rendered: &Rendered, crds: bool) -> Objects {
    let scratch = Scratch::new();
    let files = write(
        &scratch,
        "o",
        if crds {
            &rendered.crds
        } else {
            &rendered.manifests
        },
    );
    let mut all = Objects::new();
    for file in files {
        for (key, doc) in objects(&file) {
            assert!(all.insert(key.clone(), doc).is_none(), "{key:?} twice");
        }
    }
    all
}

/// The values of each mode the chart installs.
fn modes() -> [(&'static str, Value); 5] {
    [
        ("multi-pool", json!({})),
        ("cluster-pool", json!({"ipam": {"mode": "cluster-pool"}})),
        (
            "azure",
            json!({
                "ipam": {"mode": "azure"},
                "azure": {
                    "enabled": true,
                    "resourceGroup": "MC_rg_cluster_westeurope",
                    "subscriptionID": "00000000-0000-0000-0000-000000000001",
                    "tenantID": "00000000-0000-0000-0000-000000000002",
                    "clientID": "00000000-0000-0000-0000-000000000003",
                    "clientSecret": "secret",
                },
            }),
        ),
        ("kubernetes", json!({"ipam": {"mode": "kubernetes"}})),
        (
            "eni",
            json!({"ipam": {"mode": "eni"}, "eni": {"enabled": true}}),
        ),
    ]
}

fn find<'a>(objects: &'a Objects, kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|((k, _, n), _)| k == kind && n == name)
        .map(|(_, doc)| doc)
}

fn config_data(objects: &Objects) -> BTreeMap<String, String> {
    let config_map = find(objects, "ConfigMap", "weft-config").expect("weft-config");
    serde_json::from_value(config_map["data"].clone()).expect("a map of strings")
}

#[test]
fn every_ipam_mode_renders_and_validates() {
    let scratch = Scratch::new();
    for (mode, values) in modes() {
        let findings = lint_findings(&values);
        assert!(
            findings.is_empty(),
            "helm lint --strict, {mode}: {findings:?}"
        );
        let rendered = render(&values);
        let mut files = write(&scratch, &format!("{mode}-crd"), &rendered.crds);
        files.extend(write(&scratch, mode, &rendered.manifests));
        assert_valid(&files, &format!("the chart with ipam.mode {mode}"));

        let objects = rendered_objects(&rendered, false);
        let data = config_data(&objects);
        assert_eq!(data["ipam"], mode);
        let what = format!("the chart's weft-config with ipam.mode {mode}");
        let operator = find(&objects, "Deployment", "weft-operator");
        if ["multi-pool", "cluster-pool", "azure"].contains(&mode) {
            assert!(operator.is_some(), "{mode}: weft-operator serves it");
            assert_config_accepted(&data, &what);
        } else {
            assert!(
                operator.is_none() && find(&objects, "ClusterRole", "weft-operator").is_none(),
                "{mode}: weft-operator does not serve it, so it is not installed"
            );
            let agent = AgentConfig::resolve([&data]).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(agent.ipam.to_string(), mode);
        }
        for doc in objects.values() {
            let spec = &doc["spec"]["template"]["spec"];
            for container in strings_of(&spec["initContainers"])
                .iter()
                .chain(&strings_of(&spec["containers"]))
            {
                assert_eq!(container["image"], IMAGE, "{mode}");
            }
        }
    }
}

#[test]
fn defaults_render_the_kustomize_install() {
    let root = deploy_dir();
    let rendered = render(&json!({}));
    let standalone = build(&root.join("standalone"));
    let chart = rendered_objects(&rendered, false);
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        standalone.keys().collect::<Vec<_>>(),
        "the chart's objects are deploy/standalone/'s"
    );
    for (key, doc) in &standalone {
        assert_eq!(
            &chart[key], doc,
            "{key:?} differs from deploy/standalone/'s: the template and the base moved apart"
        );
    }
    assert_eq!(
        rendered_objects(&rendered, true),
        build(&root.join("crds")),
        "the chart's CRDs are deploy/crds/"
    );
    let scratch = Scratch::new();
    let cluster_pool = build(&overlay(&scratch, "standalone", "components/cluster-pool"));
    assert_eq!(
        rendered_objects(&render(&json!({"ipam": {"mode": "cluster-pool"}})), false),
        cluster_pool,
        "ipam.mode cluster-pool: deploy/standalone/ with components/cluster-pool"
    );
}

#[test]
fn chart_crds_are_the_generated_files() {
    let chart = chart_dir().join("crds");
    let mut names: Vec<String> = fs::read_dir(&chart)
        .expect("crds/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut generated: Vec<String> = fs::read_dir(deploy_dir().join("crds"))
        .expect("deploy/crds/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n != "kustomization.yaml")
        .collect();
    generated.sort();
    assert_eq!(names, generated);
    for name in names {
        assert_eq!(
            fs::read_to_string(chart.join(&name)).expect("read"),
            fs::read_to_string(deploy_dir().join("crds").join(&name)).expect("read"),
            "deploy/helm/weft/crds/{name} differs from deploy/crds/{name}: run `cargo xtask gen-crds`"
        );
    }
}

#[test]
fn cilium_named_values_reach_cilium_s_keys() {
    let values = json!({
        "image": {"repository": "registry.example.com/weft", "tag": "0.2.0", "pullPolicy": "Always"},
        "ipam": {
            "mode": "multi-pool",
            "ciliumNodeUpdateRate": "30s",
            "multiPoolPreAllocation": "default=16",
            "operator": {"autoCreateCiliumPodIPPools": {
                "default": {"ipv4": {"cidrs": ["10.10.0.0/16", "10.11.0.0/16"], "maskSize": 26}},
                "dual": {
                    "ipv4": {"cidrs": ["10.20.0.0/16"], "maskSize": 24},
                    "ipv6": {"cidrs": ["fd00:20::/104"], "maskSize": 120},
                },
            }},
        },
        "ipv6": {"enabled": true},
        "operator": {"replicas": 3},
    });
    let objects = rendered_objects(&render(&values), false);
    let data = config_data(&objects);
    assert_eq!(data["ipam-cilium-node-update-rate"], "30s");
    assert_eq!(data["ipam-multi-pool-pre-allocation"], "default=16");
    assert_eq!(data["enable-ipv6"], "true");
    assert_eq!(
        data["auto-create-cilium-pod-ip-pools"],
        "default=ipv4-cidrs:10.10.0.0/16,10.11.0.0/16;ipv4-mask-size:26 \
         dual=ipv4-cidrs:10.20.0.0/16;ipv4-mask-size:24;ipv6-cidrs:fd00:20::/104;ipv6-mask-size:120"
    );
    assert_config_accepted(&data, "weft-config from Cilium-named values");
    let operator = find(&objects, "Deployment", "weft-operator").expect("weft-operator");
    assert_eq!(operator["spec"]["replicas"], 3);
    let container = &operator["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example.com/weft:0.2.0");
    assert_eq!(container["imagePullPolicy"], "Always");

    let cluster_pool = json!({"ipam": {"mode": "cluster-pool", "operator": {
        "clusterPoolIPv4PodCIDRList": ["10.1.0.0/16", "10.2.0.0/16"],
        "clusterPoolIPv4MaskSize": 26,
    }}});
    let data = config_data(&rendered_objects(&render(&cluster_pool), false));
    assert_eq!(data["cluster-pool-ipv4-cidr"], "10.1.0.0/16 10.2.0.0/16");
    assert_eq!(data["cluster-pool-ipv4-mask-size"], "26");
    assert_config_accepted(&data, "weft-config, cluster-pool from Cilium-named values");

    // Dual-stack cluster-pool, logging, both metrics listeners and the identity collection.
    let more = json!({
        "ipam": {"mode": "cluster-pool", "operator": {
            "clusterPoolIPv6PodCIDRList": ["fd00:10::/104"],
            "clusterPoolIPv6MaskSize": 112,
        }},
        "ipv6": {"enabled": true},
        "debug": {"enabled": true},
        "prometheus": {"enabled": true, "port": 19962},
        "operator": {
            "prometheus": {"enabled": true, "port": 19963},
            "identityGCInterval": "5m0s",
            "identityHeartbeatTimeout": "10m0s",
        },
    });
    let data = config_data(&rendered_objects(&render(&more), false));
    for (key, value) in [
        ("cluster-pool-ipv6-cidr", "fd00:10::/104"),
        ("cluster-pool-ipv6-mask-size", "112"),
        ("debug", "true"),
        ("prometheus-serve-addr", ":19962"),
        ("enable-metrics", "true"),
        ("operator-prometheus-serve-addr", ":19963"),
        ("identity-gc-interval", "5m0s"),
        ("identity-heartbeat-timeout", "10m0s"),
    ] {
        assert_eq!(data.get(key).map(String::as_str), Some(value), "{key}");
    }
    assert_config_accepted(
        &data,
        "weft-config with Cilium's logging, metrics and GC values",
    );

    let (_, azure) = modes()
        .into_iter()
        .find(|(mode, _)| *mode == "azure")
        .expect("azure");
    let objects = rendered_objects(&render(&azure), false);
    let data = config_data(&objects);
    assert_eq!(data["azure-resource-group"], "MC_rg_cluster_westeurope");
    assert_eq!(
        data["azure-subscription-id"],
        "00000000-0000-0000-0000-000000000001"
    );
    let secret = find(&objects, "Secret", "weft-azure").expect("the Secret weft-azure");
    assert_eq!(secret["stringData"]["AZURE_CLIENT_SECRET"], "secret");
    let operator = find(&objects, "Deployment", "weft-operator").expect("weft-operator");
    let env: Vec<String> =
        strings_of(&operator["spec"]["template"]["spec"]["containers"][0]["env"])
            .iter()
            .filter(|e| e["valueFrom"]["secretKeyRef"]["name"] == "weft-azure")
            .map(|e| e["name"].as_str().expect("a name").to_owned())
            .collect();
    assert_eq!(
        env,
        ["AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"]
    );
}

#[test]
fn values_no_template_can_render_fail_with_the_way_out() {
    for (values, says) in [
        (json!({"ipam": {"mode": "crd"}}), "ipam.mode \"crd\""),
        (
            json!({"ipam": {"mode": "azure"}}),
            "azure.enabled and ipam.mode azure",
        ),
        (
            json!({"azure": {"enabled": true}}),
            "azure.enabled and ipam.mode azure",
        ),
        (
            json!({"ipam": {"mode": "eni"}}),
            "eni.enabled and ipam.mode eni",
        ),
        (
            json!({"ipam": {"mode": "azure"}, "azure": {"enabled": true, "clientSecret": "s"}}),
            "azure.tenantID goes with azure.clientSecret",
        ),
    ] {
        match try_render(&values) {
            Ok(rendered) => panic!("{values} rendered: {:?}", rendered.manifests.keys()),
            Err(error) => assert!(error.contains(says), "{values}: {error}"),
        }
    }
}

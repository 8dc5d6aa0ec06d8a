//! Objects against both schemas of their CRD, upstream Cilium's and our generated one (as JSON
//! Schema draft 4, `x-kubernetes-*` stripped, unknown formats such as `cidr` ignored): the
//! example store's CiliumNodes and CiliumPodIPPools as shipped and after a round trip through
//! the crd types, and realistic objects of the other kinds after a round trip.

use std::{collections::BTreeMap, fs, path::Path};

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use weft_agent::crd::{
    endpoint::CiliumEndpoint, identity::CiliumIdentity, node::CiliumNode,
    nodeconfig::CiliumNodeConfig, pool::CiliumPodIPPool,
};

use super::{generated_crd, read_yaml, upstream_crd, version_schema};

/// Drop `x-kubernetes-*` extensions (no JSON Schema meaning).
fn strip_kubernetes_extensions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.retain(|key, _| !key.starts_with("x-kubernetes-"));
            map.values_mut().for_each(strip_kubernetes_extensions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_kubernetes_extensions),
        _ => {}
    }
}

fn validator(mut schema: Value, what: &str) -> jsonschema::Validator {
    strip_kubernetes_extensions(&mut schema);
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(true)
        .should_ignore_unknown_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{what}: the schema does not compile: {e}"))
}

/// Both validators of `kind`'s storage version: (`upstream`, `ours`).
struct Schemas {
    kind: &'static str,
    upstream: jsonschema::Validator,
    ours: jsonschema::Validator,
}

impl Schemas {
    fn new(kind: &'static str, version: &str) -> Self {
        let ours = generated_crd(kind);
        let upstream = upstream_crd(&ours.file_name);
        Self {
            kind,
            upstream: validator(version_schema(&upstream, version), "upstream"),
            ours: validator(version_schema(&ours.document, version), "ours"),
        }
    }

    /// Schema errors of `doc` against both, as `schema instance-path: message`.
    fn errors(&self, doc: &Value) -> Vec<String> {
        [("upstream", &self.upstream), ("ours", &self.ours)]
            .into_iter()
            .flat_map(|(which, validator)| {
                validator
                    .iter_errors(doc)
                    .map(move |e| format!("{which} {}: {e}", e.instance_path()))
            })
            .collect()
    }

    fn assert_valid(&self, doc: &Value, what: &str) {
        let errors = self.errors(doc);
        assert!(
            errors.is_empty(),
            "{what} does not validate against the {} CRD: {errors:#?}\n{doc:#}",
            self.kind
        );
    }

    /// `doc` as shipped, and after decoding into `T` and encoding again.
    fn assert_valid_round_trip<T: Serialize + DeserializeOwned>(&self, doc: &Value, what: &str) {
        self.assert_valid(doc, what);
        let typed: T = serde_json::from_value(doc.clone())
            .unwrap_or_else(|e| panic!("{what} does not decode as a {}: {e}", self.kind));
        let again = serde_json::to_value(&typed).expect("crd types serialize");
        self.assert_valid(&again, &format!("{what} after a round trip"));
    }
}

/// The YAML documents under `examples/store/<dir>`.
fn example_docs(dir: &str) -> Vec<(String, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/store")
        .join(dir);
    let mut paths: Vec<_> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "{}: no examples", root.display());
    paths
        .into_iter()
        .map(|path| {
            (
                format!(
                    "examples/store/{dir}/{}",
                    path.file_name().expect("a file").display()
                ),
                read_yaml(&path),
            )
        })
        .collect()
}

#[test]
fn example_nodes_and_pools_validate_against_both_schemas() {
    let nodes = Schemas::new("CiliumNode", "v2");
    for (name, doc) in example_docs("ciliumnodes") {
        nodes.assert_valid_round_trip::<CiliumNode>(&doc, &name);
    }
    let pools = Schemas::new("CiliumPodIPPool", "v2alpha1");
    for (name, doc) in example_docs("ciliumpodippools") {
        pools.assert_valid_round_trip::<CiliumPodIPPool>(&doc, &name);
    }
}

#[test]
fn cloud_nodes_validate_against_both_schemas() {
    let nodes = Schemas::new("CiliumNode", "v2");
    let doc = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNode",
        "metadata": {"name": "ip-10-1-1-10", "resourceVersion": "77"},
        "spec": {
            "instance-id": "i-0abc",
            "eni": {
                "instance-type": "m5.large", "first-interface-index": 1,
                "subnet-tags": {"tier": "pods"}, "use-primary-address": false
            },
            "ipam": {
                "pool": {"10.1.1.226": {"owner": "default/a", "resource": "eni-1"}},
                "podCIDRs": ["10.1.0.0/24"], "pre-allocate": 8, "min-allocate": 2
            },
            "nodeidentity": 6
        },
        "status": {
            "eni": {"enis": {"eni-1": {
                "id": "eni-1", "ip": "10.1.1.10", "number": 1,
                "subnet": {"id": "subnet-1", "cidr": "10.1.0.0/16"},
                "vpc": {"id": "vpc-1", "primary-cidr": "10.0.0.0/8", "cidrs": ["10.0.0.0/8"]},
                "addresses": ["10.1.1.226"], "prefixes": ["10.1.2.0/28"],
                "security-groups": ["sg-1"], "tags": {"a": "b"}
            }}},
            "azure": {"interfaces": [{
                "id": "nic-1", "ip": "10.2.0.4", "gateway": "10.2.0.1", "cidr": "10.2.0.0/16",
                "addresses": [{"ip": "10.2.0.5", "subnet": "s", "state": "succeeded"}]
            }]},
            "ipam": {
                "used": {"10.1.1.226": {"owner": "default/a", "resource": "eni-1"}},
                "release-ips": {"10.1.1.229": "ready-for-release"},
                "operator-status": {}
            }
        }
    });
    nodes.assert_valid_round_trip::<CiliumNode>(&doc, "an ENI/Azure CiliumNode");

    // Both schemas can fail, at the same place.
    let mut broken = doc;
    broken["status"]["ipam"]["release-ips"]["10.1.1.229"] = json!(7);
    broken["spec"]["ipam"]["pre-allocate"] = json!("eight");
    let errors = nodes.errors(&broken);
    for want in [
        "upstream /spec/ipam/pre-allocate",
        "ours /spec/ipam/pre-allocate",
        "upstream /status/ipam/release-ips/10.1.1.229",
        "ours /status/ipam/release-ips/10.1.1.229",
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(want)),
            "no error at {want}: {errors:#?}"
        );
    }
}

#[test]
fn other_kinds_validate_against_both_schemas() {
    let endpoint = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumEndpoint",
        "metadata": {"name": "web-1", "namespace": "default", "uid": "u"},
        "status": {
            "id": 1291,
            "identity": {"id": 48712, "labels": ["k8s:app=web"]},
            "networking": {"addressing": [{"ipv4": "10.0.1.23", "ipv6": "fd00::1:17"}], "node": "192.168.1.10"},
            "encryption": {},
            "external-identifiers": {"container-id": "3f9c2b", "k8s-pod-name": "web-1"},
            "policy": {"ingress": {"enforcing": false, "state": "<status disabled>"},
                       "egress": {"enforcing": false, "state": "<status disabled>"}},
            "state": "ready"
        }
    });
    Schemas::new("CiliumEndpoint", "v2")
        .assert_valid_round_trip::<CiliumEndpoint>(&endpoint, "a CiliumEndpoint");

    let identity = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumIdentity",
        "metadata": {"name": "48712", "labels": {"app": "web"}},
        "security-labels": {"k8s:app": "web", "k8s:io.kubernetes.pod.namespace": "default"}
    });
    let identities = Schemas::new("CiliumIdentity", "v2");
    identities.assert_valid_round_trip::<CiliumIdentity>(&identity, "a CiliumIdentity");
    let empty = serde_json::to_value(CiliumIdentity::new(7, BTreeMap::new())).expect("encodes");
    identities.assert_valid(&empty, "a new CiliumIdentity without labels");

    let config = json!({
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNodeConfig",
        "metadata": {"name": "dc1-pool", "namespace": "kube-system"},
        "spec": {
            "defaults": {"ipam-default-ip-pool": "dc1-pool"},
            "nodeSelector": {
                "matchLabels": {"topology.kubernetes.io/zone": "dc1"},
                "matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]
            }
        }
    });
    for version in ["v2", "v2alpha1"] {
        Schemas::new("CiliumNodeConfig", version).assert_valid_round_trip::<CiliumNodeConfig>(
            &config,
            &format!("a {version} CiliumNodeConfig"),
        );
    }
}

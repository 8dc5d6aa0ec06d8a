//! 3. Written documents against the upstream CRD schema.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;

// ---------------------------------------------------------------------------------------------
// 3. Written documents against the upstream CRD schema.

pub(crate) fn crd_fixture() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace");
    let mut candidates: Vec<PathBuf> = std::env::var_os("WEFT_CILIUM_CRDS")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(workspace.join("../shared/fixtures/cilium-crds"));
    candidates.push(PathBuf::from("/work/shared/fixtures/cilium-crds"));
    candidates
        .iter()
        .map(|dir| dir.join("ciliumnodes.yaml"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the upstream CiliumNode CRD (ciliumnodes.yaml) is in none of {candidates:?}; \
                 set WEFT_CILIUM_CRDS to its directory"
            )
        })
}

/// Drop `x-kubernetes-*` extensions (no JSON Schema meaning).
pub(crate) fn strip_kubernetes_extensions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.retain(|key, _| !key.starts_with("x-kubernetes-"));
            map.values_mut().for_each(strip_kubernetes_extensions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_kubernetes_extensions),
        _ => {}
    }
}

/// `openAPIV3Schema` of the served storage version of the upstream CiliumNode CRD, as a
/// draft 4 validator (unknown formats such as `cidr` are ignored).
pub(crate) fn crd_validator() -> jsonschema::Validator {
    let path = crd_fixture();
    let crd = read(&path);
    assert_eq!(
        crd["kind"],
        "CustomResourceDefinition",
        "{}",
        path.display()
    );
    assert_eq!(
        crd["spec"]["names"]["kind"],
        "CiliumNode",
        "{}",
        path.display()
    );
    let versions = crd["spec"]["versions"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no spec.versions", path.display()));
    let version = versions
        .iter()
        .find(|v| v["served"] == true && v["storage"] == true)
        .or_else(|| versions.iter().find(|v| v["served"] == true))
        .unwrap_or_else(|| panic!("{}: no served version", path.display()));
    let mut schema = version["schema"]["openAPIV3Schema"].clone();
    assert!(
        schema.is_object(),
        "{}: version {} has no openAPIV3Schema",
        path.display(),
        version["name"]
    );
    strip_kubernetes_extensions(&mut schema);
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(true)
        .should_ignore_unknown_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{}: the schema does not compile: {e}", path.display()))
}

/// Schema errors of `doc`, as `instance path: message`.
pub(crate) fn schema_errors(validator: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    validator
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

pub(crate) fn assert_valid(validator: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors = schema_errors(validator, doc);
    assert!(
        errors.is_empty(),
        "{what} does not validate against the CiliumNode CRD: {errors:#?}\n{doc:#}"
    );
}

pub(crate) fn assert_invalid_at(
    validator: &jsonschema::Validator,
    doc: &Value,
    at: &str,
    what: &str,
) {
    let errors = schema_errors(validator, doc);
    assert!(
        errors.iter().any(|e| e.starts_with(at)),
        "{what} must fail validation at {at}; errors: {errors:?}"
    );
}

#[test]
pub(crate) fn written_nodes_validate_against_the_upstream_crd_schema() {
    let validator = crd_validator();
    for ext in ["yaml", "json"] {
        assert_valid(
            &validator,
            &crd_mode_round_trip(ext),
            &format!("CRD-mode node1.{ext}"),
        );
    }
    let multi_pool = multi_pool_round_trip("yaml");
    assert_valid(&validator, &multi_pool, "multi-pool node1.yaml");

    // The check can fail: the same document with damage the schema forbids.
    let mut broken = multi_pool.clone();
    broken["spec"]["ipam"]["pools"]["allocated"][0]
        .as_object_mut()
        .expect("allocated[0] is an object")
        .remove("pool");
    assert_invalid_at(
        &validator,
        &broken,
        "/spec/ipam/pools/allocated/0",
        "allocated[0] without pool",
    );
    let mut broken = multi_pool.clone();
    broken["status"]["ipam"]["release-ips"] = json!({"10.0.0.7": "maybe"});
    assert_invalid_at(
        &validator,
        &broken,
        "/status/ipam/release-ips/10.0.0.7",
        "an unknown release state",
    );
    let mut broken = multi_pool;
    broken
        .as_object_mut()
        .expect("a CiliumNode is an object")
        .remove("spec");
    assert_invalid_at(&validator, &broken, "", "a CiliumNode without spec");
}

#[test]
pub(crate) fn example_store_node_validates_after_a_multi_pool_write() {
    let validator = crd_validator();
    let scratch = Scratch::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/store");
    copy_tree(&examples, &scratch.root);
    let path = scratch.path("ciliumnodes/node1.yaml");
    let before = read(&path);
    assert_valid(
        &validator,
        &before,
        "examples/store/ciliumnodes/node1.yaml as shipped",
    );
    // The agent asks for addresses in both pools and releases one CIDR of mars.
    let pools = json!({
        "requested": [
            {"pool": "default", "needed": {"ipv4-addrs": 3, "ipv6-addrs": 3}},
            {"pool": "mars", "needed": {"ipv4-addrs": 1, "ipv6-addrs": 1}}
        ],
        "allocated": [
            {"pool": "default", "cidrs": ["10.200.0.0/27", "fd00:200::/123"]},
            {"pool": "mars", "cidrs": ["10.201.0.0/28"]}
        ]
    });
    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(LONG);
        let snap = store.snapshots().borrow().clone();
        assert!(
            snap.problems.is_empty(),
            "examples/store: {:?}",
            snap.problems
        );
        assert_eq!(
            snap.pods.len(),
            3,
            "examples/store pods: {}",
            summary(&snap)
        );
        store.write_node(pools_write(&pools), "");
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {}", report(&e)));
    });
    drop(rt);
    let after = read(&path);
    let changed = diff(&before, &after);
    assert!(
        !changed.is_empty() && changed.iter().all(|p| under(p, "spec.ipam.pools")),
        "the write changed {changed:?}; only spec.ipam.pools may change"
    );
    assert_eq!(after["spec"]["ipam"]["pools"], pools, "written pools");
    assert_valid(
        &validator,
        &after,
        "examples/store/ciliumnodes/node1.yaml after the write",
    );
}

/// STORE BUG (agent/src/store/embedded/writeback.rs, `remove`, lines 74-77): writing empty
/// `spec.ipam.pools` removes the parents left empty all the way up, `spec` included. The
/// CiliumNode CRD requires `spec` (`required: [metadata, spec]`) and Cilium always writes it
/// (`json:"spec"`, no omitempty), so the written document is rejected by the schema.
#[test]
pub(crate) fn emptied_pools_keep_the_required_spec() {
    let validator = crd_validator();
    let scratch = Scratch::new();
    let path = scratch.put(
        "ciliumnodes/node1.yaml",
        "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  ipam:\n    \
         pools:\n      requested:\n      - pool: default\n        needed:\n          \
         ipv4-addrs: 16\n      allocated:\n      - pool: default\n        cidrs:\n        - \
         10.200.0.0/27\n",
    );
    assert_valid(&validator, &read(&path), "the node before the write");
    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(LONG);
        // A drained node: nothing requested, every CIDR released.
        store.write_node(
            NodeWrite {
                pools: Some(IpamPoolSpec::default()),
                ..NodeWrite::default()
            },
            "",
        );
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {}", report(&e)));
    });
    drop(rt);
    let after = read(&path);
    assert!(
        after.get("spec").is_some(),
        "STORE BUG: writing empty spec.ipam.pools removed the required `spec`: {after:#}"
    );
    assert_valid(&validator, &after, "the node after emptying its pools");
}

//! 2. Round trip of real Cilium objects.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;

// ---------------------------------------------------------------------------------------------
// 2. Round trip of real Cilium objects.

/// A node document before and after `write` + `flush`, and what `render_node` predicted.
pub(crate) struct RoundTrip {
    pub(crate) before: Value,
    pub(crate) after: Value,
    pub(crate) rendered: Value,
    /// The written file's text.
    pub(crate) text: String,
    /// Files in `ciliumnodes/` afterwards.
    pub(crate) files: Vec<String>,
}

pub(crate) fn round_trip(ext: &str, yaml: &str, write: &NodeWrite) -> RoundTrip {
    let scratch = Scratch::new();
    let path = scratch.put_node(ext, yaml);
    let before = read(&path);
    let rt = current_thread();
    let (rendered, after) = rt.block_on(async {
        let store = scratch.open(LONG);
        let rendered = embedded::render_node(&scratch.root, "node1", write)
            .unwrap_or_else(|e| panic!("render_node: {}", report(&e)));
        store.write_node(write.clone(), "");
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush node1.{ext}: {}", report(&e)));
        let after = read(&path);
        // The watcher republishes the own node as written.
        let written: CiliumNode =
            docs::decode(&path, after.clone()).unwrap_or_else(|e| panic!("{}", report(&e)));
        let mut rx = store.snapshots();
        wait_snapshot(&mut rx, "the own CiliumNode as written", |s| {
            s.own_node() == Some(&written) && s.problems.is_empty()
        })
        .await;
        (rendered, after)
    });
    drop(rt);
    RoundTrip {
        before,
        after,
        rendered,
        text: fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())),
        files: file_names(&scratch.path("ciliumnodes")),
    }
}

/// `trip.after` is `expected`, differs from `trip.before` only under `owned`, is what
/// `render_node` predicted, and kept its file name and format.
pub(crate) fn check_round_trip(trip: &RoundTrip, ext: &str, expected: &Value, owned: &[&str]) {
    let changed = diff(&trip.before, &trip.after);
    assert!(
        !changed.is_empty(),
        "node1.{ext}: the write changed nothing"
    );
    let foreign: Vec<&String> = changed
        .iter()
        .filter(|p| !owned.iter().any(|o| under(p, o)))
        .collect();
    assert!(
        foreign.is_empty(),
        "node1.{ext}: the write changed {foreign:?}, outside the owned {owned:?}"
    );
    assert!(
        trip.after == *expected,
        "node1.{ext}: written document differs from the expected one at {:?}\nwritten: {:#}",
        diff(expected, &trip.after),
        trip.after
    );
    assert_eq!(
        trip.rendered, trip.after,
        "node1.{ext}: render_node and the written document differ"
    );
    assert_eq!(
        trip.files,
        [format!("node1.{ext}")],
        "node1.{ext}: files in ciliumnodes/"
    );
    let as_json = serde_json::from_str::<Value>(&trip.text);
    if ext == "json" {
        let parsed = as_json.unwrap_or_else(|e| panic!("node1.json is no longer JSON: {e}"));
        assert_eq!(parsed, trip.after, "node1.json");
    } else {
        assert!(
            as_json.is_err(),
            "node1.{ext} was written as JSON, not YAML:\n{}",
            trip.text
        );
    }
}

/// The CRD-mode write-back on `node1.<ext>`; returns the written document.
pub(crate) fn crd_mode_round_trip(ext: &str) -> Value {
    let write = NodeWrite {
        release_ips: Some(BTreeMap::from([(
            "10.0.0.7".to_owned(),
            ReleaseState::ReadyForRelease,
        )])),
        ..used_write(&[("10.0.0.1", "router"), ("10.0.0.6", "default/web")])
    };
    let trip = round_trip(ext, CRD_MODE_NODE, &write);
    let mut expected = trip.before.clone();
    expected["status"]["ipam"]["used"] = json!({
        "10.0.0.1": {"owner": "router", "resource": "eni-1"},
        "10.0.0.6": {"owner": "default/web", "resource": "eni-1"}
    });
    expected["status"]["ipam"]["release-ips"] = json!({"10.0.0.7": "ready-for-release"});
    check_round_trip(
        &trip,
        ext,
        &expected,
        &["status.ipam.used", "status.ipam.release-ips"],
    );
    trip.after
}

/// The multi-pool write-back on `node1.<ext>`; returns the written document.
pub(crate) fn multi_pool_round_trip(ext: &str) -> Value {
    let pools = multi_pool_pools();
    let trip = round_trip(ext, MULTI_POOL_NODE, &pools_write(&pools));
    let mut expected = trip.before.clone();
    expected["spec"]["ipam"]["pools"] = pools;
    check_round_trip(&trip, ext, &expected, &["spec.ipam.pools"]);
    trip.after
}

#[test]
pub(crate) fn crd_mode_write_back_changes_only_used_and_release_ips() {
    for ext in ["yaml", "yml", "json"] {
        let written = crd_mode_round_trip(ext);
        assert_eq!(
            written["metadata"]["annotations"]["example.com/quoted-octal"], "0755",
            "node1.{ext}: a string that looks like a number stays a string"
        );
    }
}

#[test]
pub(crate) fn multi_pool_write_back_changes_only_spec_ipam_pools() {
    for ext in ["yaml", "json"] {
        let written = multi_pool_round_trip(ext);
        assert_eq!(
            written["spec"]["ipam"]["futureIpam"], "kept",
            "node1.{ext}: sibling of pools"
        );
    }
}

/// Lines of `yaml` with a plain (unquoted) scalar that YAML 1.2 reads as a string but YAML 1.1
/// (Kubernetes' `sigs.k8s.io/yaml`, goyaml.v2 `resolve.go`; PyYAML) reads as a boolean. A YAML
/// writer never emits a real boolean that way (it writes `true`/`false`), so each such line is
/// a string that Kubernetes tooling would misread.
pub(crate) fn yaml_1_1_booleans(yaml: &str) -> Vec<&str> {
    const YAML_1_1_ONLY_BOOLS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF",
    ];
    yaml.lines()
        .filter(|line| {
            let line = line.trim_start().trim_start_matches("- ");
            let value = line.split_once(": ").map_or(line, |(_, value)| value);
            YAML_1_1_ONLY_BOOLS.contains(&value.trim_end())
        })
        .collect()
}

/// STORE BUG (agent/src/store/embedded/docs.rs, `write_atomic`, the `serde_norway::to_string`
/// call, line 191): the YAML writer emits the strings "on" and "yes" unquoted. YAML 1.1 readers
/// (kubectl and everything on `sigs.k8s.io/yaml`, PyYAML) read those as booleans, so a CiliumNode
/// a user pasted with `example.com/on: "on"` comes back as `example.com/on: on`, which
/// `kubectl apply -f` rejects (an annotation must be a string).
#[test]
pub(crate) fn yaml_keeps_strings_that_yaml_1_1_reads_as_booleans_quoted() {
    let trip = round_trip(
        "yaml",
        CRD_MODE_NODE,
        &used_write(&[("10.0.0.6", "default/web")]),
    );
    assert_eq!(
        trip.after["metadata"]["annotations"]["example.com/on"], "on",
        "weft itself reads the string back"
    );
    let misread = yaml_1_1_booleans(&trip.text);
    assert!(
        misread.is_empty(),
        "STORE BUG: strings written unquoted that YAML 1.1 (kubectl) reads as booleans: \
         {misread:?}\n{}",
        trip.text
    );
}

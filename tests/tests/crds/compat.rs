//! Our CRDs against upstream Cilium's: [`weft_tests::crds::compat`] finds nothing, and it does
//! find a renamed field, a retyped field, a changed format and changed names.

use serde_json::{Value, json};
use weft_tests::crds::compat::crd_mismatches;

use super::{generated, generated_crd, upstream_crd};

/// Property paths weft models that the upstream fixtures predate (SOURCE.md: "The newest
/// upstream CiliumNode/CiliumPodIPPool also carry `allowFirstIP`/`allowLastIP`, which these
/// copies predate"), per CRD file; everything below an entry is covered too.
const NEWER_THAN_FIXTURE: &[(&str, &[&str])] = &[
    (
        "ciliumnodes.yaml",
        &[
            // Multi-pool first/last-address flags, copied from the pool by the operator.
            ".spec.ipam.pools.allocated[].allowFirstIP",
            ".spec.ipam.pools.allocated[].allowLastIP",
            // B's ENI IPv6 prefix delegation (spec §1.5).
            ".status.eni.enis{}.ipv6-prefixes",
            // B's Azure interface primary address and subnet (spec §1.6).
            ".status.azure.interfaces[].ip",
            ".status.azure.interfaces[].subnet",
        ],
    ),
    (
        "ciliumpodippools.yaml",
        &[
            // Spec §1.8: B only.
            ".spec.allowFirstIP",
            ".spec.allowLastIP",
            // Spec §1.8: pool selection by pod and namespace labels.
            ".spec.podSelector",
            ".spec.namespaceSelector",
        ],
    ),
];

fn newer(file_name: &str) -> &'static [&'static str] {
    NEWER_THAN_FIXTURE
        .iter()
        .find(|(name, _)| *name == file_name)
        .map_or(&[], |(_, paths)| paths)
}

/// Our CRD as the fixture's upstream version would have it: the fixture's CiliumPodIPPool
/// predates the `v2` version (spec §1.8: newer upstream defines it, not served), which weft
/// serves and stores so that `reservedRanges` are kept; v2alpha1 is compared as upstream's.
fn without_newer_versions(file_name: &str, crd: &Value) -> Value {
    let mut crd = crd.clone();
    if file_name == "ciliumpodippools.yaml" {
        let versions = crd["spec"]["versions"]
            .as_array_mut()
            .expect("CRD has versions");
        versions.retain(|v| v["name"] != "v2");
        versions[0]["storage"] = json!(true);
    }
    crd
}

#[test]
fn generated_crds_are_compatible_with_upstream() {
    let mut report = Vec::new();
    for crd in generated() {
        let upstream = upstream_crd(&crd.file_name);
        let ours = without_newer_versions(&crd.file_name, &crd.document);
        let mismatches = crd_mismatches(&ours, &upstream, newer(&crd.file_name));
        report.extend(mismatches.iter().map(|m| format!("{}: {m}", crd.file_name)));
    }
    assert!(
        report.is_empty(),
        "generated CRDs differ from upstream Cilium's:\n{}",
        report.join("\n")
    );
}

/// The property schema at `path` (`.spec.ipam`) of the first version of a CRD document.
fn property<'a>(crd: &'a mut Value, path: &str) -> &'a mut Value {
    let mut node = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    for name in path.split('.').skip(1) {
        node = &mut node["properties"][name];
    }
    node
}

#[test]
fn compat_check_reports_what_upstream_would_reject() {
    let upstream = upstream_crd("ciliumnodes.yaml");
    let newer = newer("ciliumnodes.yaml");
    let mut crd = generated_crd("CiliumNode").document;
    assert_eq!(crd_mismatches(&crd, &upstream, newer), Vec::<String>::new());

    // A serde rename gone wrong: `pools` written as `ipPools`.
    let pools = property(&mut crd, ".spec.ipam")["properties"]
        .as_object_mut()
        .expect("spec.ipam has properties")
        .remove("pools")
        .expect("spec.ipam.pools");
    property(&mut crd, ".spec.ipam")["properties"]["ipPools"] = pools;
    // A Rust type that serializes differently: nodeidentity as a string.
    property(&mut crd, ".spec.nodeidentity")["type"] = json!("string");
    // A CIDR list declared as IP addresses.
    property(&mut crd, ".spec.ipam.pools.allocated")["items"]["properties"]["cidrs"]["items"]["format"] =
        json!("ip");
    // Names kubectl users rely on.
    crd["spec"]["names"]["shortNames"] = json!(["cn"]);
    crd["spec"]["versions"][0]["subresources"] = json!({});

    let mismatches = crd_mismatches(&crd, &upstream, newer);
    println!("{}", mismatches.join("\n"));
    for want in [
        "spec.names: ours",
        "v2: subresources: ours {}, upstream {\"status\":{}}",
        "v2: .spec.ipam.ipPools: not in the upstream schema",
        "v2: .spec.ipam.ipPools.requested[].pool: not in the upstream schema",
        "v2: .spec.nodeidentity: type Some(\"string\"), upstream Some(\"integer\")",
        "v2: .spec.ipam.pools.allocated[].cidrs[]: format \"ip\", upstream \"cidr\"",
    ] {
        assert!(
            mismatches.iter().any(|m| m.starts_with(want)),
            "the compat check missed {want:?}; it reported:\n{}",
            mismatches.join("\n")
        );
    }
    // The renamed field's allow-list entries now name a path ours lacks.
    assert!(
        mismatches
            .iter()
            .any(|m| m.contains(".spec.ipam.pools.allocated[].allowFirstIP: listed as newer")),
        "stale allow-list entries are not reported: {mismatches:#?}"
    );
}

#[test]
fn compat_check_compares_versions() {
    let upstream = upstream_crd("ciliumnodeconfigs.yaml");
    let mut crd = generated_crd("CiliumNodeConfig").document;
    assert_eq!(crd_mismatches(&crd, &upstream, &[]), Vec::<String>::new());
    let versions = crd["spec"]["versions"].as_array_mut().expect("versions");
    versions[1]["storage"] = json!(true);
    crd["spec"]["scope"] = json!("Cluster");
    let mismatches = crd_mismatches(&crd, &upstream, &[]);
    assert_eq!(
        mismatches,
        [
            "spec.scope: ours \"Cluster\", upstream \"Namespaced\"",
            "v2alpha1: storage: ours true, upstream false",
        ]
    );
    let mut crd = generated_crd("CiliumNodeConfig").document;
    crd["spec"]["versions"]
        .as_array_mut()
        .expect("versions")
        .pop();
    assert_eq!(
        crd_mismatches(&crd, &upstream, &[]),
        ["versions: ours [\"v2\"], upstream [\"v2\", \"v2alpha1\"]"]
    );
}

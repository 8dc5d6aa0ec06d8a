use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;
use crate::{
    crd::{
        meta::{Namespace, Pod},
        pool::CiliumPodIPPool,
    },
    ipam::{
        Family::{V4, V6},
        mode::IpamMode,
    },
};

#[derive(Default)]
struct Objects {
    pods: BTreeMap<(String, String), Pod>,
    namespaces: BTreeMap<String, Namespace>,
}

impl ObjectLookup for Objects {
    fn pod(&self, namespace: &str, name: &str) -> Option<Labelled<'_>> {
        self.pods
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|pod| Labelled::from(&pod.metadata))
    }

    fn namespace(&self, name: &str) -> Option<Labelled<'_>> {
        self.namespaces
            .get(name)
            .map(|namespace| Labelled::from(&namespace.metadata))
    }
}

fn namespace(name: &str, labels: Value, annotations: Value) -> Namespace {
    let mut doc = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    doc["metadata"]["labels"] = labels;
    doc["metadata"]["annotations"] = annotations;
    serde_json::from_value(doc).expect("namespace")
}

fn pod(namespace: &str, name: &str, labels: Value, annotations: Value) -> Pod {
    let mut doc = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace}, "spec": {"nodeName": "node-a"}});
    doc["metadata"]["labels"] = labels;
    doc["metadata"]["annotations"] = annotations;
    serde_json::from_value(doc).expect("pod")
}

fn namespaces() -> Vec<Namespace> {
    vec![
        namespace("default", json!({}), json!({})),
        namespace(
            "annotated",
            json!({}),
            json!({IP_POOL_ANNOTATION: "ns-pool"}),
        ),
        namespace(
            "annotated-v4",
            json!({}),
            json!({IPV4_POOL_ANNOTATION: "ns-v4", IP_POOL_ANNOTATION: "ns-any"}),
        ),
        namespace("green-ns", json!({"team": "green"}), json!({})),
        namespace(
            "strict",
            json!({}),
            json!({REQUIRE_POOL_MATCH_ANNOTATION: "true"}),
        ),
        namespace("pinned-ns", json!({}), json!({})),
    ]
}

fn pods() -> Vec<Pod> {
    let none = || json!({});
    let annotated = |key: &str, value: &str| json!({ key: value });
    vec![
        pod("default", "plain", none(), none()),
        pod(
            "default",
            "annotated-pod",
            none(),
            json!({IPV4_POOL_ANNOTATION: "p4", IPV6_POOL_ANNOTATION: "p6"}),
        ),
        pod(
            "default",
            "ip-pool-pod",
            none(),
            annotated(IP_POOL_ANNOTATION, "any"),
        ),
        pod(
            "default",
            "empty-annot",
            none(),
            json!({IPV4_POOL_ANNOTATION: "", IP_POOL_ANNOTATION: "fallback"}),
        ),
        pod("default", "blue", json!({"color": "blue"}), none()),
        pod("default", "dup", json!({"dup": "yes"}), none()),
        pod("default", "six", none(), none()),
        pod(
            "default",
            "strict-pod",
            none(),
            annotated(REQUIRE_POOL_MATCH_ANNOTATION, "true"),
        ),
        pod(
            "default",
            "not-strict",
            none(),
            annotated(REQUIRE_POOL_MATCH_ANNOTATION, "True"),
        ),
        pod(
            "default",
            "spoof",
            json!({POD_NAMESPACE_LABEL: "pinned-ns"}),
            none(),
        ),
        pod("annotated", "plain", none(), none()),
        pod(
            "annotated",
            "pod-annotated",
            none(),
            annotated(IP_POOL_ANNOTATION, "pod-wins"),
        ),
        pod("annotated-v4", "plain", none(), none()),
        pod("green-ns", "plain", none(), none()),
        pod("green-ns", "both-pod", json!({"app": "both"}), none()),
        pod("strict", "plain", none(), none()),
        pod(
            "strict",
            "strict-pod",
            none(),
            annotated(REQUIRE_POOL_MATCH_ANNOTATION, "true"),
        ),
        pod("strict", "blue", json!({"color": "blue"}), none()),
        pod("pinned-ns", "x", none(), none()),
        pod("ghost-ns", "plain", none(), none()),
        pod(
            "ghost-ns",
            "annotated",
            none(),
            annotated(IP_POOL_ANNOTATION, "early"),
        ),
    ]
}

fn objects() -> Objects {
    Objects {
        pods: pods()
            .into_iter()
            .map(|p| ((p.metadata.namespace.clone(), p.metadata.name.clone()), p))
            .collect(),
        namespaces: namespaces()
            .into_iter()
            .map(|n| (n.metadata.name.clone(), n))
            .collect(),
    }
}

fn pool(name: &str, families: &str, pod: Option<Value>, namespace: Option<Value>) -> PoolInput {
    let mut spec = json!({});
    if families.contains('4') {
        spec["ipv4"] = json!({"cidrs": ["10.0.0.0/16"], "maskSize": 24});
    }
    if families.contains('6') {
        spec["ipv6"] = json!({"cidrs": ["fd00::/104"], "maskSize": 120});
    }
    if let Some(pod) = pod {
        spec["podSelector"] = pod;
    }
    if let Some(namespace) = namespace {
        spec["namespaceSelector"] = namespace;
    }
    let pool: CiliumPodIPPool = serde_json::from_value(
        json!({"apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
        "metadata": {"name": name}, "spec": spec}),
    )
    .expect("pool");
    PoolInput::from(&pool)
}

fn labels(pairs: Value) -> Value {
    let mut selector = json!({});
    selector["matchLabels"] = pairs;
    selector
}

fn pools() -> Vec<PoolInput> {
    // Deliberately unsorted: selection orders by name.
    vec![
        pool("green", "4", None, Some(labels(json!({"team": "green"})))),
        pool("blue", "46", Some(labels(json!({"color": "blue"}))), None),
        pool(
            "both",
            "4",
            Some(labels(json!({"app": "both"}))),
            Some(labels(json!({"team": "green"}))),
        ),
        pool("no-selectors", "46", None, None),
        pool(
            "bad",
            "46",
            Some(json!({"matchLabels": {"color": "blue"},
                "matchExpressions": [{"key": "k", "operator": "Bogus"}]})),
            None,
        ),
        pool(
            "bad-ns",
            "46",
            Some(labels(json!({"color": "blue"}))),
            Some(json!({"matchExpressions": [{"key": "k", "operator": "In"}]})),
        ),
        pool("dup-b", "4", Some(labels(json!({"dup": "yes"}))), None),
        pool("dup-a", "4", Some(labels(json!({"dup": "yes"}))), None),
        pool(
            "six",
            "6",
            Some(labels(json!({POD_NAME_LABEL: "six"}))),
            None,
        ),
        pool(
            "pinned",
            "4",
            Some(labels(json!({POD_NAMESPACE_LABEL: "pinned-ns"}))),
            None,
        ),
        pool(
            "no-family",
            "",
            Some(labels(json!({"color": "blue"}))),
            None,
        ),
    ]
}

type Want = Result<(&'static str, Rule), &'static str>;

fn check(owner: &str, family: Family, ctx: &SelectionContext<'_>, want: &Want) {
    let got = pool_for_pod(owner, family, ctx);
    match (want, got) {
        (Ok((pool, rule)), Ok(choice)) => {
            assert_eq!(
                (choice.pool.as_str(), &choice.rule),
                (*pool, rule),
                "{owner} {family}"
            );
        }
        (Err(text), Err(err)) => assert_eq!(err.to_string(), *text, "{owner} {family}"),
        (want, got) => panic!("{owner} {family}: want {want:?}, got {got:?}"),
    }
}

fn run(cases: &[(&str, Family, Want)]) {
    let objects = objects();
    let pools = pools();
    let ctx = SelectionContext {
        ipam_mode: MULTI_POOL_MODE,
        pools_synced: true,
        default_pool: "default",
        objects: &objects,
        pools: &pools,
    };
    for (owner, family, want) in cases {
        check(owner, *family, &ctx, want);
    }
}

fn pod_key(key: &'static str) -> Rule {
    Rule::PodAnnotation { key }
}

fn ns_key(key: &'static str) -> Rule {
    Rule::NamespaceAnnotation { key }
}

fn by_selector(pool: &str) -> Rule {
    Rule::Selector {
        pool: pool.to_owned(),
    }
}

#[test]
fn owners_that_are_not_pods_and_missing_objects() {
    let not_pod = Ok(("default", Rule::NotAPodOwner));
    run(&[
        ("router", V4, not_pod.clone()),
        ("health", V6, not_pod.clone()),
        ("default/xwing_net2", V4, not_pod.clone()),
        ("Default/plain", V4, not_pod.clone()),
        ("default/a/b", V4, not_pod.clone()),
        ("/plain", V4, not_pod.clone()),
        ("default/", V4, not_pod),
        (
            "default/ghost",
            V4,
            Err("resource Pod \"default/ghost\" not found"),
        ),
        (
            "ghost-ns/plain",
            V4,
            Err("resource Namespace \"ghost-ns\" not found"),
        ),
        // The pod's annotation decides before the namespace is looked up.
        (
            "ghost-ns/annotated",
            V4,
            Ok(("early", pod_key(IP_POOL_ANNOTATION))),
        ),
    ]);
}

#[test]
fn annotations_pod_then_namespace() {
    run(&[
        (
            "default/annotated-pod",
            V4,
            Ok(("p4", pod_key(IPV4_POOL_ANNOTATION))),
        ),
        (
            "default/annotated-pod",
            V6,
            Ok(("p6", pod_key(IPV6_POOL_ANNOTATION))),
        ),
        (
            "default/ip-pool-pod",
            V4,
            Ok(("any", pod_key(IP_POOL_ANNOTATION))),
        ),
        (
            "default/ip-pool-pod",
            V6,
            Ok(("any", pod_key(IP_POOL_ANNOTATION))),
        ),
        (
            "default/empty-annot",
            V4,
            Ok(("fallback", pod_key(IP_POOL_ANNOTATION))),
        ),
        (
            "annotated/plain",
            V4,
            Ok(("ns-pool", ns_key(IP_POOL_ANNOTATION))),
        ),
        (
            "annotated/pod-annotated",
            V6,
            Ok(("pod-wins", pod_key(IP_POOL_ANNOTATION))),
        ),
        (
            "annotated-v4/plain",
            V4,
            Ok(("ns-v4", ns_key(IPV4_POOL_ANNOTATION))),
        ),
        (
            "annotated-v4/plain",
            V6,
            Ok(("ns-any", ns_key(IP_POOL_ANNOTATION))),
        ),
    ]);
}

#[test]
fn selectors() {
    run(&[
        ("default/blue", V4, Ok(("blue", by_selector("blue")))),
        ("default/blue", V6, Ok(("blue", by_selector("blue")))),
        ("green-ns/plain", V4, Ok(("green", by_selector("green")))),
        ("green-ns/plain", V6, Ok(("default", Rule::NoMatch))),
        ("default/plain", V4, Ok(("default", Rule::NoMatch))),
        ("default/six", V6, Ok(("six", by_selector("six")))),
        ("default/six", V4, Ok(("default", Rule::NoMatch))),
        ("pinned-ns/x", V4, Ok(("pinned", by_selector("pinned")))),
        // The synthetic labels override a pod's own label of the same key.
        ("default/spoof", V4, Ok(("default", Rule::NoMatch))),
    ]);
}

#[test]
fn multiple_matches_and_required_match() {
    run(&[
        (
            "green-ns/both-pod",
            V4,
            Err(
                "multiple CiliumPodIPPools match pod green-ns/both-pod (family=ipv4): [both green]",
            ),
        ),
        (
            "default/dup",
            V4,
            Err("multiple CiliumPodIPPools match pod default/dup (family=ipv4): [dup-a dup-b]"),
        ),
        (
            "strict/plain",
            V4,
            Err(
                "no matching CiliumPodIPPool found for pod strict/plain (family=ipv4) and \
                 require-pool-match annotation is set on namespace",
            ),
        ),
        (
            "default/strict-pod",
            V6,
            Err(
                "no matching CiliumPodIPPool found for pod default/strict-pod (family=ipv6) and \
                 require-pool-match annotation is set on pod",
            ),
        ),
        (
            "strict/strict-pod",
            V4,
            Err(
                "no matching CiliumPodIPPool found for pod strict/strict-pod (family=ipv4) and \
                 require-pool-match annotation is set on pod",
            ),
        ),
        ("strict/blue", V4, Ok(("blue", by_selector("blue")))),
        ("default/not-strict", V4, Ok(("default", Rule::NoMatch))),
    ]);
}

#[test]
fn mode_sync_and_default_pool() {
    let objects = objects();
    let pools = pools();
    let ctx = |mode, synced, default_pool| SelectionContext {
        ipam_mode: mode,
        pools_synced: synced,
        default_pool,
        objects: &objects,
        pools: &pools,
    };
    let not_synced = Err("ipam-metadata-manager has not synced all pod IP pools yet");
    // Production hands selection the parsed mode's canonical name (`IpamMode::as_str`), and
    // the configured value is parsed case-insensitively: unlike Cilium, which compares the
    // raw string, weft treats `Multi-Pool` as multi-pool.
    let parsed = |value: &str| value.parse::<IpamMode>().expect(value).as_str();
    for mode in ["crd", "cluster-pool", "eni", "Cluster-Pool", "kubernetes"] {
        for synced in [true, false] {
            check(
                "default/blue",
                V4,
                &ctx(parsed(mode), synced, "dflt"),
                &Ok(("dflt", Rule::NotMultiPool)),
            );
        }
    }
    for mode in ["multi-pool", "Multi-Pool", "MULTI-POOL"] {
        check(
            "default/blue",
            V4,
            &ctx(parsed(mode), false, "dflt"),
            &not_synced,
        );
        check(
            "default/plain",
            V4,
            &ctx(parsed(mode), true, "dflt"),
            &Ok(("dflt", Rule::NoMatch)),
        );
    }
    check(
        "default/blue",
        V4,
        &ctx(MULTI_POOL_MODE, false, "default"),
        &not_synced,
    );
    check(
        "router",
        V4,
        &ctx(MULTI_POOL_MODE, false, "default"),
        &not_synced,
    );
    check(
        "default/plain",
        V4,
        &ctx(MULTI_POOL_MODE, true, "dc1-pool"),
        &Ok(("dc1-pool", Rule::NoMatch)),
    );
    check(
        "router",
        V6,
        &ctx(MULTI_POOL_MODE, true, "dc1-pool"),
        &Ok(("dc1-pool", Rule::NotAPodOwner)),
    );
}

#[test]
fn rules_explain_themselves() {
    let cases = [
        (
            Rule::NotMultiPool,
            "default pool (IPAM mode is not multi-pool)",
        ),
        (Rule::NotAPodOwner, "default pool (owner is not a pod)"),
        (
            Rule::PodAnnotation {
                key: IPV4_POOL_ANNOTATION,
            },
            "pod annotation ipam.cilium.io/ipv4-pool",
        ),
        (
            Rule::NamespaceAnnotation {
                key: IP_POOL_ANNOTATION,
            },
            "namespace annotation ipam.cilium.io/ip-pool",
        ),
        (
            Rule::Selector {
                pool: "mars".into(),
            },
            "selector of CiliumPodIPPool mars",
        ),
        (Rule::NoMatch, "default pool (no match)"),
    ];
    for (rule, text) in cases {
        assert_eq!(rule.to_string(), text);
    }
}

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

fn selector(doc: serde_json::Value) -> LabelSelector {
    serde_json::from_value(doc).expect("selector decodes")
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn matching_table() {
    let cases = [
        (json!({}), &[][..], true),
        (json!({}), &[("a", "1")][..], true),
        (
            json!({"matchLabels": {"app": "web"}}),
            &[("app", "web")][..],
            true,
        ),
        (
            json!({"matchLabels": {"app": "web"}}),
            &[("app", "db")][..],
            false,
        ),
        (json!({"matchLabels": {"app": "web"}}), &[][..], false),
        (
            json!({"matchLabels": {"app": "web", "tier": "a"}}),
            &[("app", "web")][..],
            false,
        ),
        (in_expr("In", &["a", "b"]), &[("k", "b")][..], true),
        (in_expr("In", &["a", "b"]), &[("k", "c")][..], false),
        (in_expr("In", &["a"]), &[][..], false),
        (in_expr("NotIn", &["a"]), &[("k", "b")][..], true),
        (in_expr("NotIn", &["a"]), &[("k", "a")][..], false),
        (in_expr("NotIn", &["a"]), &[][..], true),
        (in_expr("Exists", &[]), &[("k", "")][..], true),
        (in_expr("Exists", &[]), &[][..], false),
        (in_expr("DoesNotExist", &[]), &[][..], true),
        (in_expr("DoesNotExist", &[]), &[("k", "x")][..], false),
        (
            json!({"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "k", "operator": "Exists"}]}),
            &[("app", "web")][..],
            false,
        ),
        (
            json!({"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "k", "operator": "Exists"}]}),
            &[("app", "web"), ("k", "1")][..],
            true,
        ),
    ];
    for (doc, set, want) in cases {
        let compiled = compile(&selector(doc.clone())).expect("compiles");
        assert_eq!(compiled.matches(&labels(set)), want, "{doc} vs {set:?}");
    }
}

fn in_expr(operator: &str, values: &[&str]) -> serde_json::Value {
    if values.is_empty() {
        json!({"matchExpressions": [{"key": "k", "operator": operator}]})
    } else {
        json!({"matchExpressions": [{"key": "k", "operator": operator, "values": values}]})
    }
}

#[test]
fn compile_errors() {
    let cases = [
        (
            in_expr("Equals", &["a"]),
            "\"Equals\" is not a valid label selector operator",
        ),
        (
            in_expr("in", &["a"]),
            "\"in\" is not a valid label selector operator",
        ),
        (
            in_expr("In", &[]),
            "key \"k\": for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            in_expr("NotIn", &[]),
            "key \"k\": for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            in_expr("Exists", &["a"]),
            "key \"k\": values set must be empty for exists and does not exist",
        ),
        (
            in_expr("DoesNotExist", &["a"]),
            "key \"k\": values set must be empty for exists and does not exist",
        ),
    ];
    for (doc, want) in cases {
        let err = compile(&selector(doc.clone())).expect_err("must not compile");
        assert_eq!(err.to_string(), want, "{doc}");
    }
}

#[test]
fn keys_and_values_are_validated() {
    let bad_keys = [
        "",
        "/a",
        "a/",
        "a/b/c",
        "Example.com/a",
        "-a",
        "a-",
        &"x".repeat(64),
    ];
    for key in bad_keys {
        let doc = json!({"matchExpressions": [{"key": key, "operator": "Exists"}]});
        assert!(
            matches!(compile(&selector(doc)), Err(LabelsError::InvalidKey { .. })),
            "{key:?}"
        );
    }
    let good_keys = [
        "a",
        "app.kubernetes.io/name",
        "io.kubernetes.pod.namespace",
        "A_b.c-D",
    ];
    for key in good_keys {
        let doc = json!({"matchExpressions": [{"key": key, "operator": "Exists"}]});
        assert!(compile(&selector(doc)).is_ok(), "{key:?}");
    }
    for value in ["a b", "-a", "a/b", &"v".repeat(64)] {
        let doc = json!({"matchLabels": {"k": value}});
        assert!(
            matches!(
                compile(&selector(doc)),
                Err(LabelsError::InvalidValue { .. })
            ),
            "{value:?}"
        );
    }
    assert!(compile(&selector(json!({"matchLabels": {"k": ""}}))).is_ok());
}

#[test]
fn dns1123_subdomain() {
    for ok in ["default", "kube-system", "a.b-c.d", "0abc", "x"] {
        assert!(is_dns1123_subdomain(ok), "{ok}");
    }
    let too_long = "a".repeat(254);
    for bad in [
        "",
        "Default",
        "xwing_net2",
        "a..b",
        ".a",
        "a.",
        "-a",
        "a-",
        &too_long,
    ] {
        assert!(!is_dns1123_subdomain(bad), "{bad}");
    }
    assert!(is_dns1123_subdomain(&"a".repeat(253)));
}

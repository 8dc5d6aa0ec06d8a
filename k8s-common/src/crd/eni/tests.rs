use serde_json::json;

use super::*;

fn status(enis: &serde_json::Value) -> EniStatus {
    serde_json::from_value(json!({ "enis": enis })).expect("status decodes")
}

fn spec(doc: serde_json::Value) -> EniSpec {
    serde_json::from_value(doc).expect("spec decodes")
}

fn cidrs(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|c| c.parse().expect("cidr")).collect()
}

#[test]
fn exclusion_by_spec() {
    let eni = |number: i64, tags: serde_json::Value| -> Eni {
        serde_json::from_value(json!({"id": "e", "number": number, "tags": tags})).expect("eni")
    };
    let cases = [
        (json!({}), eni(0, json!({})), false),
        (json!({"first-interface-index": 1}), eni(0, json!({})), true),
        (
            json!({"first-interface-index": 1}),
            eni(1, json!({})),
            false,
        ),
        (
            json!({"first-interface-index": 0}),
            eni(0, json!({})),
            false,
        ),
        (
            json!({"exclude-interface-tags": {"a": "1"}}),
            eni(3, json!({"a": "1"})),
            true,
        ),
        (
            json!({"exclude-interface-tags": {"a": "1"}}),
            eni(3, json!({"a": "2"})),
            false,
        ),
        (
            json!({"exclude-interface-tags": {"a": "1", "b": "2"}}),
            eni(3, json!({"a": "1"})),
            false,
        ),
        (
            json!({"exclude-interface-tags": {"a": "1"}}),
            eni(3, json!({})),
            false,
        ),
        // Go reads a missing tag as "": an empty required value matches its absence.
        (
            json!({"exclude-interface-tags": {"a": ""}}),
            eni(3, json!({})),
            true,
        ),
    ];
    for (spec_doc, eni, want) in cases {
        assert_eq!(
            eni.is_excluded_by_spec(&spec(spec_doc.clone())),
            want,
            "{spec_doc} {eni:?}"
        );
    }
}

#[test]
fn accessor_collects_prefixes_and_uncovered_addresses() {
    let status = status(&json!({
        "eni-b": {"id": "eni-b", "number": 1,
            "addresses": ["10.0.2.16", "10.0.2.17", "10.0.2.40"],
            "prefixes": ["10.0.2.16/28"],
            "ipv6-prefixes": ["2600::/80"]},
        "eni-a": {"id": "eni-a", "number": 0, "addresses": ["10.0.1.5", "fd00::5"]},
        "eni-c": {"id": "eni-c", "number": 2, "addresses": ["10.0.2.18"],
            "tags": {"no-pods": "yes"}}
    }));
    let got = eni_allocated(
        Some(&spec(json!({"exclude-interface-tags": {"no-pods": "yes"}}))),
        Some(&status),
    )
    .expect("something collected");
    assert_eq!(got.pool, "default");
    assert!(got.allow_first_ip && got.allow_last_ip);
    // eni-a first (id order); eni-b's prefix as-is, then its uncovered address; eni-c excluded.
    // Prefixes only cover addresses of their own ENI.
    assert_eq!(
        got.cidrs,
        cidrs(&["10.0.1.5/32", "fd00::5/128", "10.0.2.16/28", "10.0.2.40/32"])
    );
    assert_eq!(
        serde_json::to_value(&got).expect("encodes"),
        json!({"pool": "default", "allowFirstIP": true, "allowLastIP": true,
            "cidrs": ["10.0.1.5/32", "fd00::5/128", "10.0.2.16/28", "10.0.2.40/32"]})
    );
}

#[test]
fn prefixes_of_other_enis_do_not_cover() {
    let status = status(&json!({
        "eni-a": {"prefixes": ["10.0.2.16/28"]},
        "eni-b": {"number": 1, "addresses": ["10.0.2.17"]}
    }));
    let got = eni_allocated(None, Some(&status)).expect("collected");
    assert_eq!(got.cidrs, cidrs(&["10.0.2.16/28", "10.0.2.17/32"]));
}

#[test]
fn accessor_returns_none_when_nothing_collected() {
    assert_eq!(eni_allocated(None, None), None);
    assert_eq!(eni_allocated(None, Some(&EniStatus::default())), None);
    let only_excluded = status(&json!({"eni-0": {"addresses": ["10.0.0.5"]}}));
    let first_one = spec(json!({"first-interface-index": 1}));
    assert_eq!(eni_allocated(Some(&first_one), Some(&only_excluded)), None);
    let empty = status(&json!({"eni-1": {"id": "eni-1", "number": 1}}));
    assert_eq!(eni_allocated(None, Some(&empty)), None);
}

#[test]
fn prefix_host_bits_are_kept() {
    let status =
        status(&json!({"eni-a": {"prefixes": ["10.0.2.17/28"], "addresses": ["10.0.2.18"]}}));
    let got = eni_allocated(None, Some(&status)).expect("collected");
    assert_eq!(got.cidrs, cidrs(&["10.0.2.17/28"]));
}

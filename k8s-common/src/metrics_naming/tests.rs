//! The encoder on a small registry: weft's names in the text format 0.0.4, a rename, a
//! derived (summed) Cilium metric beside weft's, and the exact name of a Cilium counter
//! without `_total`.

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

use super::*;

type PoolFamily = Family<Vec<(String, String)>, Gauge>;

fn registry() -> Registry {
    let mut registry = Registry::with_prefix("weft");
    let used = PoolFamily::default();
    for (pool, family, n) in [("a", "ipv4", 2), ("b", "ipv4", 3), ("a", "ipv6", 1)] {
        used.get_or_create(&vec![
            ("pool".to_owned(), pool.to_owned()),
            ("family".to_owned(), family.to_owned()),
        ])
        .set(n);
    }
    registry.register("pool_used_ips", "Used per pool", used);
    let ops = Counter::<u64>::default();
    ops.inc_by(4);
    registry.register("ops", "Operations", ops);
    let took = Histogram::new([0.5, 1.0]);
    took.observe(0.7);
    registry.register("took_seconds", "Durations", took);
    registry
}

#[expect(clippy::unnecessary_wraps, reason = "the signature of Relabel::Map")]
fn by_family(labels: &[(String, String)]) -> Option<Labels> {
    Some(vec![(
        "family".to_owned(),
        label(labels, "family").to_owned(),
    )])
}

const RULES: &[Rule] = &[
    Rule {
        weft: "weft_pool_used_ips",
        cilium: "cilium_ip_addresses",
        help: "Addresses in use",
        relabel: Relabel::Map(by_family),
    },
    Rule {
        weft: "weft_ops",
        cilium: "cilium_operator_ops",
        help: "Operations (Cilium's name has no _total)",
        relabel: Relabel::Same,
    },
];

#[test]
fn weft_naming_is_the_text_format_with_weft_names() {
    let text = encode(&registry(), Naming::Weft, RULES).expect("encode");
    for line in [
        "# TYPE weft_pool_used_ips gauge",
        r#"weft_pool_used_ips{pool="b",family="ipv4"} 3"#,
        "# HELP weft_ops_total Operations.",
        "# TYPE weft_ops_total counter",
        "weft_ops_total 4",
        "# TYPE weft_took_seconds histogram",
        r#"weft_took_seconds_bucket{le="1.0"} 1"#,
        "weft_took_seconds_count 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing in:\n{text}"
        );
    }
    assert!(!text.contains("# EOF"), "{text}");
    assert!(!text.contains("cilium_"), "{text}");
}

#[test]
fn cilium_naming_renames_derives_and_keeps_the_rest() {
    let text = encode(&registry(), Naming::Cilium, RULES).expect("encode");
    for line in [
        "# HELP cilium_ip_addresses Addresses in use",
        "# TYPE cilium_ip_addresses gauge",
        r#"cilium_ip_addresses{family="ipv4"} 5"#,
        r#"cilium_ip_addresses{family="ipv6"} 1"#,
        // The derived metric keeps weft's beside it.
        r#"weft_pool_used_ips{pool="a",family="ipv4"} 2"#,
        // A rename replaces, with Cilium's exact sample name.
        "# TYPE cilium_operator_ops counter",
        "cilium_operator_ops 4",
        // No rule: weft's name.
        "weft_took_seconds_sum 0.7",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing in:\n{text}"
        );
    }
    assert!(!text.contains("weft_ops"), "{text}");
}

#[test]
fn naming_parses_its_two_values_only() {
    assert_eq!("cilium".parse(), Ok(Naming::Cilium));
    assert_eq!("weft".parse(), Ok(Naming::Weft));
    assert_eq!(
        "prometheus".parse::<Naming>(),
        Err(NamingError("prometheus".to_owned()))
    );
}

#[test]
fn label_values_are_unescaped_and_escaped_again() {
    let labels = parse_labels(r#"a="x\"y",b="1\\2""#);
    assert_eq!(
        labels,
        vec![
            ("a".to_owned(), "x\"y".to_owned()),
            ("b".to_owned(), r"1\2".to_owned())
        ]
    );
}

use std::path::Path;

use super::*;
use crate::config::{KEYS, features::Keys, file};

fn layer(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The data of a Helm-rendered cilium-config (Cilium's chart, default values).
fn helm_default(version: &str) -> BTreeMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/cilium-config")
        .join(format!("{version}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file::parse(&path, &text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .keys
}

fn refused_keys(review: &Review) -> Vec<&str> {
    review.refused.iter().map(|r| r.key.as_str()).collect()
}

#[test]
fn every_key_of_cilium_s_default_helm_config_has_a_verdict() {
    let unknown: Vec<String> = ["1.18", "1.19", "1.20"]
        .iter()
        .flat_map(|version| {
            let config = helm_default(version);
            let review = review([("config file", &config)]);
            review
                .unknown
                .iter()
                .map(|u| format!("{version}: {}", u.key))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(unknown.is_empty(), "keys without a verdict: {unknown:#?}");
    for version in ["1.18", "1.19", "1.20"] {
        let config = helm_default(version);
        assert!(config.len() > 100, "{version}: {} keys", config.len());
        let review = review([("config file", &config)]);
        // Cilium's defaults enforce NetworkPolicy, which weft does not; their tunnel it runs.
        assert_eq!(
            refused_keys(&review),
            ["enable-k8s-networkpolicy", "enable-policy"],
            "{version}"
        );
    }
}

#[test]
fn a_default_helm_config_with_native_routing_and_no_policy_starts() {
    for version in ["1.18", "1.19", "1.20"] {
        let mut config = helm_default(version);
        for (key, value) in [
            ("routing-mode", "native"),
            ("auto-direct-node-routes", "true"),
            ("enable-policy", "never"),
        ] {
            config.insert(key.to_owned(), value.to_owned());
        }
        let review = review([("config file", &config)]);
        assert_eq!(refused_keys(&review), Vec::<&str>::new(), "{version}");
        assert!(review.clone().enforce(false).is_ok(), "{version}");
        assert!(
            !review.ignored.is_empty(),
            "{version}: Hubble and the like are ignored"
        );
    }
}

#[test]
fn a_refusal_names_key_value_source_breakage_and_way_out() {
    let config = layer(&[("tunnel", "vxlan"), ("tunnel-protocol", "vxlan")]);
    let error = review([("config file", &config)])
        .enforce(false)
        .unwrap_err();
    let text = error.to_string();
    for part in [
        "tunnel: \"vxlan\" (config file)",
        "pods on different nodes may not reach each other",
        "set routing-mode: tunnel",
        ALLOW_FLAG,
    ] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
    assert!(!text.contains("tunnel-protocol"), "{text}");
}

#[test]
fn allow_turns_refusals_into_warnings() {
    let config = layer(&[
        ("enable-wireguard", "true"),
        ("kube-proxy-replacement", "true"),
    ]);
    let review = review([("CiliumNodeConfig", &config)]);
    assert_eq!(
        refused_keys(&review),
        ["enable-wireguard", "kube-proxy-replacement"]
    );
    assert!(review.enforce(true).is_ok());
}

#[test]
fn values_weft_matches_pass_whatever_their_spelling() {
    for (key, value) in [
        ("routing-mode", "Native"),
        ("enable-wireguard", "False"),
        ("enable-wireguard", "0"),
        ("kube-proxy-replacement", "disabled"),
        ("cluster-id", "0"),
        ("cluster-id", ""),
        ("identity-allocation-mode", "crd"),
        ("kube-proxy-replacement", "partial"),
        ("cni-chaining-mode", "none"),
    ] {
        let config = layer(&[(key, value)]);
        assert_eq!(
            review([("config file", &config)]).refused,
            [],
            "{key}: {value:?}"
        );
    }
    for (key, value) in [
        ("enable-policy", ""),
        ("enable-host-port", "true"),
        ("cni-chaining-mode", "aws-cni"),
        ("kube-proxy-replacement", "strict"),
        ("enable-wireguard", "1"),
        ("cluster-id", "3"),
        ("identity-allocation-mode", "kvstore"),
        ("enable-policy", "default"),
        ("enable-policy", "always"),
    ] {
        let config = layer(&[(key, value)]);
        assert_eq!(
            refused_keys(&review([("config file", &config)])),
            [key],
            "{key}: {value:?}"
        );
    }
}

#[test]
fn a_ciliumnodeconfig_overrides_the_file_before_the_guard_judges() {
    let file = layer(&[
        ("kube-proxy-replacement", "true"),
        ("enable-wireguard", "true"),
    ]);
    let node = layer(&[("kube-proxy-replacement", "false")]);
    let fixed = review([("config file", &file), ("CiliumNodeConfig", &node)]);
    assert_eq!(refused_keys(&fixed), ["enable-wireguard"]);
    let file = layer(&[("kube-proxy-replacement", "false")]);
    let node = layer(&[("kube-proxy-replacement", "true")]);
    let broken = review([("config file", &file), ("CiliumNodeConfig", &node)]);
    assert_eq!(broken.refused[0].source, "CiliumNodeConfig");
}

#[test]
fn policy_keys_are_moot_when_cilium_would_enforce_no_policy_either() {
    let config = layer(&[
        ("enable-policy", "never"),
        ("enable-k8s-networkpolicy", "true"),
        ("enable-cilium-network-policy", "true"),
    ]);
    assert_eq!(review([("config file", &config)]).refused, []);
    let config = layer(&[
        ("enable-policy", "default"),
        ("enable-k8s-networkpolicy", "true"),
    ]);
    assert_eq!(
        refused_keys(&review([("config file", &config)])),
        ["enable-k8s-networkpolicy", "enable-policy"]
    );
}

#[test]
fn keys_are_honoured_ignored_refused_or_unknown() {
    let config = layer(&[
        ("ipam", "multi-pool"),
        ("hubble-listen-address", ":4244"),
        ("bpf-lb-sock", "false"),
        ("ipam-default-ip-poool", "mars"),
        ("weft-made-up", "1"),
    ]);
    let review = review([("config file", &config)]);
    let ignored: Vec<&str> = review.ignored.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(ignored, ["bpf-lb-sock", "hubble-listen-address"]);
    let unknown: Vec<String> = review.unknown.iter().map(ToString::to_string).collect();
    assert_eq!(
        unknown,
        [
            "ipam-default-ip-poool (config file; did you mean ipam-default-ip-pool?)",
            "weft-made-up (config file)"
        ]
    );
    assert!(review.refused.is_empty());
}

#[test]
fn the_table_is_consistent() {
    let mut seen = std::collections::BTreeSet::new();
    for feature in features::all() {
        let label = feature.keys.label();
        assert!(seen.insert(label.clone()), "{label} has two rows");
        if let Keys::Exact(key) = feature.keys {
            assert!(
                !keys::known(key),
                "{key} is read by weft and in the feature table"
            );
        }
        if let Keys::Prefix(prefix) = feature.keys {
            for key in KEYS {
                assert!(
                    !key.starts_with(prefix),
                    "family {prefix}* covers weft's {key}"
                );
            }
        }
        match feature.rule {
            Rule::Ignored(why) => assert!(!why.is_empty(), "{label}"),
            Rule::RefusedUnless {
                accepted,
                breaks,
                way_out,
                ..
            } => assert!(
                !accepted.is_empty() && !breaks.is_empty() && !way_out.is_empty(),
                "{label}"
            ),
        }
    }
}

#[test]
fn an_exact_row_wins_over_its_family() {
    assert!(matches!(
        feature("enable-bgp-control-plane").map(|f| f.rule),
        Some(Rule::RefusedUnless { .. })
    ));
    assert!(matches!(
        feature("enable-bgp-control-plane-status-report").map(|f| f.rule),
        Some(Rule::Ignored(_))
    ));
}

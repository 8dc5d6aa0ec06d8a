use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<IpMasqAgentConfig, MasqError> {
    parse_ip_masq_agent(Path::new("/etc/config/ip-masq-agent"), text)
}

#[test]
fn empty_file_means_the_default_list() {
    for text in ["", "  \n\n"] {
        let cfg = parse(text).expect("parses");
        assert_eq!(cfg.non_masquerade_cidrs.len(), DEFAULT_NON_MASQ_CIDRS.len());
        assert!(!cfg.masq_link_local);
    }
    let missing = load_ip_masq_agent(Path::new("/nonexistent/weft/ip-masq-agent")).expect("ok");
    assert_eq!(missing, IpMasqAgentConfig::default());
}

#[test]
fn yaml_and_json_are_read_and_cidrs_masked() {
    let yaml = "nonMasqueradeCIDRs:\n  - 64.255.255.255/8\n  - fd00::/8\nmasqLinkLocal: true\n";
    let cfg = parse(yaml).expect("yaml");
    assert_eq!(
        cfg.non_masquerade_cidrs,
        ["64.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()]
    );
    assert!(cfg.masq_link_local && !cfg.masq_link_local_ipv6);
    let json = r#"{"nonMasqueradeCIDRs": ["10.0.0.0/8"], "masqLinkLocalIPv6": true}"#;
    let cfg = parse(json).expect("json");
    assert_eq!(cfg.non_masquerade_cidrs, ["10.0.0.0/8".parse().unwrap()]);
    assert!(cfg.masq_link_local_ipv6);
}

#[test]
fn an_explicit_empty_list_gets_no_defaults_but_link_local() {
    let cfg = parse("nonMasqueradeCIDRs: []\n").expect("parses");
    assert!(cfg.non_masquerade_cidrs.is_empty());
    let ex = exclusions(&MasqConfig::default(), Some(&cfg));
    let cidrs: Vec<String> = ex.iter().map(|e| e.cidr.to_string()).collect();
    assert_eq!(cidrs, ["169.254.0.0/16", "fe80::/10"]);
    assert!(
        ex.iter()
            .all(|e| e.pool_id == POOL_ANY && e.flags == MASQ_F_IP_MASQ_AGENT)
    );
}

#[test]
fn invalid_cidr_names_file_and_line() {
    let text =
        "# comment\nnonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 10.300.0.0/16\nmasqLinkLocal: false\n";
    let err = parse(text).expect_err("invalid");
    assert!(
        matches!(&err, MasqError::InvalidCidr { line: 4, value, .. } if value == "10.300.0.0/16"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "/etc/config/ip-masq-agent:4: invalid CIDR \"10.300.0.0/16\" in nonMasqueradeCIDRs"
    );
    let err = parse("nonMasqueradeCIDRs:\n  - 8\n").expect_err("a number is no CIDR");
    assert!(
        matches!(err, MasqError::InvalidCidr { line: 2, .. }),
        "{err:?}"
    );
}

#[test]
fn malformed_yaml_and_unknown_keys_name_the_line() {
    let err = parse("nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n nope: [\n").expect_err("bad yaml");
    assert!(
        matches!(err, MasqError::Parse { line, .. } if line >= 2),
        "{err:?}"
    );
    let err = parse("nonMasqueradeCidrs: []\n").expect_err("misspelt key");
    assert!(err.to_string().contains("ip-masq-agent:1"), "{err}");
}

#[test]
fn native_routing_and_pool_exclusions_are_added() {
    let config = MasqConfig {
        ip_masq_agent_config: None,
        native_routing_cidr_v4: Some("10.77.3.4/16".parse().unwrap()),
        native_routing_cidr_v6: Some("fd00:77::/64".parse().unwrap()),
        pool_exclusions: [(7, vec!["203.0.113.0/24".parse().unwrap()])].into(),
    };
    let ex = exclusions(&config, None);
    assert_eq!(
        ex,
        [
            MasqExclusion {
                pool_id: POOL_ANY,
                cidr: "10.77.0.0/16".parse().unwrap(),
                flags: MASQ_F_NATIVE_ROUTING
            },
            MasqExclusion {
                pool_id: POOL_ANY,
                cidr: "fd00:77::/64".parse().unwrap(),
                flags: MASQ_F_NATIVE_ROUTING
            },
            MasqExclusion {
                pool_id: 7,
                cidr: "203.0.113.0/24".parse().unwrap(),
                flags: MASQ_F_POOL
            },
        ]
    );
}

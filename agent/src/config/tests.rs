//! Tests of resolving layers of keys: precedence, each key's forms, the checks across keys.

use super::*;

fn layer(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn later_layers_win_and_unknown_keys_are_ignored() {
    let file = layer(&[
        ("ipam", "multi-pool"),
        ("enable-ipv6", "true"),
        ("tunnel", "vxlan"),
    ]);
    let node = layer(&[("ipam-default-ip-pool", "dc1")]);
    let flags = layer(&[("enable-ipv6", "false")]);
    let c = AgentConfig::resolve([&file, &node, &flags]).expect("valid");
    assert_eq!(c.ipam.to_string(), "multi-pool");
    assert_eq!(c.default_pool, "dc1");
    assert!(!c.enable_ipv6);
}

#[test]
fn node_seed_keys() {
    let c = AgentConfig::resolve([&layer(&[
        ("auto-create-cilium-node-resource", "false"),
        ("ipam-min-allocate", "10"),
        ("ipam-pre-allocate", ""),
        ("ipam-static-ip-tags", "team=a, env=prod"),
        ("azure-interface-name", "eth1"),
    ])])
    .expect("valid");
    assert!(!c.node_seed.auto_create);
    assert_eq!(c.node_seed.min_allocate, 10);
    assert_eq!(c.node_seed.pre_allocate, 0);
    assert_eq!(c.node_seed.static_ip_tags.len(), 2);
    assert_eq!(c.node_seed.static_ip_tags["env"], "prod");
    assert_eq!(c.node_seed.azure_interface_name, "eth1");
    assert!(AgentConfig::default().node_seed.auto_create);
    let c = AgentConfig::resolve([&layer(&[
        ("eni-subnet-ids", "subnet-a, subnet-b"),
        ("eni-subnet-tags", "tier=pods"),
        ("eni-first-interface-index", "1"),
        ("eni-delete-on-termination", "false"),
    ])])
    .expect("valid");
    assert_eq!(c.node_seed.eni.subnet_ids, ["subnet-a", "subnet-b"]);
    assert_eq!(c.node_seed.eni.subnet_tags["tier"], "pods");
    assert_eq!(c.node_seed.eni.first_interface_index, Some(1));
    assert_eq!(c.node_seed.eni.delete_on_termination, Some(false));
    let e =
        AgentConfig::resolve([&layer(&[("eni-use-primary-address", "sure")])]).expect_err("bad");
    assert!(e.to_string().contains("eni-use-primary-address"), "{e}");
    let e = AgentConfig::resolve([&layer(&[("ipam-static-ip-tags", "oops")])]).expect_err("bad");
    assert!(e.to_string().contains("key=value"), "{e}");
    let e = AgentConfig::resolve([&layer(&[("ipam-max-allocate", "-1")])]).expect_err("bad");
    assert!(e.to_string().contains("ipam-max-allocate"), "{e}");
}

#[test]
fn bad_values_name_the_key_and_the_fix() {
    let e = AgentConfig::resolve([&layer(&[("enable-ipv6", "maybe")])]).expect_err("bad");
    assert_eq!(
        e.to_string(),
        "invalid value \"maybe\" for enable-ipv6: expected true or false"
    );
    let e = AgentConfig::resolve([&layer(&[("ipam", "magic")])]).expect_err("bad");
    assert!(
        e.to_string()
            .starts_with("invalid value \"magic\" for ipam: expected one of the modes weft runs"),
        "{e}"
    );
    let e = AgentConfig::resolve([&layer(&[("enable-ipv4", "false")])]).expect_err("none");
    assert!(e.to_string().contains("at least one"), "{e}");
    // Before CiliumNodeConfig is read, only each value is checked.
    let file = layer(&[("enable-ipv4", "false")]);
    AgentConfig::resolve_values([&file]).expect("another layer may enable IPv6");
    let node = layer(&[("enable-ipv6", "true")]);
    AgentConfig::resolve([&file, &node]).expect("IPv6 only");
    let e =
        AgentConfig::resolve_values([&layer(&[("enable-ipv6", "maybe")])]).expect_err("bad value");
    assert!(e.to_string().contains("enable-ipv6"), "{e}");
}

#[test]
fn delegated_plugin_is_refused_naming_the_modes_weft_runs() {
    let e = AgentConfig::resolve([&layer(&[("ipam", "delegated-plugin")])])
        .expect_err("weft does not delegate IPAM");
    let text = e.to_string();
    assert!(
        text.contains("for ipam") && text.contains("\"delegated-plugin\""),
        "{text}"
    );
    for mode in IpamMode::ALL
        .iter()
        .filter(|m| **m != IpamMode::DelegatedPlugin)
    {
        assert!(text.contains(mode.as_str()), "{mode} is not named: {text}");
    }
}

#[test]
fn masquerade_keys() {
    let c = AgentConfig::resolve([&layer(&[
        ("enable-bpf-masquerade", "true"),
        ("devices", "eth0,eth1"),
        ("enable-ip-masq-agent", "true"),
        ("ipv4-native-routing-cidr", "10.0.0.0/8"),
        ("ipv6-native-routing-cidr", "fd00::/100"),
        ("only-masquerade-default-pool", "true"),
    ])])
    .expect("valid");
    assert!(c.enable_bpf_masquerade && c.enable_ip_masq_agent && c.enable_ipv4_masquerade);
    assert!(c.enable_ipv6_masquerade, "on by default, as Cilium");
    assert_eq!(c.devices, ["eth0", "eth1"]);
    assert_eq!(
        c.ipv4_native_routing_cidr,
        Some("10.0.0.0/8".parse().expect("cidr"))
    );
    assert_eq!(
        c.ip_masq_agent_config_path,
        PathBuf::from(DEFAULT_IP_MASQ_AGENT_CONFIG)
    );
    let c = AgentConfig::resolve([&layer(&[("enable-ipv6-masquerade", "false")])]).expect("valid");
    assert!(!c.enable_ipv6_masquerade && c.enable_ipv4_masquerade);
    let e = AgentConfig::resolve([&layer(&[("enable-ipv6-masquerade", "sometimes")])])
        .expect_err("not a bool");
    assert!(e.to_string().contains("enable-ipv6-masquerade"), "{e}");
    let e = AgentConfig::resolve([&layer(&[("ipv4-native-routing-cidr", "fd00::/8")])])
        .expect_err("v6 in the v4 key");
    assert!(e.to_string().contains("must be an IPv4 CIDR"), "{e}");
    let e = AgentConfig::resolve([&layer(&[("only-masquerade-default-pool", "true")])])
        .expect_err("needs bpf masquerade");
    assert!(
        e.to_string()
            .contains("--only-masquerade-default-pool requires --enable-bpf-masquerade"),
        "{e}"
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("15s"), Some(Duration::from_secs(15)));
    assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(parse_duration("5x"), None);
    assert_eq!(parse_duration("0"), Some(Duration::ZERO));
}

#[test]
fn an_unknown_mode_lists_only_the_modes_weft_runs() {
    let e = AgentConfig::resolve([&layer(&[("ipam", "clusterpool")])]).expect_err("a typo");
    let text = e.to_string();
    assert_eq!(
        text,
        "invalid value \"clusterpool\" for ipam: expected one of the modes weft runs: \
         kubernetes, cluster-pool, multi-pool, crd, eni, azure, alibabacloud",
    );
}

#[test]
fn prometheus_serve_addr_takes_ciliums_forms() {
    let every =
        AgentConfig::resolve([&layer(&[("prometheus-serve-addr", ":9962")])]).expect("valid");
    assert_eq!(
        every.prometheus_serve_addr,
        Some("0.0.0.0:9962".parse().expect("addr"))
    );
    let empty = AgentConfig::resolve([&layer(&[("prometheus-serve-addr", "")])]).expect("valid");
    assert_eq!(empty.prometheus_serve_addr, None);
    let bad = AgentConfig::resolve([&layer(&[("prometheus-serve-addr", "9962")])])
        .expect_err("a port alone is not an address");
    assert_eq!(bad.key, "prometheus-serve-addr");
}

#[test]
fn cluster_pool_lists_take_spaces_and_commas() {
    let c = AgentConfig::resolve([&layer(&[
        (
            "cluster-pool-ipv4-cidr",
            "10.0.0.0/16, 10.1.0.0/16 10.2.0.0/16",
        ),
        ("cluster-pool-ipv6-mask-size", "120"),
    ])])
    .expect("valid");
    assert_eq!(c.cluster_pool.ipv4.cidrs.len(), 3);
    assert_eq!(c.cluster_pool.ipv6.mask_size, 120);
    assert!(reference::lookup("ipam").is_some_and(|row| row.stores == reference::Stores::Both));
}

#[test]
fn cluster_pool_bad_forms_name_the_key_and_the_fix() {
    let error = AgentConfig::resolve([&layer(&[(
        "cluster-pool-ipv4-cidr",
        "10.0.0.0/16 10.1.0/33",
    )])])
    .expect_err("not a CIDR");
    assert_eq!(
        error.to_string(),
        "invalid value \"10.0.0.0/16 10.1.0/33\" for cluster-pool-ipv4-cidr: expected CIDRs \
         separated by spaces or commas, e.g. 10.0.0.0/8 (\"10.1.0/33\" is not a CIDR)"
    );
    let error = AgentConfig::resolve([&layer(&[("cluster-pool-ipv4-mask-size", "33")])])
        .expect_err("too long");
    assert!(error.to_string().contains("from 1 to 32"), "{error}");
    let error = AgentConfig::resolve([&layer(&[("cluster-pool-ipv6-mask-size", "x")])])
        .expect_err("no number");
    assert!(
        error.to_string().contains("cluster-pool-ipv6-mask-size"),
        "{error}"
    );
}

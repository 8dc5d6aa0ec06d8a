//! The clash rules per mode, the agent's own devices, the messages, and the mode-change table.

use super::*;
use crate::crd::{
    ipam::{AllocationIp, IpamPoolAllocation, IpamPoolSpec},
    node::{CiliumNode, IpamSpec},
};

fn net(cidr: &str, device: &str, address: Option<&str>) -> NodeNetwork {
    NodeNetwork {
        cidr: cidr.parse::<IpNet>().expect("cidr").trunc(),
        device: device.to_owned(),
        address: address.map(|a| a.parse().expect("ip")),
    }
}

fn node_with(ipam: IpamSpec) -> NodeInput {
    let mut node = CiliumNode::new("n1");
    node.spec.ipam = Some(ipam);
    NodeInput::from(&node)
}

fn cluster_pool(cidrs: &[&str]) -> NodeInput {
    node_with(IpamSpec {
        pod_cidrs: cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
        ..IpamSpec::default()
    })
}

#[test]
fn the_classic_ten_slash_eight_clash_names_both_ranges_and_the_fix() {
    let node = cluster_pool(&["10.0.0.0/8"]);
    let networks = node_networks([net("10.0.3.4/24", "eth0", Some("10.0.3.4"))]);
    let found = overlaps(&pod_ranges(IpamMode::ClusterPool, &node), &networks);
    assert_eq!(found.len(), 1);
    let text = SanityError::Overlap { overlaps: found }.to_string();
    assert!(
        text.starts_with(
            "cluster-pool pod CIDR 10.0.0.0/8 overlaps 10.0.3.0/24 on eth0 (node address 10.0.3.4): pick a pod CIDR outside the node's networks"
        ),
        "{text}"
    );
    assert!(text.contains("cluster-pool-ipv4-cidr"), "{text}");
}

#[test]
fn multi_pool_cidrs_clash_with_routes_and_name_the_pool() {
    let node = node_with(IpamSpec {
        pools: Some(IpamPoolSpec {
            requested: Vec::new(),
            allocated: vec![IpamPoolAllocation {
                pool: "default".into(),
                cidrs: vec![
                    "10.0.0.0/16".parse().expect("cidr"),
                    "fd00::/120".parse().expect("cidr"),
                ],
                ..IpamPoolAllocation::default()
            }],
        }),
        ..IpamSpec::default()
    });
    let networks = node_networks([
        net("10.0.0.0/8", "tun0", None),
        net("192.168.1.0/24", "eth0", Some("192.168.1.5")),
    ]);
    let found = overlaps(&pod_ranges(IpamMode::MultiPool, &node), &networks);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].to_string().split(':').next(),
        Some("pool default CIDR 10.0.0.0/16 overlaps route 10.0.0.0/8 dev tun0")
    );
    assert!(found[0].range.fix().contains("CiliumPodIPPool default"));
}

#[test]
fn default_routes_and_the_agents_own_pod_routes_are_not_node_networks() {
    let networks = node_networks([
        net("0.0.0.0/0", "eth0", None),
        net("::/0", "eth0", None),
        net("10.200.0.5/32", "wft0123456789ab", None),
        net("10.0.3.0/24", "eth0", None),
        net("10.0.3.4/24", "eth0", Some("10.0.3.4")),
        // A device that merely starts with "wft" is not the agent's.
        net("10.9.0.0/16", "wft-vpn", None),
    ]);
    assert_eq!(
        networks,
        vec![
            net("10.0.3.4/24", "eth0", Some("10.0.3.4")),
            net("10.9.0.0/16", "wft-vpn", None)
        ]
    );
    assert!(is_agent_device("wft0123456789ab"));
    assert!(!is_agent_device("wft0123456789a"));
    let node = cluster_pool(&["10.200.0.0/24"]);
    assert!(overlaps(&pod_ranges(IpamMode::ClusterPool, &node), &networks).is_empty());
}

#[test]
fn crd_modes_only_clash_on_the_nodes_own_address() {
    let mut pool = std::collections::BTreeMap::new();
    for ip in ["10.0.3.20", "10.0.3.4"] {
        pool.insert(ip.to_owned(), AllocationIp::default());
    }
    let node = node_with(IpamSpec {
        pool,
        ..IpamSpec::default()
    });
    let networks = node_networks([net("10.0.3.4/24", "eth0", Some("10.0.3.4"))]);
    for mode in [IpamMode::Crd, IpamMode::Azure, IpamMode::AlibabaCloud] {
        let found = overlaps(&pod_ranges(mode, &node), &networks);
        assert_eq!(found.len(), 1, "{mode}");
        assert_eq!(
            found[0].range.cidr,
            "10.0.3.4/32".parse::<IpNet>().expect("cidr")
        );
        assert!(
            found[0]
                .to_string()
                .contains("it is the node's own address")
        );
    }
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    assert!(address_clash(IpamMode::Crd, ip("10.0.3.20"), &networks).is_none());
    assert!(address_clash(IpamMode::Crd, ip("10.0.3.4"), &networks).is_some());
    assert!(address_clash(IpamMode::MultiPool, ip("10.0.3.20"), &networks).is_some());
    assert!(address_clash(IpamMode::MultiPool, ip("10.1.3.20"), &networks).is_none());
}

#[test]
fn families_do_not_mix_and_delegated_has_no_ranges() {
    let node = cluster_pool(&["fd00::/64"]);
    let networks = node_networks([net("10.0.3.4/24", "eth0", Some("10.0.3.4"))]);
    assert!(overlaps(&pod_ranges(IpamMode::ClusterPool, &node), &networks).is_empty());
    assert!(pod_ranges(IpamMode::DelegatedPlugin, &node).is_empty());
    assert!(pod_ranges(IpamMode::MultiPool, &node).is_empty());
}

#[test]
fn mode_changes_under_pods_are_refused_except_cluster_pool_to_multi_pool() {
    use IpamMode::{ClusterPool, Crd, Kubernetes, MultiPool};
    let check = |from, to, pods| check_mode_change(from, to, pods, "/var/run/weft");
    assert_eq!(check(None, Crd, 3), Ok(ModeDecision::Record));
    assert_eq!(check(Some(Crd), Crd, 3), Ok(ModeDecision::Keep));
    assert_eq!(check(Some(Crd), ClusterPool, 0), Ok(ModeDecision::Record));
    assert_eq!(
        check(Some(ClusterPool), MultiPool, 5),
        Ok(ModeDecision::Record)
    );
    for (from, to) in [
        (MultiPool, ClusterPool),
        (ClusterPool, Crd),
        (Kubernetes, MultiPool),
    ] {
        let error = check(Some(from), to, 2).expect_err("refused");
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "the IPAM mode changed from {from} to {to}, but 2 pod(s) on this node still hold {from} addresses"
            )),
            "{text}"
        );
        assert!(text.contains("only cluster-pool → multi-pool"), "{text}");
        assert!(text.contains("Drain the node's pods first"), "{text}");
    }
}

#[test]
fn records_of_a_family_now_off_are_refused_naming_them_and_the_fix() {
    let addrs: Vec<(String, IpAddr)> = vec![
        ("default/web".into(), "10.200.0.5".parse().expect("ip")),
        ("default/web".into(), "fd00:200::5".parse().expect("ip")),
    ];
    let dir = "/var/run/weft/endpoints";
    assert_eq!(check_record_families(true, true, &addrs, dir), Ok(()));
    let error = check_record_families(true, false, &addrs, dir).expect_err("IPv6 is off");
    let text = error.to_string();
    assert!(
        matches!(&error, SanityError::FamilyOff { family: Family::V6, flag: "enable-ipv6", held, .. } if held.len() == 1),
        "{error:?}"
    );
    for needle in [
        dir,
        "ipv6",
        "default/web fd00:200::5",
        "enable-ipv6=true",
        "kubectl drain",
    ] {
        assert!(text.contains(needle), "{needle} missing: {text}");
    }
    let only_v4 = &addrs[..1];
    assert_eq!(check_record_families(true, false, only_v4, dir), Ok(()));
    assert!(check_record_families(false, true, only_v4, dir).is_err());
}

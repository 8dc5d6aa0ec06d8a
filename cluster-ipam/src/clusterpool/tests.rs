use ipnet::IpNet;

use super::{ClusterPool, ClusterPoolConfig, ClusterPoolError, FamilyConfig, NodeResult, Warning};
use crate::{Family, cidrset::BlockStats};

fn nets(cidrs: &[&str]) -> Vec<IpNet> {
    cidrs.iter().map(|c| c.parse().unwrap()).collect()
}

fn strings(cidrs: &[&str]) -> Vec<String> {
    cidrs.iter().map(|c| (*c).to_owned()).collect()
}

fn config(v4: &[&str], v4_mask: u8, v6: &[&str], v6_mask: u8) -> ClusterPoolConfig {
    ClusterPoolConfig {
        ipv4: FamilyConfig {
            enabled: !v4.is_empty(),
            cidrs: nets(v4),
            mask_size: v4_mask,
        },
        ipv6: FamilyConfig {
            enabled: !v6.is_empty(),
            cidrs: nets(v6),
            mask_size: v6_mask,
        },
    }
}

fn ready(v4: &[&str], v4_mask: u8, v6: &[&str], v6_mask: u8) -> ClusterPool {
    let mut pool = ClusterPool::new(&config(v4, v4_mask, v6, v6_mask)).unwrap();
    assert!(pool.restore_finished().is_empty());
    pool
}

fn written(result: &NodeResult) -> Option<Vec<&str>> {
    result
        .pod_cidrs
        .as_ref()
        .map(|cidrs| cidrs.iter().map(String::as_str).collect())
}

fn error_text(result: &NodeResult) -> Option<String> {
    result.error.as_ref().map(ToString::to_string)
}

#[test]
fn config_is_validated_with_cilium_texts() {
    let mut v4_off = config(&[], 24, &["fd00::/104"], 120);
    v4_off.ipv4.cidrs = nets(&["10.0.0.0/16"]);
    let mut v6_off = config(&["10.0.0.0/16"], 24, &[], 112);
    v6_off.ipv6.cidrs = nets(&["fd00::/104"]);
    let mut v6_on_empty = config(&["10.0.0.0/16"], 24, &[], 112);
    v6_on_empty.ipv6.enabled = true;
    let cases = [
        (
            ClusterPoolConfig::default(),
            "cluster-pool-ipv4-cidr must be provided when using ClusterPool",
        ),
        (
            v4_off,
            "cluster-pool-ipv4-cidr must not be set if IPv4 is disabled",
        ),
        (
            v6_off,
            "cluster-pool-ipv6-cidr must not be set if IPv6 is disabled",
        ),
        (
            v6_on_empty,
            "cluster-pool-ipv6-cidr must be provided when using ClusterPool",
        ),
        (
            config(&["fd00::/104"], 24, &[], 0),
            "unable to initialize IPv4 allocator: CIDR is not v4 family: fd00::/104",
        ),
        (
            config(&["10.0.0.0/16"], 24, &["10.1.0.0/16"], 112),
            "unable to initialize IPv6 allocator: CIDR is not v6 family: 10.1.0.0/16",
        ),
        (
            config(&["10.0.0.0/16", "10.0.0.0/8"], 24, &[], 0),
            "unable to initialize IPv4 allocator: requested CIDR 10.0.0.0/8 collides with clusterCIDR: 10.0.0.0/16, nodeMask: 24",
        ),
        (
            config(&["10.0.0.0/16"], 33, &[], 0),
            "unable to initialize IPv4 allocator: SubNetMask is invalid, should be lower or equal to 32 for IPv4 and to 128 for IPv6",
        ),
        (
            config(&["10.0.0.0/16"], 24, &["fd00::/64"], 112),
            "unable to initialize IPv6 allocator: New CIDR set failed; the node CIDR size is too big",
        ),
        // IPv4 is checked first.
        (
            config(&["10.0.0.0/16"], 8, &["fd00::/64"], 112),
            "unable to initialize IPv4 allocator: New CIDR set failed; the node mask size 8 is shorter than the cluster CIDR 10.0.0.0/16: use a mask size of at least /16",
        ),
    ];
    for (config, want) in cases {
        let err = ClusterPool::new(&config).unwrap_err();
        assert_eq!(err.to_string(), want);
    }
    assert!(ClusterPool::new(&config(&["10.0.0.0/16"], 24, &["fd00::/104"], 120)).is_ok());
}

#[test]
fn empty_spec_gets_one_block_per_family_in_order() {
    let mut pool = ready(&["10.0.0.0/16"], 24, &["fd00::/104"], 120);
    let cases = [
        ("a", ["10.0.0.0/24", "fd00::/120"]),
        ("b", ["10.0.1.0/24", "fd00::100/120"]),
        ("c", ["10.0.2.0/24", "fd00::200/120"]),
    ];
    for (node, want) in cases {
        let result = pool.allocate_node(node, &[]);
        assert_eq!(written(&result), Some(want.to_vec()), "{node}");
        assert_eq!(result.error, None);
        // Asking again with the written spec changes nothing.
        let again = pool.allocate_node(node, &strings(&want));
        assert_eq!(again, NodeResult::default());
    }
    let stats = pool.stats();
    assert_eq!(
        stats.ipv4,
        BlockStats {
            in_use: 3,
            reserved: 0,
            free: 253
        }
    );
    assert_eq!(stats.ipv6.in_use, 3);
}

#[test]
fn fresh_blocks_wait_for_the_restore() {
    let mut pool = ClusterPool::new(&config(&["10.0.0.0/30"], 31, &[], 0)).unwrap();
    let waiting = pool.allocate_node("new", &[]);
    assert!(waiting.postponed);
    assert_eq!(waiting.pod_cidrs, None);
    // An existing node's block is reserved before anything is handed out.
    let old = pool.allocate_node("old", &strings(&["10.0.0.0/31"]));
    assert_eq!(written(&old), Some(vec!["10.0.0.0/31"]));
    assert!(!old.postponed);
    assert_eq!(pool.restore_finished(), ["new"]);
    let result = pool.allocate_node("new", &[]);
    assert_eq!(written(&result), Some(vec!["10.0.0.2/31"]));
}

#[test]
fn missing_family_of_a_restored_node_waits_for_the_restore() {
    let mut pool = ClusterPool::new(&config(&["10.0.0.0/16"], 24, &["fd00::/104"], 120)).unwrap();
    let result = pool.allocate_node("a", &strings(&["10.0.7.0/24"]));
    assert_eq!(written(&result), Some(vec!["10.0.7.0/24"]));
    assert!(result.postponed);
    assert_eq!(pool.restore_finished(), ["a"]);
    let result = pool.allocate_node("a", &strings(&["10.0.7.0/24"]));
    assert_eq!(written(&result), Some(vec!["10.0.7.0/24", "fd00::/120"]));
}

#[test]
fn known_node_listing_other_cidrs_conflicts_and_keeps_its_own() {
    let mut pool = ready(&["10.0.0.0/16"], 24, &[], 0);
    pool.allocate_node("a", &strings(&["10.0.5.0/24"]));
    let cases = [
        (
            vec!["10.0.6.0/24"],
            "node has CIDRs allocated ([10.0.5.0/24]) that conflict with requested CIDRs [10.0.6.0/24]",
        ),
        (
            vec!["10.0.5.0/24", "10.0.6.0/24"],
            "node has CIDRs allocated ([10.0.5.0/24]) that conflict with requested CIDRs [10.0.5.0/24 10.0.6.0/24]",
        ),
    ];
    for (listed, want) in cases {
        let result = pool.allocate_node("a", &strings(&listed));
        assert_eq!(error_text(&result).as_deref(), Some(want));
        assert_eq!(written(&result), Some(vec!["10.0.5.0/24"]));
        assert_eq!(pool.stats().ipv4.in_use, 1);
    }
}

#[test]
fn cidr_held_by_another_node_is_stripped_with_a_warning() {
    let mut pool = ready(&["10.0.0.0/16"], 24, &[], 0);
    pool.allocate_node("a", &strings(&["10.0.0.0/24"]));
    for listed in ["10.0.0.0/24", "10.0.0.128/25", "10.0.0.0/23"] {
        let result = pool.allocate_node("b", &strings(&[listed]));
        assert_eq!(
            error_text(&result),
            Some(format!("requested CIDR ({listed}) is already allocated"))
        );
        assert_eq!(result.warnings.len(), 1);
        assert_eq!(
            result.warnings[0].to_string(),
            "Duplicate v4 CIDR, will be released from this node"
        );
        assert!(
            matches!(&result.warnings[0], Warning::DuplicateCidr { family: Family::V4, node, .. } if node == "b")
        );
        assert_eq!(written(&result), Some(vec![]));
        assert_eq!(pool.node_cidrs("b"), None);
    }
    assert_eq!(pool.node_cidrs("a"), Some(nets(&["10.0.0.0/24"])));
    // With the stripped spec it gets a block of its own.
    let result = pool.allocate_node("b", &[]);
    assert_eq!(written(&result), Some(vec!["10.0.1.0/24"]));
}

#[test]
fn duplicate_in_one_family_keeps_the_other_and_fills_it_later() {
    let mut pool = ready(&["10.0.0.0/16"], 24, &["fd00::/104"], 120);
    pool.allocate_node("a", &[]);
    let result = pool.allocate_node("b", &strings(&["10.0.0.0/24", "fd00::500/120"]));
    assert_eq!(written(&result), Some(vec!["fd00::500/120"]));
    assert_eq!(
        error_text(&result).as_deref(),
        Some("requested CIDR (10.0.0.0/24) is already allocated")
    );
    let result = pool.allocate_node("b", &strings(&["fd00::500/120"]));
    assert_eq!(written(&result), Some(vec!["10.0.1.0/24", "fd00::500/120"]));
    assert_eq!(result.error, None);
}

#[test]
fn a_block_is_never_held_by_two_nodes() {
    let mut pool = ready(&["10.0.0.0/22"], 24, &[], 0);
    let listings: &[(&str, &[&str])] = &[
        ("n1", &["10.0.1.0/24"]),
        ("n2", &["10.0.1.0/24"]),
        ("n3", &["10.0.0.0/23"]),
        ("n4", &[]),
        ("n5", &["10.0.2.0/24", "10.0.3.0/24"]),
        ("n6", &["10.0.3.0/24"]),
        ("n7", &[]),
        ("n8", &["10.0.0.0/22"]),
    ];
    for (node, listed) in listings {
        pool.allocate_node(node, &strings(listed));
    }
    let mut held: Vec<(String, IpNet)> = Vec::new();
    for (node, _) in listings {
        for cidr in pool.node_cidrs(node).unwrap_or_default() {
            held.push(((*node).to_owned(), cidr));
        }
    }
    for (i, (node_a, a)) in held.iter().enumerate() {
        for (node_b, b) in &held[i + 1..] {
            assert!(
                !a.contains(b) && !b.contains(a),
                "{node_a} {a} overlaps {node_b} {b}"
            );
        }
    }
    let expected: Vec<(String, IpNet)> = [
        ("n1", "10.0.1.0/24"),
        ("n4", "10.0.0.0/24"),
        ("n5", "10.0.2.0/24"),
        ("n5", "10.0.3.0/24"),
    ]
    .iter()
    .map(|(n, c)| ((*n).to_owned(), c.parse().unwrap()))
    .collect();
    assert_eq!(held, expected);
    assert_eq!(
        pool.stats().ipv4,
        BlockStats {
            in_use: 4,
            reserved: 0,
            free: 0
        }
    );
    let full = pool.allocate_node("n7", &[]);
    assert_eq!(error_text(&full).as_deref(), Some("allocator full"));
}

#[test]
fn v4_is_handed_back_when_v6_fails() {
    let mut pool = ready(&["10.0.0.0/16"], 24, &["fd00::/120"], 120);
    pool.allocate_node("a", &[]);
    let result = pool.allocate_node("b", &[]);
    assert_eq!(error_text(&result).as_deref(), Some("allocator full"));
    assert_eq!(result.pod_cidrs, None);
    assert_eq!(pool.stats().ipv4.in_use, 1);
    // Same when listed: the v4 block is occupied, then the v6 one is refused.
    let result = pool.allocate_node("c", &strings(&["10.0.9.0/24", "2001:db8::/120"]));
    assert_eq!(
        error_text(&result).as_deref(),
        Some("allocator not configured for the requested CIDR 2001:db8::/120")
    );
    assert_eq!(pool.node_cidrs("c"), None);
    assert_eq!(pool.stats().ipv4.in_use, 1);
}

#[test]
fn bad_entries_name_the_field_and_the_value() {
    let mut pool = ready(&["10.0.0.0/16"], 24, &[], 0);
    let result = pool.allocate_node("a", &strings(&["10.0.0.0/24", "banana"]));
    assert_eq!(
        error_text(&result).as_deref(),
        Some("invalid spec.ipam.podCIDRs entry \"banana\": invalid IP address syntax")
    );
    assert_eq!(result.pod_cidrs, None);
    assert_eq!(pool.stats().ipv4.in_use, 0);
    // A known node gets its held CIDRs written back.
    pool.allocate_node("a", &strings(&["10.0.4.0/24"]));
    let result = pool.allocate_node("a", &strings(&["10.0.4.0/24", "10.0.5.0/33"]));
    assert!(matches!(
        result.error,
        Some(ClusterPoolError::InvalidPodCidr { .. })
    ));
    assert_eq!(written(&result), Some(vec!["10.0.4.0/24"]));
    // Another family without sets.
    let result = pool.allocate_node("b", &strings(&["fd00::/112"]));
    assert_eq!(
        error_text(&result).as_deref(),
        Some(
            "unable to allocate CIDR [fd00::/112] since allocator for IPv6 addresses does not exist"
        )
    );
}

#[test]
fn no_family_enabled_names_the_node() {
    let mut pool = ready(&[], 24, &[], 112);
    let result = pool.allocate_node("a", &[]);
    assert_eq!(
        error_text(&result).as_deref(),
        Some(
            "Unable to allocate node CIDR for node a. IPAMInfo: {IPv4: [], IPv6: []}. Please check that your configuration is correct."
        )
    );
}

#[test]
fn release_node_frees_its_blocks() {
    let mut pool = ready(&["10.0.0.0/30"], 31, &[], 0);
    pool.allocate_node("a", &[]);
    pool.allocate_node("b", &[]);
    assert!(pool.release_node("a"));
    assert!(!pool.release_node("a"));
    assert_eq!(
        pool.stats().ipv4,
        BlockStats {
            in_use: 1,
            reserved: 0,
            free: 1
        }
    );
    let result = pool.allocate_node("c", &[]);
    assert_eq!(written(&result), Some(vec!["10.0.0.0/31"]));
}

#[test]
fn appended_cidr_is_used_once_the_first_is_full() {
    let mut pool = ready(&["10.0.0.0/30"], 31, &[], 0);
    pool.allocate_node("a", &[]);
    pool.allocate_node("b", &[]);
    let full = pool.allocate_node("c", &[]);
    assert_eq!(error_text(&full).as_deref(), Some("allocator full"));
    pool.update_cidrs(nets(&["10.0.0.0/30", "10.1.0.0/30"]), Vec::new())
        .unwrap();
    let result = pool.allocate_node("c", &[]);
    assert_eq!(written(&result), Some(vec!["10.1.0.0/31"]));
    assert_eq!(pool.node_cidrs("a"), Some(nets(&["10.0.0.0/31"])));
    assert_eq!(
        pool.stats().ipv4,
        BlockStats {
            in_use: 3,
            reserved: 0,
            free: 1
        }
    );
}

#[test]
fn refused_runtime_changes_change_nothing() {
    let mut pool = ready(&["10.0.0.0/30"], 31, &[], 0);
    pool.allocate_node("a", &[]);
    let mut changed_mask = config(&["10.0.0.0/30", "10.1.0.0/30"], 30, &[], 0);
    let enable_v6 = config(&["10.0.0.0/30", "10.1.0.0/30"], 31, &["fd00::/120"], 120);
    let cases = [
        (
            changed_mask.clone(),
            "cluster-pool-ipv4-mask-size cannot be changed (was 31, now 30); restore it",
        ),
        (
            enable_v6,
            "IPv6 cannot be enabled at runtime; restore the setting or restart the operator",
        ),
        (
            config(&["10.1.0.0/30"], 31, &[], 0),
            "cluster-pool-ipv4-cidr cannot drop or change 10.0.0.0/30: keep the existing CIDRs in place and append new ones at the end",
        ),
        (
            config(&["10.1.0.0/30", "10.0.0.0/30"], 31, &[], 0),
            "cluster-pool-ipv4-cidr cannot drop or change 10.0.0.0/30: keep the existing CIDRs in place and append new ones at the end",
        ),
        (
            config(&["10.0.0.0/30", "10.0.0.0/16"], 31, &[], 0),
            "unable to initialize IPv4 allocator: requested CIDR 10.0.0.0/16 collides with clusterCIDR: 10.0.0.0/30, nodeMask: 31",
        ),
        (
            config(&[], 31, &[], 0),
            "IPv4 cannot be disabled at runtime; restore the setting or restart the operator",
        ),
    ];
    for (config, want) in cases {
        let err = pool.reconfigure(&config).unwrap_err();
        assert_eq!(err.to_string(), want);
        assert_eq!(
            pool.stats().ipv4,
            BlockStats {
                in_use: 1,
                reserved: 0,
                free: 1
            }
        );
    }
    // Nothing was appended: the set fills up at two blocks.
    pool.allocate_node("b", &[]);
    let full = pool.allocate_node("c", &[]);
    assert_eq!(error_text(&full).as_deref(), Some("allocator full"));
    // The same change with the mask restored goes through.
    changed_mask.ipv4.mask_size = 31;
    pool.reconfigure(&changed_mask).unwrap();
    let result = pool.allocate_node("c", &[]);
    assert_eq!(written(&result), Some(vec!["10.1.0.0/31"]));
}

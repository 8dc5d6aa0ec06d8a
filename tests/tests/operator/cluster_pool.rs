//! Cluster-pool mode: one block per node from the cluster CIDRs, kept across restarts,
//! conflicts reported in `operator-status`, deleted nodes' blocks reused, CIDRs appended at
//! runtime, a mask-size change refused.

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;
use weft_tests::kube::Verb;

use super::{Cluster, wait_for};

const FLAGS: [&str; 5] = [
    "--leader-election=false",
    "--cluster-pool-ipv4-cidr",
    "10.200.0.0/22",
    "--cluster-pool-ipv4-mask-size",
    "24",
];

fn every_node_has_a_block(cluster: &Cluster, names: &[&str]) -> Result<(), String> {
    let all = cluster.pod_cidrs();
    if names
        .iter()
        .all(|n| all.get(*n).is_some_and(|c| c.len() == 1))
    {
        Ok(())
    } else {
        Err(format!("{all:?}"))
    }
}

#[test]
fn nodes_get_distinct_blocks_and_keep_them_across_restarts() {
    let cluster = Cluster::start();
    // Held before the operator starts: re-occupied, never handed out again.
    cluster.add_node("old", &json!({"podCIDRs": ["10.200.0.0/24"]}));
    for n in ["n1", "n2"] {
        cluster.add_node(n, &json!({}));
    }
    let mut op = cluster.operator(&FLAGS);
    wait_for("n1 and n2 to get blocks", Duration::from_secs(20), || {
        every_node_has_a_block(&cluster, &["n1", "n2"])
    });
    let before = cluster.pod_cidrs();
    assert_eq!(before["old"], ["10.200.0.0/24"]);
    let distinct: BTreeSet<&String> = before.values().flatten().collect();
    assert_eq!(distinct.len(), 3, "{before:?}");
    assert!(
        op.metric("weft_operator_ipam_nodes{category=\"total\"}") == Some(3.0),
        "{}",
        op.metrics()
    );
    assert_eq!(
        op.metric(
            "weft_operator_ipam_pool_blocks{pool=\"cluster-pool\",family=\"ipv4\",state=\"free\"}"
        ),
        Some(1.0)
    );
    // One spec write per new node, nothing for the node that had its block.
    assert_eq!(cluster.emu.requests().count(Verb::Patch, "ciliumnodes"), 2);

    assert_eq!(op.stop(), Some(0), "{}", op.log());
    cluster.add_node("n3", &json!({}));
    op.spawn();
    wait_for("n3 to get the last block", Duration::from_secs(20), || {
        every_node_has_a_block(&cluster, &["n3"])
    });
    let after = cluster.pod_cidrs();
    for n in ["old", "n1", "n2"] {
        assert_eq!(after[n], before[n], "{n} kept its block");
    }
    assert_eq!(after["n3"], ["10.200.3.0/24"]);

    // Full: the next node gets Cilium's error in its status, and no block.
    cluster.add_node("n4", &json!({}));
    wait_for("n4's allocation error", Duration::from_secs(20), || {
        let e = cluster.operator_error("n4");
        if e.contains("allocator full") {
            Ok(())
        } else {
            Err(e)
        }
    });
    assert!(cluster.pod_cidrs()["n4"].is_empty());
    assert_eq!(
        op.metric("weft_operator_ipam_nodes{category=\"at-capacity\"}"),
        Some(1.0),
        "{}",
        op.metrics()
    );

    // A deleted Node takes its CiliumNode with it; its block goes to the waiting node.
    cluster.emu.remove("nodes", None, "n1");
    wait_for(
        "n1's CiliumNode to be deleted",
        Duration::from_secs(20),
        || {
            cluster
                .cilium_node("n1")
                .map_or(Ok(()), |_| Err("still there".into()))
        },
    );
    wait_for("n4 to get n1's block", Duration::from_secs(20), || {
        let got = &cluster.pod_cidrs()["n4"];
        if *got == before["n1"] {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    });
    wait_for("n4's error to clear", Duration::from_secs(20), || {
        let e = cluster.operator_error("n4");
        if e.is_empty() { Ok(()) } else { Err(e) }
    });
}

#[test]
fn conflicts_and_garbage_are_reported_and_lose_nothing() {
    let cluster = Cluster::start();
    cluster.add_node("a", &json!({"podCIDRs": ["10.200.1.0/24"]}));
    cluster.add_node("b", &json!({"podCIDRs": ["10.200.1.0/24"]}));
    cluster.add_node("c", &json!({"podCIDRs": "10.200.2.0/24"}));
    cluster.add_node("d", &json!({"podCIDRs": ["banana"]}));
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": "ignored", "annotations": {"ipam.cilium.io/ignore": "true"}},
        "spec": {"ipam": {}},
    }));
    let _op = cluster.operator(&FLAGS);
    // Status (the error) and spec (the stripped block) are written apart: wait for both.
    let holders = |cidrs: &std::collections::BTreeMap<String, Vec<String>>| -> Vec<String> {
        ["a", "b"]
            .into_iter()
            .filter(|n| cidrs[*n] == ["10.200.1.0/24"])
            .map(str::to_owned)
            .collect()
    };
    wait_for(
        "errors on b, c and d, and one holder of the block",
        Duration::from_secs(20),
        || {
            let errors: Vec<String> = ["b", "c", "d"]
                .iter()
                .map(|n| cluster.operator_error(n))
                .collect();
            let cidrs = cluster.pod_cidrs();
            if errors.iter().all(|e| !e.is_empty()) && holders(&cidrs).len() == 1 {
                Ok(())
            } else {
                Err(format!("{errors:?} {cidrs:?}"))
            }
        },
    );
    let cidrs = cluster.pod_cidrs();
    // Whichever of a and b came first keeps the block; the other has it stripped.
    assert_eq!(holders(&cidrs).len(), 1, "{cidrs:?}");
    assert!(
        cluster.operator_error("b").contains("10.200.1.0/24"),
        "{}",
        cluster.operator_error("b")
    );
    assert!(
        cluster
            .operator_error("c")
            .starts_with("spec.ipam.podCIDRs:"),
        "{}",
        cluster.operator_error("c")
    );
    assert!(
        cluster.operator_error("d").contains("banana"),
        "{}",
        cluster.operator_error("d")
    );
    assert!(cidrs["ignored"].is_empty(), "ignored nodes are left alone");
    assert!(cluster.operator_error("ignored").is_empty());
}

#[test]
fn appended_cidrs_are_used_and_a_mask_change_is_refused() {
    let cluster = Cluster::start();
    let dir = std::env::temp_dir().join(weft_tests::unique("weft-op-config-"));
    std::fs::create_dir_all(&dir).expect("config dir");
    let write = |key: &str, value: &str| std::fs::write(dir.join(key), value).expect("key");
    write("ipam", "cluster-pool");
    write("cluster-pool-ipv4-cidr", "10.210.0.0/24");
    write("cluster-pool-ipv4-mask-size", "24");
    cluster.add_node("n1", &json!({}));
    cluster.add_node("n2", &json!({}));
    let config_dir = dir.to_string_lossy().into_owned();
    let mut op = cluster.operator(&["--leader-election=false", "--config-dir", &config_dir]);
    wait_for(
        "n1 or n2 to get the only block",
        Duration::from_secs(20),
        || {
            let c = cluster.pod_cidrs();
            if c.values().filter(|v| !v.is_empty()).count() == 1 {
                Ok(())
            } else {
                Err(format!("{c:?}"))
            }
        },
    );
    // A mask change is refused and changes nothing.
    write("cluster-pool-ipv4-mask-size", "25");
    op.wait_log("configuration change refused", Duration::from_secs(20));
    assert!(op.log().contains("mask"), "{}", op.log());
    // Appending a CIDR works (with the original mask back).
    write("cluster-pool-ipv4-mask-size", "24");
    write("cluster-pool-ipv4-cidr", "10.210.0.0/24 10.211.0.0/24");
    wait_for(
        "both nodes to hold a block",
        Duration::from_secs(20),
        || every_node_has_a_block(&cluster, &["n1", "n2"]),
    );
    let all: BTreeSet<String> = cluster.pod_cidrs().into_values().flatten().collect();
    assert_eq!(
        all,
        BTreeSet::from(["10.210.0.0/24".to_owned(), "10.211.0.0/24".to_owned()])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_cluster_cidrs_are_refused_at_start_with_ciliums_texts() {
    let cluster = Cluster::start();
    for (flags, want) in [
        (
            vec!["--ipam", "cluster-pool"],
            "cluster-pool-ipv4-cidr must be provided when using ClusterPool",
        ),
        (vec!["--cluster-pool-ipv4-cidr", "fd00::/104"], "not v4"),
        (
            vec!["--cluster-pool-ipv4-cidr", "10.0.0.0/8,10.1.0.0/16"],
            "collides",
        ),
        (
            vec![
                "--cluster-pool-ipv4-cidr",
                "10.0.0.0/24",
                "--cluster-pool-ipv4-mask-size",
                "33",
            ],
            "SubNetMask",
        ),
    ] {
        let mut all = vec!["--leader-election=false"];
        all.extend(&flags);
        let mut op = cluster.operator(&all);
        assert_eq!(
            op.wait_exit(Duration::from_secs(20)),
            Some(1),
            "{flags:?}: {}",
            op.log()
        );
        assert!(op.log().contains(want), "{flags:?}: {}", op.log());
    }
    assert!(cluster.emu.list("ciliumnodes").is_empty());
}

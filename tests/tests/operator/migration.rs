//! Cluster-pool → multi-pool: the dry run against a cluster-pool cluster lists exactly the
//! moves the operator then makes with `--enable-cluster-pool-to-multi-pool-migration`, and
//! writes nothing; refused nodes keep their podCIDRs, say why, and their blocks are never
//! handed out again; new nodes get blocks that overlap no migrated one.

use std::{
    collections::{BTreeMap, BTreeSet},
    process::{Command, Output},
    time::Duration,
};

use serde_json::{Value, json};
use weft_tests::{bin_path, kube::Verb};

use super::{Cluster, wait_for};

const CLUSTER_POOL: [&str; 5] = [
    "--leader-election=false",
    "--cluster-pool-ipv4-cidr",
    "10.40.0.0/21",
    "--cluster-pool-ipv4-mask-size",
    "24",
];

const MULTI_POOL: [&str; 4] = [
    "--leader-election=false",
    "--ipam",
    "multi-pool",
    "--enable-cluster-pool-to-multi-pool-migration",
];

const FAILED: &str = "migration to multi-pool IPAM failed: ";

fn dry_run(cluster: &Cluster) -> Output {
    Command::new(bin_path("weft-operator"))
        .args(["migrate", "cluster-pool-to-multi-pool", "--dry-run"])
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run weft-operator migrate")
}

fn ipam(cluster: &Cluster, node: &str) -> Value {
    cluster.cilium_node(node).expect("the node")["spec"]["ipam"].clone()
}

fn default_blocks(cluster: &Cluster, node: &str) -> Vec<String> {
    let ipam = ipam(cluster, node);
    (ipam["pools"]["allocated"].as_array().into_iter().flatten())
        .filter(|e| e["pool"] == "default")
        .flat_map(|e| e["cidrs"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect()
}

fn ask(cluster: &Cluster, node: &str, addrs: u64) {
    let mut cn = cluster.cilium_node(node).unwrap_or_else(|| {
        json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": node},
               "spec": {"ipam": {}}})
    });
    cn["spec"]["ipam"]["pools"]["requested"] =
        json!([{"pool": "default", "needed": {"ipv4-addrs": addrs}}]);
    cluster.emu.put(cn);
}

/// Nodes `names` with blocks from a cluster-pool operator, which is then stopped.
fn cluster_pool_blocks(cluster: &Cluster, names: &[&str]) -> BTreeMap<String, Vec<String>> {
    for n in names {
        cluster.add_node(n, &json!({}));
    }
    let mut op = cluster.operator(&CLUSTER_POOL);
    let blocks = wait_for("a block each", Duration::from_secs(20), || {
        let all = cluster.pod_cidrs();
        if names
            .iter()
            .all(|n| all.get(*n).is_some_and(|c| c.len() == 1))
        {
            Ok(all)
        } else {
            Err(format!("{all:?}"))
        }
    });
    assert_eq!(op.stop(), Some(0), "{}", op.log());
    blocks
}

/// The dry run lists each node's move or refusal, fails for the refusals, and writes nothing.
fn check_dry_run(cluster: &Cluster, blocks: &BTreeMap<String, Vec<String>>) {
    let writes = |c: &Cluster| {
        let r = c.emu.requests();
        r.count(Verb::Update, "ciliumnodes") + r.count(Verb::Patch, "ciliumnodes")
    };
    let (before, versions) = (writes(cluster), cluster.emu.list("ciliumnodes"));
    let out = dry_run(cluster);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refusal makes it fail: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = [
        "CiliumPodIPPool default exists".to_owned(),
        format!("n1: move {}", blocks["n1"][0]),
        format!("n2: move {}", blocks["n2"][0]),
        format!("n3: move {}", blocks["n3"][0]),
        "outside: refused: 10.99.0.0/24 is outside spec.ipv4.cidrs of CiliumPodIPPool default \
         (10.40.0.0/21); add a CIDR covering 10.99.0.0/24 to spec.ipv4.cidrs"
            .to_owned(),
        "wide: refused: 10.40.4.0/23 is a /23 block but CiliumPodIPPool default hands out /24 \
         blocks; its spec.ipv4.maskSize must be 23"
            .to_owned(),
        "3 node(s) would move to pool default, 2 refused; nothing was written".to_owned(),
    ];
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected);
    assert_eq!(writes(cluster), before, "the dry run wrote nothing");
    assert_eq!(cluster.emu.list("ciliumnodes"), versions);
}

/// The refused nodes keep their podCIDRs and say why, on themselves and the pool.
fn check_refusals(cluster: &Cluster) {
    for (n, cidr, why) in [
        (
            "outside",
            "10.99.0.0/24",
            "add a CIDR covering 10.99.0.0/24",
        ),
        ("wide", "10.40.4.0/23", "its spec.ipv4.maskSize must be 23"),
    ] {
        wait_for(&format!("{n}'s refusal"), Duration::from_secs(20), || {
            let error = cluster.operator_error(n);
            if error.starts_with(FAILED) && error.contains(why) {
                Ok(())
            } else {
                Err(error)
            }
        });
        assert_eq!(ipam(cluster, n)["podCIDRs"], json!([cidr]), "{n} keeps it");
        let events = cluster.emu.list("events");
        assert!(
            events
                .iter()
                .any(|e| e["involvedObject"]["kind"] == "CiliumPodIPPool"
                    && e["involvedObject"]["name"] == "default"
                    && e["message"].as_str().is_some_and(|m| m.contains(why))),
            "an Event on the pool for {n}: {events:?}"
        );
    }
}

#[test]
fn the_dry_run_lists_the_moves_the_operator_then_makes() {
    let cluster = Cluster::start();
    let blocks = cluster_pool_blocks(&cluster, &["n1", "n2", "n3"]);
    // Two nodes the migration must refuse: a block from a CIDR the pool does not have, and a
    // block of another size inside the pool (it covers 10.40.4.0/24 and 10.40.5.0/24).
    cluster.add_node("outside", &json!({"podCIDRs": ["10.99.0.0/24"]}));
    cluster.add_node("wide", &json!({"podCIDRs": ["10.40.4.0/23"]}));
    // n1's agent asks already (it would in multi-pool): its block covers the demand, so it
    // must end with that block only, which it does if no block is carved before the move.
    ask(&cluster, "n1", 16);
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumPodIPPool",
        "metadata": {"name": "default"},
        "spec": {"ipv4": {"cidrs": ["10.40.0.0/21"], "maskSize": 24}},
    }));

    check_dry_run(&cluster, &blocks);

    let _op = cluster.operator(&MULTI_POOL);
    for n in ["n1", "n2", "n3"] {
        wait_for(&format!("{n} migrated"), Duration::from_secs(20), || {
            let got = ipam(&cluster, n);
            if got.get("podCIDRs").is_none() && default_blocks(&cluster, n) == blocks[n] {
                Ok(())
            } else {
                Err(format!("{got}"))
            }
        });
    }
    assert_eq!(
        ipam(&cluster, "n1")["pools"]["requested"],
        json!([{"pool": "default", "needed": {"ipv4-addrs": 16}}]),
        "the agent's demand is kept"
    );
    check_refusals(&cluster);

    // New nodes get what is left: neither a migrated block nor one of wide's two.
    for n in ["n4", "n5", "n6"] {
        cluster.add_node(n, &json!({}));
        ask(&cluster, n, 200);
    }
    let new: BTreeSet<String> = ["n4", "n5", "n6"]
        .iter()
        .map(|n| {
            wait_for(
                &format!("{n}'s block"),
                Duration::from_secs(20),
                || match default_blocks(&cluster, n).as_slice() {
                    [one] => Ok(one.clone()),
                    other => Err(format!("{other:?}")),
                },
            )
        })
        .collect();
    let migrated: BTreeSet<&String> = blocks.values().flatten().collect();
    let free: BTreeSet<String> = (0..8)
        .map(|i| format!("10.40.{i}.0/24"))
        .filter(|b| !migrated.contains(b) && b != "10.40.4.0/24" && b != "10.40.5.0/24")
        .collect();
    assert_eq!(free.len(), 3, "{blocks:?}");
    assert_eq!(new, free);
    cluster.add_node("n7", &json!({}));
    ask(&cluster, "n7", 200);
    wait_for("n7: the pool is empty", Duration::from_secs(20), || {
        let error = cluster.operator_error("n7");
        if error.contains("pool empty") {
            Ok(())
        } else {
            Err(error)
        }
    });
    assert_eq!(
        cluster
            .operator_error("wide")
            .lines()
            .next()
            .map(|l| l.starts_with(FAILED)),
        Some(true),
        "the refusal stays"
    );
}

/// The documented way back, for nodes whose agents were not restarted: the blocks go back to
/// `podCIDRs` by hand, and the cluster-pool operator keeps them.
#[test]
fn the_documented_rollback_gives_every_node_its_block_back() {
    let cluster = Cluster::start();
    let blocks = cluster_pool_blocks(&cluster, &["n1", "n2"]);
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumPodIPPool",
        "metadata": {"name": "default"},
        "spec": {"ipv4": {"cidrs": ["10.40.0.0/21"], "maskSize": 24}},
    }));
    let mut op = cluster.operator(&MULTI_POOL);
    for n in ["n1", "n2"] {
        wait_for(&format!("{n} migrated"), Duration::from_secs(20), || {
            if default_blocks(&cluster, n) == blocks[n] {
                Ok(())
            } else {
                Err(format!("{}", ipam(&cluster, n)))
            }
        });
    }
    assert_eq!(op.stop(), Some(0), "{}", op.log());

    // Step 2: each node's block back into podCIDRs, the pools dropped.
    for n in ["n1", "n2"] {
        let mut cn = cluster.cilium_node(n).expect("the node");
        cn["spec"]["ipam"] = json!({"podCIDRs": default_blocks(&cluster, n)});
        cluster.emu.put(cn);
    }
    // Step 3: the operator in cluster-pool mode again.
    let _op = cluster.operator(&CLUSTER_POOL);
    cluster.add_node("n3", &json!({}));
    let after = wait_for("n3's block", Duration::from_secs(20), || {
        let all = cluster.pod_cidrs();
        if all.get("n3").is_some_and(|c| c.len() == 1) {
            Ok(all)
        } else {
            Err(format!("{all:?}"))
        }
    });
    for n in ["n1", "n2"] {
        assert_eq!(after[n], blocks[n], "{n} keeps its block");
    }
    assert!(
        !blocks.values().any(|b| *b == after["n3"]),
        "n3 got a block of its own: {after:?}"
    );
}

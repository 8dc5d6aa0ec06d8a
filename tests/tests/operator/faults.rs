//! Faults: a fifth of all API requests failing, conflict storms on CiliumNode writes and
//! watches cut again and again while 100 CiliumNodes come and 20 go: the operator converges,
//! no block is held by two nodes, and none leaks.

use std::{collections::BTreeMap, time::Duration};

use serde_json::json;
use weft_tests::kube::{Answer, Verb};

use super::{Cluster, wait_for};

#[test]
fn converges_under_failures_conflicts_and_dropped_watches() {
    let cluster = Cluster::start();
    let op = cluster.operator(&[
        "--leader-election=false",
        "--cluster-pool-ipv4-cidr",
        "10.120.0.0/16",
    ]);
    op_ready(&cluster);
    let faults = cluster.emu.faults();
    faults.inject_ratio(None, "*", 20, Answer::Internal);
    faults.inject_ratio(Some(Verb::Patch), "ciliumnodes", 10, Answer::Conflict);
    for i in 0..100 {
        // The test's own writes go around the faults (the emulator's store, not HTTP).
        cluster.add_node(&format!("node-{i:03}"), &json!({}));
        if i % 20 == 0 {
            faults.drop_watches();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..20 {
        cluster.emu.remove("nodes", None, &format!("node-{i:03}"));
        if i % 5 == 0 {
            faults.drop_watches();
        }
    }
    let check = || -> Result<BTreeMap<String, Vec<String>>, String> {
        let all = cluster.pod_cidrs();
        let mut owner = BTreeMap::new();
        for (node, cidrs) in &all {
            for cidr in cidrs {
                if let Some(other) = owner.insert(cidr.clone(), node.clone()) {
                    panic!("{cidr} is held by {other} and {node}");
                }
            }
        }
        Ok(all)
    };
    wait_for(
        "the 80 remaining nodes served, the 20 gone",
        Duration::from_mins(2),
        || {
            let all = check()?;
            let served = all.values().filter(|c| c.len() == 1).count();
            if all.len() == 80 && served == 80 {
                Ok(())
            } else {
                Err(format!("{} CiliumNodes, {served} served", all.len()))
            }
        },
    );
    faults.clear();
    // Nothing leaked: exactly the live nodes' blocks are in use.
    wait_for("80 blocks in use", Duration::from_secs(30), || {
        let in_use = op.metric("weft_operator_ipam_pool_blocks{pool=\"cluster-pool\",family=\"ipv4\",state=\"in-use\"}");
        if in_use == Some(80.0) {
            Ok(())
        } else {
            Err(format!("{in_use:?}"))
        }
    });
    check().expect("no block shared");
    assert!(
        cluster
            .emu
            .requests()
            .count_code(Verb::Patch, "ciliumnodes", 500)
            > 0,
        "faults were injected"
    );
}

fn op_ready(cluster: &Cluster) {
    cluster.add_node("first", &json!({}));
    wait_for("the operator to serve", Duration::from_secs(20), || {
        if cluster.pod_cidrs()["first"].len() == 1 {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    cluster.emu.remove("nodes", None, "first");
    wait_for(
        "first's CiliumNode deleted",
        Duration::from_secs(20),
        || {
            cluster
                .cilium_node("first")
                .map_or(Ok(()), |_| Err("still there".into()))
        },
    );
}

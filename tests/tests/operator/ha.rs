//! High availability: two replicas elect one leader through the Lease; only it writes; a
//! SIGKILLed leader is replaced within the lease duration while 200 CiliumNodes are being
//! allocated, and no block is ever held by two nodes; a leader that cannot renew exits
//! before its lease can pass to another; a SIGTERMed leader hands over at once.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use serde_json::json;
use weft_tests::{
    kube::{Answer, Verb},
    operator::Operator,
};

use super::{Cluster, wait_for};

const LEASE: Duration = Duration::from_secs(4);
const TIMING: [&str; 6] = [
    "--leader-election-lease-duration",
    "4s",
    "--leader-election-renew-deadline",
    "3s",
    "--leader-election-retry-period",
    "500ms",
];
const ACQUIRED: &str = "acquired the leader-election lease";

fn replica(cluster: &Cluster, name: &str) -> Operator {
    let mut flags = vec!["--cluster-pool-ipv4-cidr", "10.100.0.0/16"];
    flags.extend(TIMING);
    let mut op = Operator::new(&cluster.kubeconfig, &flags);
    op.env.push(("POD_NAME".into(), name.into()));
    op.spawn();
    op
}

/// No block on two nodes; the blocks per node.
fn assert_no_block_shared(cluster: &Cluster) -> BTreeMap<String, Vec<String>> {
    let all = cluster.pod_cidrs();
    let mut owner: BTreeMap<&String, &String> = BTreeMap::new();
    for (node, cidrs) in &all {
        for cidr in cidrs {
            if let Some(other) = owner.insert(cidr, node) {
                panic!("{cidr} is held by {other} and {node}");
            }
        }
    }
    all
}

fn holder(cluster: &Cluster) -> String {
    cluster
        .emu
        .get("leases", Some("kube-system"), "weft-operator-resource-lock")
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[test]
fn a_killed_leader_is_replaced_while_200_nodes_are_allocated() {
    let cluster = Cluster::start();
    let mut a = replica(&cluster, "op-a");
    a.wait_log(ACQUIRED, Duration::from_secs(20));
    let mut b = replica(&cluster, "op-b");
    b.wait_log(
        "waiting to acquire the leader-election lease",
        Duration::from_secs(20),
    );
    assert!(
        holder(&cluster).starts_with("op-a-"),
        "{}",
        holder(&cluster)
    );
    assert_eq!(b.metric("weft_operator_leader"), Some(0.0));
    assert_eq!(a.metric("weft_operator_leader"), Some(1.0));

    let creator = {
        let emu_nodes: Vec<String> = (0..200).map(|i| format!("node-{i:03}")).collect();
        let cluster_ref = &cluster;
        std::thread::scope(|s| {
            s.spawn(move || {
                for name in &emu_nodes {
                    cluster_ref.add_cilium_node(name, &json!({}));
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
            // Kill the leader once some nodes are served, while the rest are still coming.
            wait_for("the first 40 nodes served", Duration::from_secs(30), || {
                let served = cluster
                    .pod_cidrs()
                    .values()
                    .filter(|c| !c.is_empty())
                    .count();
                if served >= 40 {
                    Ok(())
                } else {
                    Err(format!("{served} served"))
                }
            });
            a.kill();
            Instant::now()
        })
    };
    b.wait_log(ACQUIRED, LEASE * 3);
    let took = creator.elapsed();
    // The lease may have been renewed just before the kill; then a retry period with jitter.
    assert!(
        took <= LEASE + Duration::from_millis(500 * 22 / 10) + Duration::from_secs(1),
        "took {took:?}"
    );
    assert!(holder(&cluster).starts_with("op-b-"));
    wait_for("all 200 nodes served", Duration::from_mins(1), || {
        let all = assert_no_block_shared(&cluster);
        let served = all.values().filter(|c| c.len() == 1).count();
        if served == 200 {
            Ok(())
        } else {
            Err(format!("{served} served"))
        }
    });
    assert_no_block_shared(&cluster);
    assert_eq!(
        b.metric(
            "weft_operator_ipam_pool_blocks{pool=\"cluster-pool\",family=\"ipv4\",state=\"in-use\"}"
        ),
        Some(200.0),
        "no block leaked"
    );
    eprintln!("leader replaced {took:?} after the SIGKILL");
}

#[test]
fn a_leader_that_cannot_renew_stops_before_the_lease_passes() {
    let cluster = Cluster::start();
    let mut a = replica(&cluster, "op-a");
    a.wait_log(ACQUIRED, Duration::from_secs(20));
    let mut b = replica(&cluster, "op-b");
    b.wait_log(
        "waiting to acquire the leader-election lease",
        Duration::from_secs(20),
    );
    // From now on every lease write fails: neither can renew or take over.
    cluster
        .emu
        .faults()
        .inject_ratio(Some(Verb::Update), "leases", 100, Answer::Internal);
    let cut = Instant::now();
    assert_eq!(a.wait_exit(LEASE * 3), Some(1), "{}", a.log());
    let exited = cut.elapsed();
    assert!(a.log().contains("leader election lost"), "{}", a.log());
    // It gave up within the renew deadline (3 s) plus one attempt, before the 4 s lease ran out.
    assert!(exited < LEASE, "exited after {exited:?}");
    // The other replica takes over once writes work again.
    cluster.emu.faults().clear();
    b.wait_log(ACQUIRED, LEASE * 3);
    cluster.add_cilium_node("late", &json!({}));
    wait_for("the new leader to serve", Duration::from_secs(20), || {
        if cluster.pod_cidrs()["late"].len() == 1 {
            Ok(())
        } else {
            Err(format!("{:?}", cluster.pod_cidrs()))
        }
    });
}

#[test]
fn a_stopped_leader_hands_over_at_once() {
    let cluster = Cluster::start();
    let mut a = replica(&cluster, "op-a");
    a.wait_log(ACQUIRED, Duration::from_secs(20));
    let mut b = replica(&cluster, "op-b");
    b.wait_log(
        "waiting to acquire the leader-election lease",
        Duration::from_secs(20),
    );
    let stop = Instant::now();
    assert_eq!(a.stop(), Some(0), "{}", a.log());
    assert!(
        a.log().contains("released the leader-election lease"),
        "{}",
        a.log()
    );
    b.wait_log(ACQUIRED, LEASE * 3);
    // Released: no need to wait for the lease to run out.
    assert!(stop.elapsed() < LEASE, "took {:?}", stop.elapsed());
}

//! Multi-pool mode: the agents ask for addresses in `spec.ipam.pools.requested`, the operator
//! carves pool blocks into `spec.ipam.pools.allocated` as the demand grows and takes back the
//! blocks the agents release; pods select pools by annotation and reach each other across
//! nodes and pools; and a pool's old CIDR is retired with `reservedRanges` while its pods keep
//! their addresses.

use std::{collections::BTreeSet, time::Duration};

use ipnet::IpNet;
use serde_json::json;
use weft_tests::{agent::Agent, operator::Operator, require_root};

use super::{Lan, all_reach_each_other, allocated, in_cidr, operator_error, record, requested};
use crate::{del, wait_for};

/// Usable addresses of a `/28` block (neither the first nor the last address).
const PER_BLOCK: u64 = 14;

const POOL_ANNOTATION: &str = "ipam.cilium.io/ip-pool";

/// The operator's count of the default pool's IPv4 blocks held by nodes.
const BLOCKS_IN_USE: &str =
    "weft_operator_ipam_pool_blocks{pool=\"default\",family=\"ipv4\",state=\"in-use\"}";
/// The operator's count of the default pool's IPv4 blocks it can still hand out.
const BLOCKS_FREE: &str =
    "weft_operator_ipam_pool_blocks{pool=\"default\",family=\"ipv4\",state=\"free\"}";

/// The operator's count of CiliumNode patches it carried out (`{part="spec"|"status"}`).
const WRITES: &str = "weft_operator_ciliumnode_writes_total";

fn operator_flags(extra: &[&'static str]) -> Vec<&'static str> {
    let mut flags = vec!["--ipam", "multi-pool", "--leader-election=false"];
    flags.extend_from_slice(extra);
    flags
}

/// Spawn multi-pool agents on nodes `1..=count` with `pre_allocation`; wait until each serves.
fn agents(lan: &Lan, count: usize, pre_allocation: &str) -> Vec<Agent> {
    let mut agents: Vec<Agent> = (1..=count)
        .map(|n| {
            lan.agent(
                n,
                &[
                    "--ipam",
                    "multi-pool",
                    "--ipam-multi-pool-pre-allocation",
                    pre_allocation,
                ],
            )
        })
        .collect();
    for agent in &mut agents {
        agent.wait_ready(Duration::from_secs(30));
    }
    agents
}

#[test]
fn blocks_follow_the_demand_of_forty_pods_and_go_back_when_they_are_deleted() {
    require_root();
    let lan = Lan::new(1);
    let op = lan.operator(&operator_flags(&[
        "--auto-create-cilium-pod-ip-pools",
        "default=ipv4-cidrs:10.90.0.0/24;ipv4-mask-size:28",
    ]));
    let agents = agents(&lan, 1, "default=4");
    let agent = &agents[0];

    // (requested, blocks) after each ADD.
    let mut steps: Vec<(u64, usize)> = Vec::new();
    let mut pods = Vec::new();
    for i in 0..40 {
        pods.push(lan.pod(agent, "web", &format!("p{i}"), 1, &json!({})));
        let node = lan.cilium_node("node-1");
        steps.push((
            requested(&node, "default"),
            allocated(&node, "default").len(),
        ));
    }
    let ips: BTreeSet<_> = pods.iter().map(|p| p.ips[0]).collect();
    assert_eq!(ips.len(), 40, "every pod its own address");

    // The operator covers the final demand exactly, with blocks every pod's address is in.
    let mut blocks: Vec<IpNet> = Vec::new();
    wait_for(
        "allocated to cover requested",
        Duration::from_secs(30),
        || {
            let node = lan.cilium_node("node-1");
            let want = requested(&node, "default");
            blocks = allocated(&node, "default");
            if want >= 41 && blocks.len() as u64 == want.div_ceil(PER_BLOCK) {
                Ok(())
            } else {
                Err(format!("requested {want}, allocated {blocks:?}"))
            }
        },
    );
    for pod in &pods {
        assert!(
            blocks.iter().any(|b| b.contains(&pod.ips[0])),
            "{} {:?} outside {blocks:?}",
            pod.name,
            pod.ips
        );
    }
    // Block by block: never more than the demand of the moment, never fewer than before.
    for (want, held) in &steps {
        assert!(
            *held as u64 <= want.div_ceil(PER_BLOCK),
            "more blocks than requested: {steps:?}"
        );
    }
    assert!(
        steps.windows(2).all(|w| w[0].1 <= w[1].1),
        "allocated never shrinks while pods are added: {steps:?}"
    );
    let counts: BTreeSet<usize> = steps.iter().map(|s| s.1).collect();
    assert!(counts.len() >= 3, "allocated grew in steps: {steps:?}");
    assert_eq!(operator_error(&lan.cilium_node("node-1")), "");
    let held = u32::try_from(blocks.len()).expect("a few blocks");
    assert_eq!(lan.metric(&op, BLOCKS_IN_USE), Some(f64::from(held)));

    // The pods go: the agent hands back every block beyond its pre-allocation, and the
    // operator takes them back into the pool.
    for pod in &pods {
        del(agent, pod);
    }
    wait_for(
        "allocated to shrink back to one block",
        Duration::from_mins(1),
        || {
            let node = lan.cilium_node("node-1");
            let held = allocated(&node, "default");
            let pool_in_use = lan.metric(&op, BLOCKS_IN_USE);
            if held.len() == 1
                && requested(&node, "default") <= PER_BLOCK
                && pool_in_use == Some(1.0)
            {
                Ok(())
            } else {
                Err(format!(
                    "requested {}, allocated {held:?}, pool blocks in use {pool_in_use:?}",
                    requested(&node, "default")
                ))
            }
        },
    );
}

#[test]
fn pods_of_two_pools_on_two_nodes_reach_each_other() {
    require_root();
    let lan = Lan::new(2);
    let (default_cidr, blue_cidr) = ("10.91.0.0/24", "10.92.0.0/24");
    lan.cluster.add_pool("default", default_cidr, 28);
    lan.cluster.add_pool("blue", blue_cidr, 28);
    lan.cluster.emu.put(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "blue-ns", "annotations": {POOL_ANNOTATION: "blue"}},
    }));
    let _op = lan.operator(&operator_flags(&[]));
    // Only the default pool is pre-allocated: blue's blocks are carved on demand.
    let agents = agents(&lan, 2, "default=4");
    let blue = json!({POOL_ANNOTATION: "blue"});
    let d1 = lan.pod(&agents[0], "web", "d1", 1, &json!({}));
    let b1 = lan.pod(&agents[0], "web", "b1", 1, &blue);
    let d2 = lan.pod(&agents[1], "web", "d2", 2, &json!({}));
    let b2 = lan.pod(&agents[1], "blue-ns", "b2", 2, &json!({}));
    for (pod, cidr) in [
        (&d1, default_cidr),
        (&d2, default_cidr),
        (&b1, blue_cidr),
        (&b2, blue_cidr),
    ] {
        assert!(
            in_cidr(pod, cidr),
            "{} got {:?}, not from {cidr}",
            pod.name,
            pod.ips
        );
    }
    for n in 1..=2 {
        let node = lan.cilium_node(&super::node_name(n));
        for pool in ["default", "blue"] {
            assert_eq!(
                allocated(&node, pool).len(),
                1,
                "{pool} on node {n}: {node}"
            );
        }
    }
    all_reach_each_other(&[&d1, &b1, &d2, &b2], Duration::from_secs(30));
}

#[test]
fn an_old_cidr_reserved_in_a_v2_pool_gets_no_new_blocks_while_its_pods_keep_theirs() {
    require_root();
    let lan = Lan::new(2);
    let (old, new) = ("10.93.0.0/24", "10.94.0.0/24");
    let pool = |reserve: bool| {
        let mut spec = json!({"ipv4": {"cidrs": [old, new], "maskSize": 29}});
        if reserve {
            spec["ipv4"]["pool"] = json!([{
                "cidr": old,
                "reservedRanges": [{"start": "10.93.0.0", "end": "10.93.0.255"}],
            }]);
        }
        json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumPodIPPool",
            "metadata": {"name": "default"}, "spec": spec,
        })
    };
    lan.cluster.emu.put(pool(false));
    let mut op = lan.operator(&operator_flags(&[]));
    // Pre-allocation 1: a node asks for one address more than it uses, so its first /29 (six
    // addresses) serves the router and five pods before a second block is needed.
    let agents = agents(&lan, 2, "default=1");

    // Each node's first block comes from the old CIDR; the router and four pods use it.
    let mut old_pods = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        for k in 1..=4 {
            old_pods.push(lan.pod(
                agent,
                "web",
                &format!("old-{}-{k}", i + 1),
                i + 1,
                &json!({}),
            ));
        }
    }
    let mut old_blocks = Vec::new();
    for n in 1..=2 {
        let name = super::node_name(n);
        wait_for(
            "each node to hold exactly one block",
            Duration::from_secs(20),
            || {
                let node = lan.cilium_node(&name);
                let held = allocated(&node, "default");
                (held.len() == 1 && requested(&node, "default") == 6)
                    .then_some(())
                    .ok_or_else(|| {
                        format!(
                            "{name}: requested {}, allocated {held:?}",
                            requested(&node, "default")
                        )
                    })
            },
        );
        old_blocks.push(allocated(&lan.cilium_node(&name), "default")[0]);
    }

    // The old CIDR is retired: reserved whole. Once the operator applied it (the free blocks
    // are only the new CIDR's 32), the blocks the nodes need next come from the new CIDR.
    lan.cluster.emu.put(pool(true));
    wait_for(
        "the operator to apply the reserved range",
        Duration::from_secs(20),
        || {
            let got = lan.metric(&op, BLOCKS_FREE);
            (got == Some(32.0))
                .then_some(())
                .ok_or_else(|| format!("{got:?}"))
        },
    );
    // A fifth pod per node takes the last address of the old block; the pods after it get
    // addresses from a block of the new CIDR.
    for (i, agent) in agents.iter().enumerate() {
        old_pods.push(lan.pod(agent, "web", &format!("old-{}-5", i + 1), i + 1, &json!({})));
    }
    for pod in &old_pods {
        assert!(in_cidr(pod, old), "{} got {:?}", pod.name, pod.ips);
    }
    let new1 = lan.pod(&agents[0], "web", "new-1", 1, &json!({}));
    let new2 = lan.pod(&agents[1], "web", "new-2", 2, &json!({}));
    for pod in [&new1, &new2] {
        assert!(
            in_cidr(pod, new),
            "{} got {:?}, not from {new}",
            pod.name,
            pod.ips
        );
    }
    let old_net: IpNet = old.parse().expect("cidr");
    for (n, old_block) in (1..=2).zip(&old_blocks) {
        let node = lan.cilium_node(&super::node_name(n));
        let held = allocated(&node, "default");
        assert!(
            held.contains(old_block),
            "node {n} kept its old block: {held:?}"
        );
        assert_eq!(
            held.iter().filter(|b| old_net.contains(*b)).count(),
            1,
            "no new old block on node {n}: {held:?}"
        );
        assert_eq!(operator_error(&node), "", "node {n}");
    }

    // Old and new pods reach each other, across the nodes.
    let (o1, o2) = (&old_pods[0], &old_pods[4]);
    all_reach_each_other(&[o1, o2, &new1, &new2], Duration::from_secs(30));

    // The operator restarts mid-migration and changes nothing.
    restart_changes_nothing(&lan, &mut op);
    all_reach_each_other(&[o1, &new2], Duration::from_secs(10));
}

/// Restart the operator of the migration test: it takes the blocks back as the nodes hold
/// them, those in the reserved range included, keeps the range reserved (the free blocks are
/// the new CIDR's 32 less the two held), and writes nothing: no error, no block moved.
fn restart_changes_nothing(lan: &Lan, op: &mut Operator) {
    let names = [super::node_name(1), super::node_name(2)];
    let before: Vec<Vec<IpNet>> = names
        .iter()
        .map(|n| allocated(&lan.cilium_node(n), "default"))
        .collect();
    let ((), seen) = record(
        || {
            let mut seen = Vec::new();
            for (name, held) in names.iter().zip(&before) {
                let node = lan.cilium_node(name);
                let error = operator_error(&node);
                if !error.is_empty() {
                    seen.push(format!("{name}: error {error}"));
                }
                let now = allocated(&node, "default");
                if now != *held {
                    seen.push(format!("{name}: allocated {now:?}"));
                }
            }
            seen
        },
        || {
            assert_eq!(op.stop(), Some(0), "{}", op.log());
            lan.respawn(op);
            wait_for(
                "the restarted operator to restore the blocks",
                Duration::from_secs(20),
                || {
                    // (Its listeners are logged before this line: the old ones are gone.)
                    let restored = op.log().matches("existing allocations restored").count();
                    if restored < 2 {
                        return Err("not restored yet".to_owned());
                    }
                    let blocks = (lan.metric(op, BLOCKS_IN_USE), lan.metric(op, BLOCKS_FREE));
                    (blocks == (Some(4.0), Some(30.0)))
                        .then_some(())
                        .ok_or_else(|| format!("(in use, free) {blocks:?}"))
                },
            );
            // The writes the restore queued (it logs how many) have landed.
            let log = op.log();
            let queued: f64 = log
                .lines()
                .rfind(|l| l.contains("existing allocations restored"))
                .and_then(|l| {
                    l.split_once(" writes=")?
                        .1
                        .split_whitespace()
                        .next()?
                        .parse()
                        .ok()
                })
                .unwrap_or_else(|| panic!("the restore line names no writes count:\n{log}"));
            wait_for(
                "the restore's writes to land",
                Duration::from_secs(20),
                || {
                    let written: f64 = ["spec", "status"]
                        .iter()
                        .filter_map(|part| lan.metric(op, &format!("{WRITES}{{part=\"{part}\"}}")))
                        .sum();
                    (written >= queued)
                        .then_some(())
                        .ok_or_else(|| format!("{written} of {queued} written"))
                },
            );
        },
    );
    assert!(seen.is_empty(), "the restart changed the nodes: {seen:?}");
}

//! The order of the operator's CiliumNode writes (spec §7, as Cilium writes them): the status
//! (`status.eni.enis`) before the spec (`spec.ipam.pool`), so that an agent which sees an
//! address in the pool finds its ENI in the status. Half the status writes fail (500) while
//! the node fills, which holds a status write back for a second each time: at no moment is an
//! address in the pool whose ENI the status lacks.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use serde_json::Value;
use weft_tests::{
    ec2::Scenario,
    kube::{Answer, Verb},
};

use super::{Aws, pool};

/// The ENIs the pool's addresses belong to that `status.eni.enis` does not show.
fn unshown(node: &Value) -> BTreeSet<String> {
    let shown = &node["status"]["eni"]["enis"];
    (node["spec"]["ipam"]["pool"]
        .as_object()
        .into_iter()
        .flatten())
    .filter_map(|(_, owner)| owner["resource"].as_str())
    .filter(|eni| shown.get(eni).is_none())
    .map(str::to_owned)
    .collect()
}

#[test]
fn the_status_is_written_before_the_spec() {
    let aws = Aws::with(Scenario::example());
    aws.cluster.emu.faults().inject_ratio(
        Some(Verb::Patch),
        "ciliumnodes/status",
        50,
        Answer::Internal,
    );
    aws.add_node("node-w");
    let op = aws.operator(&[]);
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let node = aws.node("node-w");
        let missing = unshown(&node);
        assert!(
            missing.is_empty(),
            "the pool names {missing:?}, which the status lacks: {node}"
        );
        if pool(&node).len() == 8 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node-w not filled: {node}\n--- operator ---\n{}",
            op.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    aws.cluster.emu.faults().clear();
}

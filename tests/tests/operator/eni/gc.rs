//! The ENI GC with a short `--eni-gc-interval`: a detached ENI carrying the cluster's GC tags
//! (a leak) is found, then deleted at the next round, and both are logged; a detached ENI
//! without the tags, and one tagged for another cluster, are left alone round after round; the
//! node served meanwhile keeps its ENI (tagged too, but attached).
//!
//! A leaked ENI belongs to no node, so there is no CiliumNode whose `operator-status` or
//! Event could carry it: the log lines (and EC2's own record) are what says so.

use std::{collections::BTreeMap, time::Duration};

use weft_tests::ec2::{EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET, Scenario, Tags};

use super::{Aws, log_lines};
use crate::wait_for;

const LEAKED: &str = "eni-0c000000000000001";
const UNTAGGED: &str = "eni-0c000000000000002";
const OTHER_CLUSTER: &str = "eni-0c000000000000003";

fn gc_tags(cluster: &str) -> Tags {
    BTreeMap::from([
        ("io.cilium/cilium-managed".to_owned(), "true".to_owned()),
        ("io.cilium/cluster-name".to_owned(), cluster.to_owned()),
    ])
}

/// GC listings so far (DescribeNetworkInterfaces of detached ENIs).
fn gc_listings(aws: &Aws) -> usize {
    (aws.ec2.log().of("DescribeNetworkInterfaces").iter())
        .filter(|r| r.params.values().any(|v| v == "available"))
        .count()
}

#[test]
fn a_leaked_tagged_eni_is_deleted_and_an_untagged_one_left_alone() {
    let scenario = Scenario::example()
        .detached_eni(LEAKED, EXAMPLE_POD_SUBNET, gc_tags("weft-e2e"))
        .detached_eni(UNTAGGED, EXAMPLE_POD_SUBNET, Tags::new())
        .detached_eni(OTHER_CLUSTER, EXAMPLE_NODE_SUBNET, gc_tags("another"));
    let aws = Aws::with(scenario);
    aws.add_node("node-g");
    let op = aws.operator(&["--eni-gc-interval", "2s", "--cluster-name", "weft-e2e"]);
    let pool = aws.wait_pool("node-g", 8, Duration::from_mins(1), &op);
    wait_for(
        "the leaked ENI to be deleted",
        Duration::from_secs(30),
        || {
            aws.ec2
                .eni(LEAKED)
                .is_none()
                .then_some(())
                .ok_or_else(|| op.log())
        },
    );
    assert!(
        !log_lines(&op, &["found detached ENIs carrying the GC tags", LEAKED]).is_empty(),
        "found, logged:\n{}",
        op.log()
    );
    // EC2 forgets the ENI before the operator has its answer and logs it.
    wait_for("the deletion to be logged", Duration::from_secs(10), || {
        (!log_lines(&op, &["deleted a leaked ENI", LEAKED]).is_empty())
            .then_some(())
            .ok_or_else(|| op.log())
    });
    // Two more rounds: the others are still there.
    let listed = gc_listings(&aws);
    wait_for("two more GC rounds", Duration::from_secs(20), || {
        (gc_listings(&aws) >= listed + 2)
            .then_some(())
            .ok_or_else(|| format!("{} listings", gc_listings(&aws)))
    });
    assert!(
        aws.ec2.eni(UNTAGGED).is_some(),
        "the untagged ENI is left alone"
    );
    assert!(
        aws.ec2.eni(OTHER_CLUSTER).is_some(),
        "another cluster's ENI is left alone"
    );
    let deletes: Vec<Option<String>> = (aws.ec2.log().of("DeleteNetworkInterface").iter())
        .map(|r| r.param("NetworkInterfaceId").map(str::to_owned))
        .collect();
    assert_eq!(
        deletes,
        vec![Some(LEAKED.to_owned())],
        "only the leak was deleted"
    );
    let enis = aws.ec2.instance_enis(EXAMPLE_INSTANCE);
    assert_eq!(enis.len(), 2, "node-g keeps its ENI: {enis:?}");
    assert_eq!(
        enis[1]
            .tags
            .get("io.cilium/cluster-name")
            .map(String::as_str),
        Some("weft-e2e"),
        "the node's ENI carries the GC tags too: {enis:?}"
    );
    assert_eq!(super::pool(&aws.node("node-g")), pool, "node-g as it was");
}

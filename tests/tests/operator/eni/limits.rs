//! The instance type's limit: an m5.large (3 ENIs × 10 addresses) with `first-interface-index:
//! 1` holds at most 2 × 9 = 18 addresses. As its usage grows the node is topped up through a
//! second ENI to those 18; with all 18 in use it wants 8 more, and the operator says why it
//! gets none (a log line and `operator-status`), sends EC2 nothing for it over a bounded
//! window (a full resync and another node served in it), and serves the other node.

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;
use weft_tests::ec2::{EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, Scenario, Tags};

use super::{Aws, log_lines};
use crate::wait_for;

const OTHER: &str = "i-0a000000000000002";

/// Actions that change an instance's ENIs or addresses.
const MUTATING: &[&str] = &[
    "CreateNetworkInterface",
    "AttachNetworkInterface",
    "ModifyNetworkInterfaceAttribute",
    "AssignPrivateIpAddresses",
    "UnassignPrivateIpAddresses",
    "DeleteNetworkInterface",
];

#[test]
fn the_instance_type_limit_stops_allocation_without_a_storm_and_says_why() {
    let aws = Aws::with(Scenario::example().instance(
        OTHER,
        "m5.large",
        EXAMPLE_NODE_SUBNET,
        Tags::new(),
    ));
    aws.add_node("node-a");
    let op = aws.operator(&[]);
    let held = aws.wait_pool("node-a", 8, Duration::from_mins(1), &op);
    // Usage grows: 8 in use, then 16; the node is topped up through a second ENI to the 18
    // the type allows.
    aws.set_used("node-a", &held);
    let held = aws.wait_pool("node-a", 16, Duration::from_mins(1), &op);
    aws.set_used("node-a", &held);
    let held = aws.wait_pool("node-a", 18, Duration::from_mins(1), &op);
    let enis = aws.ec2.instance_enis(EXAMPLE_INSTANCE);
    assert_eq!(enis.len(), 3, "the primary and two new ENIs: {enis:?}");
    let eni_ids: BTreeSet<String> = enis.iter().map(|e| e.id.clone()).collect();
    // All 18 in use: 8 more are wanted, none fits.
    aws.set_used("node-a", &held);
    let error = aws.wait_error("node-a", &["m5.large", "18"], Duration::from_secs(30), &op);
    assert!(
        error.contains("limit"),
        "operator-status says it is the type's limit: {error}"
    );
    let lines = log_lines(&op, &["node-a", "limit"]);
    assert!(!lines.is_empty(), "a log line says why:\n{}", op.log());
    // The window: from here to the next full resync and another node served.
    let start = aws.ec2.requests().len();
    let resyncs = aws.ec2.count("DescribeSubnets");
    for i in 0..5 {
        // The node changes (as an agent's writes do): each change looks at it again.
        let mut node = aws.node("node-a");
        node["metadata"]["annotations"] = json!({"weft.test/poke": i.to_string()});
        aws.cluster.emu.put(node);
        std::thread::sleep(Duration::from_millis(200));
    }
    aws.add_node_with("node-b", OTHER, &json!({}));
    aws.wait_pool("node-b", 8, Duration::from_mins(1), &op);
    wait_for("the next full resync", Duration::from_secs(90), || {
        (aws.ec2.count("DescribeSubnets") > resyncs)
            .then_some(())
            .ok_or_else(|| "no full resync yet".to_owned())
    });
    let window: Vec<_> = aws.ec2.requests().split_off(start);
    let on_node_a: Vec<_> = (window.iter())
        .filter(|r| MUTATING.contains(&r.action.as_str()))
        .filter(|r| {
            r.param("InstanceId") == Some(EXAMPLE_INSTANCE)
                || r.param("NetworkInterfaceId")
                    .is_some_and(|id| eni_ids.contains(id))
        })
        .map(|r| &r.action)
        .collect();
    assert!(
        on_node_a.is_empty(),
        "nothing is asked of EC2 for node-a at its limit: {on_node_a:?}"
    );
    // node-b's ENI (create, attach, mark), the instance reads after its rounds, and a full
    // resync (6 listings): far below a storm.
    assert!(
        window.len() <= 30,
        "{} requests in the window: {:?}",
        window.len(),
        window.iter().map(|r| &r.action).collect::<Vec<_>>()
    );
    assert_eq!(
        aws.ec2.instance_enis(EXAMPLE_INSTANCE).len(),
        3,
        "node-a as it was"
    );
    assert_eq!(
        super::pool(&aws.node("node-a")),
        held,
        "node-a's pool as it was"
    );
}

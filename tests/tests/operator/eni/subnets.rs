//! An exhausted subnet: both subnets of the node's zone have no free address (and one of
//! another zone has), so the node gets no new ENI. The operator says which subnets it
//! considered and why it passed over each (a log line and `operator-status`), creates no ENI
//! for it (nothing leaked), serves a node of the other zone, and serves the first one once its
//! subnet has room again.

use std::time::Duration;

use serde_json::json;
use weft_tests::ec2::{
    EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET, EXAMPLE_VPC, Scenario, Tags,
};

use super::{Aws, log_lines};

const ZONE_B_SUBNET: &str = "subnet-0b000000000000001";
const OTHER: &str = "i-0b000000000000001";

#[test]
fn an_exhausted_subnet_names_each_subnet_considered_and_why_it_was_passed_over() {
    let scenario = Scenario::example()
        .subnet(
            ZONE_B_SUBNET,
            EXAMPLE_VPC,
            "10.0.2.0/24",
            "us-east-1b",
            Tags::new(),
        )
        .instance(OTHER, "m5.large", ZONE_B_SUBNET, Tags::new());
    let aws = Aws::with(scenario);
    aws.ec2.fill_subnet(EXAMPLE_NODE_SUBNET, 0);
    aws.ec2.fill_subnet(EXAMPLE_POD_SUBNET, 0);
    aws.add_node("node-a");
    aws.add_node_with(
        "node-b",
        OTHER,
        &json!({"availability-zone": "us-east-1b", "node-subnet-id": ZONE_B_SUBNET}),
    );
    let op = aws.operator(&[]);
    let error = aws.wait_error(
        "node-a",
        &["No matching subnet available", "considered"],
        Duration::from_secs(30),
        &op,
    );
    for expected in [
        format!("{EXAMPLE_NODE_SUBNET}: no free address"),
        format!("{EXAMPLE_POD_SUBNET}: no free address"),
        format!("{ZONE_B_SUBNET}: another availability zone"),
    ] {
        assert!(error.contains(&expected), "{expected:?} in {error}");
    }
    let lines = log_lines(
        &op,
        &["node-a", "No matching subnet available", "considered"],
    );
    assert!(!lines.is_empty(), "a log line says so:\n{}", op.log());
    // The other zone's node is served meanwhile.
    aws.wait_pool("node-b", 8, Duration::from_mins(1), &op);
    let creates = aws.ec2.log().of("CreateNetworkInterface");
    assert!(
        creates
            .iter()
            .all(|r| r.param("SubnetId") == Some(ZONE_B_SUBNET)),
        "no ENI is created in a full subnet: {creates:?}"
    );
    assert_eq!(
        aws.ec2.instance_enis(EXAMPLE_INSTANCE).len(),
        1,
        "node-a's instance as it was"
    );
    assert!(
        aws.ec2.enis().iter().all(|e| e.attachment.is_some()),
        "no ENI leaked: {:?}",
        aws.ec2.enis()
    );
    assert!(super::pool(&aws.node("node-a")).is_empty());
    // Room again: the next full resync sees it and node-a is served, its error gone.
    aws.ec2.release_subnet_fillers(EXAMPLE_NODE_SUBNET);
    aws.wait_pool("node-a", 8, Duration::from_secs(150), &op);
    crate::wait_for("node-a's error to go", Duration::from_secs(30), || {
        let error = aws.cluster.operator_error("node-a");
        error.is_empty().then_some(()).ok_or(error)
    });
}

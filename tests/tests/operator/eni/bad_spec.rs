//! Garbage in `spec.eni`: tags that are not a map of strings, a negative
//! `first-interface-index`, subnet IDs EC2 does not know. Each node's `operator-status` names
//! the field (and the log says so), the node is left as it was (no ENI created or address
//! assigned on its instance, its pool empty), and a good node beside them is served.

use std::time::Duration;

use serde_json::{Value, json};
use weft_tests::ec2::{EXAMPLE_NODE_SUBNET, Scenario, Tags};

use super::{Aws, log_lines};

const GOOD: (&str, &str) = ("node-ok", "i-0e000000000000001");

/// (node, instance, `spec.eni` keys, the field its error names, a word of the problem).
fn bad() -> Vec<(
    &'static str,
    &'static str,
    Value,
    &'static str,
    &'static str,
)> {
    vec![
        (
            "node-tags",
            "i-0e000000000000002",
            json!({"subnet-tags": {"weft": 5}}),
            "spec.eni.subnet-tags",
            "string",
        ),
        (
            "node-index",
            "i-0e000000000000003",
            json!({"first-interface-index": -1}),
            "spec.eni.first-interface-index",
            "-1",
        ),
        (
            "node-subnets",
            "i-0e000000000000004",
            json!({"subnet-ids": ["subnet-0f00000000000dead"]}),
            "spec.eni.subnet-ids",
            "subnet-0f00000000000dead",
        ),
    ]
}

const MUTATING: &[&str] = &[
    "CreateNetworkInterface",
    "AttachNetworkInterface",
    "AssignPrivateIpAddresses",
];

#[test]
fn garbage_in_spec_eni_names_the_field_and_other_nodes_are_served() {
    let mut scenario =
        Scenario::example().instance(GOOD.1, "m5.large", EXAMPLE_NODE_SUBNET, Tags::new());
    for (_, instance, ..) in bad() {
        scenario = scenario.instance(instance, "m5.large", EXAMPLE_NODE_SUBNET, Tags::new());
    }
    let aws = Aws::with(scenario);
    for (name, instance, eni, ..) in bad() {
        aws.add_node_with(name, instance, &eni);
    }
    aws.add_node_with(GOOD.0, GOOD.1, &json!({}));
    let op = aws.operator(&[]);
    aws.wait_pool(GOOD.0, 8, Duration::from_mins(1), &op);
    for (name, instance, _, field, problem) in bad() {
        let error = aws.wait_error(name, &[field, problem], Duration::from_secs(30), &op);
        assert!(
            !log_lines(&op, &[name, field]).is_empty(),
            "{name}: the log names {field} ({error}):\n{}",
            op.log()
        );
        let enis = aws.ec2.instance_enis(instance);
        assert_eq!(enis.len(), 1, "{name}: its instance as it was: {enis:?}");
        assert_eq!(enis[0].ips.len(), 1, "{name}: nothing assigned: {enis:?}");
        let primary = enis[0].id.clone();
        let asked: Vec<String> = (aws.ec2.requests().into_iter())
            .filter(|r| MUTATING.contains(&r.action.as_str()))
            .filter(|r| {
                r.param("InstanceId") == Some(instance)
                    || r.param("NetworkInterfaceId") == Some(primary.as_str())
            })
            .map(|r| r.action)
            .collect();
        assert!(asked.is_empty(), "{name}: EC2 asked {asked:?}");
        assert!(super::pool(&aws.node(name)).is_empty(), "{name}: no pool");
    }
}

//! Node discovery in `eni` mode against the EC2 + IMDS emulator (IMDSv2 required): the agent's
//! CiliumNode gets `spec.instance-id` and `spec.eni.{instance-type, availability-zone, vpc-id,
//! node-subnet-id}` from IMDS (winning over the Node's provider ID); with IMDS refusing the
//! session token, or not there at all, the agent says what it could not read and falls back to
//! the provider ID for the instance and the zone, as before.

use std::time::Duration;

use serde_json::Value;
use weft_tests::{
    ThreadNetNs,
    ec2::{EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_VPC, Ec2Emulator, Scenario},
    require_root,
};

use super::super::{Cluster, wait_for};

/// A provider ID naming another instance and zone than IMDS's, so the test sees which won.
const PROVIDER_ID: &str = "aws:///us-west-2c/i-0fromproviderid";

/// The example estate with IMDSv2 required (a GET without a valid token answers 401).
fn imds_v2_only() -> Ec2Emulator {
    let mut scenario = Scenario::example();
    scenario.imds.require_token = true;
    Ec2Emulator::start(scenario)
}

/// Start an eni agent for `node` reading IMDS at `endpoint`; wait until it seeded the
/// CiliumNode (the `predicate` holds) and return the CiliumNode.
fn seeded(
    cluster: &Cluster,
    node: &str,
    endpoint: &str,
    predicate: impl Fn(&Value) -> bool,
) -> (weft_tests::agent::Agent, Value) {
    cluster.add_node(node, PROVIDER_ID, None);
    let mut agent = cluster.agent(
        node,
        &[
            "--ipam",
            "eni",
            "--enable-health-checking",
            "false",
            "--aws-imds-endpoint",
            endpoint,
        ],
    );
    agent.spawn();
    let doc = wait_for("the seeded CiliumNode", Duration::from_secs(30), || {
        let doc = cluster.cilium_node(node).unwrap_or(Value::Null);
        if predicate(&doc) {
            Ok(doc)
        } else {
            Err(format!("{doc}\n--- agent ---\n{}", agent.log()))
        }
    });
    (agent, doc)
}

#[test]
fn the_cilium_node_is_seeded_from_imds_v2() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let ec2 = imds_v2_only();
    let (agent, doc) = seeded(&cluster, "node-imds", &ec2.url(), |doc| {
        doc["spec"]["eni"]["node-subnet-id"].is_string()
    });
    let spec = &doc["spec"];
    assert_eq!(spec["instance-id"], EXAMPLE_INSTANCE, "{doc}");
    assert_eq!(spec["eni"]["instance-type"], "m5.large", "{doc}");
    assert_eq!(spec["eni"]["availability-zone"], "us-east-1a", "{doc}");
    assert_eq!(spec["eni"]["vpc-id"], EXAMPLE_VPC, "{doc}");
    assert_eq!(spec["eni"]["node-subnet-id"], EXAMPLE_NODE_SUBNET, "{doc}");
    assert_eq!(
        spec["eni"]["first-interface-index"], 0,
        "the keys still seed: {doc}"
    );
    assert!(
        !agent.log().contains("did not answer"),
        "no IMDS warning:\n{}",
        agent.log()
    );
}

/// The instance and zone of [`PROVIDER_ID`], and nothing IMDS alone knows.
fn fell_back(doc: &Value) -> bool {
    doc["spec"]["instance-id"] == "i-0fromproviderid"
        && doc["spec"]["eni"]["availability-zone"] == "us-west-2c"
}

fn assert_fallback(doc: &Value, log: &str) {
    for unset in ["instance-type", "vpc-id", "node-subnet-id"] {
        assert!(
            doc["spec"]["eni"].get(unset).is_none(),
            "{unset} set without IMDS: {doc}"
        );
    }
    assert!(
        log.contains("the EC2 instance metadata service did not answer")
            && log.contains(
                "spec.instance-id, spec.eni.instance-type, spec.eni.availability-zone, \
                 spec.eni.vpc-id, spec.eni.node-subnet-id not read from it"
            ),
        "the warning names what is missing:\n{log}"
    );
}

#[test]
fn imds_refusing_the_token_falls_back_to_the_provider_id() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let ec2 = imds_v2_only();
    // The token PUT is refused; the client then reads without one, which IMDSv2 refuses too.
    ec2.refuse_imds_tokens(Some(403));
    let (mut agent, doc) = seeded(&cluster, "node-notoken", &ec2.url(), fell_back);
    agent.wait_log("did not answer", Duration::from_secs(5));
    assert_fallback(&doc, &agent.log());
    assert!(agent.log().contains("HTTP 401"), "{}", agent.log());
}

#[test]
fn imds_down_falls_back_to_the_provider_id() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    // Nothing listens on port 1: the connection is refused.
    let (mut agent, doc) = seeded(&cluster, "node-noimds", "http://127.0.0.1:1", fell_back);
    agent.wait_log("did not answer", Duration::from_secs(5));
    assert_fallback(&doc, &agent.log());
}

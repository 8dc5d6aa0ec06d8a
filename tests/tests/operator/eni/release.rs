//! The release for 1.20+ agents against the EC2 emulator: the agent (played by the test, as
//! Cilium's 1.20 agent writes it) lowers its pre-allocation and leaves half of the ENI's
//! addresses out of `spec.ipam.pools.allocated`; after `--excess-ip-release-delay` the
//! operator unassigns exactly those from the ENI, keeps the others, and does not top the node
//! up again.

use std::collections::BTreeSet;

use super::*;

/// The secondary addresses `status.eni.enis` shows on the ENI at device index 1.
fn shown_on_eni_1(node: &Value) -> BTreeSet<String> {
    (node["status"]["eni"]["enis"]
        .as_object()
        .into_iter()
        .flatten())
    .filter(|(_, eni)| eni["number"] == 1)
    .flat_map(|(_, eni)| eni["addresses"].as_array().cloned().unwrap_or_default())
    .filter_map(|a| a.as_str().map(str::to_owned))
    .collect()
}

#[test]
fn what_a_1_20_agent_leaves_out_of_allocated_is_unassigned_after_the_delay() {
    let aws = Aws::start(&["weft-eni-base.json", "weft-eni-release.json"]);
    aws.add_node("node-r");
    let mut op = aws.operator(&[
        "--aws-release-excess-ips",
        "--excess-ip-release-delay",
        "2s",
    ]);
    wait_for("node-r to hold 8 addresses", Duration::from_mins(1), || {
        let node = aws.node("node-r");
        (shown_on_eni_1(&node).len() == 8)
            .then_some(())
            .ok_or_else(|| format!("{node}\n--- operator ---\n{}", op.log()))
    });
    let held: Vec<String> = shown_on_eni_1(&aws.node("node-r")).into_iter().collect();
    let (kept, given_back) = held.split_at(4);
    // The 1.20 agent: pre-allocation 4, no pod, and the four addresses it keeps.
    let mut node = aws.node("node-r");
    node["spec"]["ipam"]["pre-allocate"] = json!(4);
    node["spec"]["ipam"]["pools"] = json!({
        "requested": [{"pool": "default", "needed": {"ipv4-addrs": 4}}],
        "allocated": [{
            "pool": "default", "allowFirstIP": true, "allowLastIP": true,
            "cidrs": kept.iter().map(|a| format!("{a}/32")).collect::<Vec<_>>(),
        }],
    });
    aws.cluster.emu.put(node);
    wait_for(
        "the four addresses given back to leave the ENI",
        Duration::from_secs(30),
        || {
            let node = aws.node("node-r");
            let shown = shown_on_eni_1(&node);
            (shown == kept.iter().cloned().collect::<BTreeSet<_>>())
                .then_some(())
                .ok_or_else(|| format!("{shown:?}\n--- operator ---\n{}", op.log()))
        },
    );
    let eni = (aws.ec2.instance_enis(EXAMPLE_INSTANCE).into_iter())
        .find(|e| e.attachment.as_ref().is_some_and(|a| a.device_index == 1))
        .expect("the ENI at index 1");
    let on_ec2: BTreeSet<String> = eni.ips.iter().skip(1).map(ToString::to_string).collect();
    assert_eq!(
        on_ec2,
        kept.iter().cloned().collect::<BTreeSet<_>>(),
        "EC2 holds exactly the kept addresses"
    );
    for address in given_back {
        assert!(!on_ec2.contains(address));
    }
    assert_eq!(
        aws.ec2.log().count("UnassignPrivateIpAddresses"),
        1,
        "one call for the four"
    );
    assert_eq!(
        aws.ec2.log().count("AssignPrivateIpAddresses"),
        0,
        "the node is not topped up again (the new ENI was created with its addresses)"
    );
    op.wait_log(
        "released CIDRs the agent gave back",
        Duration::from_secs(10),
    );
    let node = aws.node("node-r");
    assert!(
        node["status"]["ipam"]["release-ips"].is_null(),
        "no 1.19 handshake for a 1.20 agent: {node}"
    );
}

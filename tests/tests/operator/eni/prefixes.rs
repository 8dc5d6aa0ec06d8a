//! Prefix delegation (`--aws-enable-prefix-delegation`) on a Nitro type (m5.large): the new ENI
//! is created with one /28 prefix and the node's pool is its 16 addresses. When no subnet of
//! the zone has a wholly free /28 (one address held in each), EC2 (the emulator) answers
//! `InsufficientCidrBlocks`; the operator falls back to single addresses, says so (a log line
//! and a Warning Event on the CiliumNode), and leaks nothing.

use std::{collections::BTreeSet, net::Ipv4Addr, time::Duration};

use serde_json::Value;
use weft_tests::ec2::{EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET, Scenario};

use super::{Aws, log_lines};
use crate::wait_for;

const PD: &[&str] = &["--aws-enable-prefix-delegation"];

#[test]
fn a_nitro_node_gets_a_28_prefix_on_its_new_eni() {
    let aws = Aws::with(Scenario::example());
    aws.add_node("node-p");
    let op = aws.operator(PD);
    let pool = aws.wait_pool("node-p", 16, Duration::from_mins(1), &op);
    let creates = aws.ec2.log().of("CreateNetworkInterface");
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert_eq!(creates[0].param("Ipv4PrefixCount"), Some("1"));
    assert_eq!(creates[0].param("SecondaryPrivateIpAddressCount"), None);
    let new = (aws.ec2.instance_enis(EXAMPLE_INSTANCE).into_iter())
        .find(|e| e.attachment.as_ref().is_some_and(|a| a.device_index == 1))
        .expect("an ENI at device index 1");
    assert_eq!(new.prefixes.len(), 1, "{new:?}");
    let prefix = new.prefixes[0];
    let in_prefix: BTreeSet<String> = prefix
        .hosts()
        .chain([prefix.network(), prefix.broadcast()])
        .map(|a| a.to_string())
        .collect();
    assert_eq!(pool, in_prefix, "the pool is the prefix's 16 addresses");
    let node = aws.node("node-p");
    let shown = &node["status"]["eni"]["enis"][&new.id];
    assert_eq!(shown["prefixes"][0], prefix.to_string(), "{node}");
    assert!(aws.cluster.operator_error("node-p").is_empty(), "{node}");
}

/// Hold one address in every /28 of `cidr` (base `a.b.c.0`, `size` addresses) that is free.
fn break_every_28(aws: &Aws, subnet: &str, base: [u8; 4], size: u8) {
    for block in (0..size).step_by(16) {
        let ip = Ipv4Addr::new(base[0], base[1], base[2], base[3] + block + 9);
        aws.ec2.hold_address(subnet, ip);
    }
}

#[test]
fn no_free_28_in_the_subnet_falls_back_to_single_addresses_and_says_so() {
    let aws = Aws::with(Scenario::example());
    break_every_28(&aws, EXAMPLE_NODE_SUBNET, [10, 0, 0, 0], 255);
    break_every_28(&aws, EXAMPLE_POD_SUBNET, [10, 0, 1, 0], 64);
    aws.add_node("node-f");
    let op = aws.operator(PD);
    let pool = aws.wait_pool("node-f", 8, Duration::from_mins(1), &op);
    let creates = aws.ec2.log().of("CreateNetworkInterface");
    assert_eq!(
        creates.first().and_then(|r| r.param("Ipv4PrefixCount")),
        Some("1"),
        "prefixes first: {creates:?}"
    );
    assert_eq!(
        creates.first().and_then(|r| r.code.as_deref()),
        Some("InsufficientCidrBlocks")
    );
    assert!(
        creates
            .iter()
            .any(|r| r.status == 200 && r.param("SecondaryPrivateIpAddressCount").is_some()),
        "then single addresses: {creates:?}"
    );
    let enis = aws.ec2.instance_enis(EXAMPLE_INSTANCE);
    assert_eq!(enis.len(), 2, "one new ENI: {enis:?}");
    assert_eq!(
        aws.ec2.enis().len(),
        2,
        "nothing leaked: {:?}",
        aws.ec2.enis()
    );
    let secondaries: BTreeSet<String> = enis[1]
        .ips
        .iter()
        .skip(1)
        .map(ToString::to_string)
        .collect();
    assert_eq!(pool, secondaries);
    let lines = log_lines(&op, &["no free /28", "creating it with addresses"]);
    assert!(!lines.is_empty(), "a log line says so:\n{}", op.log());
    wait_for(
        "a Warning Event on node-f about the fallback",
        Duration::from_secs(20),
        || {
            let events = aws.cluster.emu.list("events");
            events
                .iter()
                .any(|e| {
                    e["involvedObject"]["name"] == "node-f"
                        && e["type"] == "Warning"
                        && e["message"].as_str().is_some_and(|m| m.contains("/28"))
                })
                .then_some(())
                .ok_or_else(|| {
                    format!(
                        "{:?}",
                        events
                            .iter()
                            .map(|e| &e["message"])
                            .collect::<Vec<&Value>>()
                    )
                })
        },
    );
}

//! The limits of a round: a NIC near Azure's 256 ipConfigurations gets what fits and then
//! nothing more, and a node on an exhausted subnet gets nothing — in both cases no refused
//! PUT (no error storm), the node counted `at-capacity` — until the subnet has room again.

use std::time::Duration;

use serde_json::json;

use super::{Azure, VMSS, assert_pool_is_the_nic, scenario};
use crate::wait_for;

fn at_capacity(op: &weft_tests::operator::Operator) -> Option<f64> {
    op.metric("weft_operator_ipam_nodes{category=\"at-capacity\"}")
}

/// PUTs the emulator refused (a storm shows as these).
fn refused_puts(azure: &Azure) -> usize {
    azure
        .arm
        .requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.status >= 400)
        .count()
}

#[test]
fn a_nic_near_256_configurations_is_filled_to_the_limit_and_no_further() {
    let azure = Azure::start(scenario(|_| {}));
    let nic = azure.arm.vmss_nic_id(VMSS, 0, VMSS);
    // The primary and 249 secondaries: 6 more fit.
    azure.arm.set_ip_config_count(&nic, 250);
    let instance = azure.vmss_instance(0);
    azure.add_node("vmss-0", &instance, &json!({}));
    let op = azure.operator(&[]);
    let pool = azure.wait_pool("vmss-0", 249, Duration::from_secs(30));
    // Every address in use: 8 are needed, 6 fit.
    let used: Vec<String> = pool.into_iter().map(|(ip, _)| ip).collect();
    azure.set_used("vmss-0", &used);
    let pool = azure.wait_pool("vmss-0", 255, Duration::from_secs(30));
    assert_eq!(
        azure.arm.nic_addresses(&nic).len(),
        256,
        "Azure's limit, reached"
    );
    // Now all 255 in use: 8 more are needed and none fits.
    let used: Vec<String> = pool.into_iter().map(|(ip, _)| ip).collect();
    azure.set_used("vmss-0", &used);
    wait_for(
        "the node counted at capacity",
        Duration::from_secs(70),
        || {
            (at_capacity(&op) == Some(1.0))
                .then_some(())
                .ok_or_else(|| format!("{:?}", at_capacity(&op)))
        },
    );
    assert_pool_is_the_nic(&azure, "vmss-0", &instance);
    assert_eq!(refused_puts(&azure), 0, "no PUT beyond the limit was tried");
    let puts = azure
        .arm
        .requests()
        .iter()
        .filter(|r| r.method == "PUT")
        .count();
    assert_eq!(puts, 1, "one round added what fit");
}

#[test]
fn an_exhausted_subnet_allocates_nothing_until_it_has_room() {
    let azure = Azure::start(scenario(|_| {}));
    azure.arm.exhaust_subnet("aks-subnet");
    let instance = azure.vmss_instance(1);
    azure.add_node("vmss-1", &instance, &json!({}));
    let op = azure.operator(&[]);
    wait_for(
        "the node counted at capacity",
        Duration::from_secs(30),
        || {
            (at_capacity(&op) == Some(1.0))
                .then_some(())
                .ok_or_else(|| format!("{:?}\n{}", at_capacity(&op), op.metrics()))
        },
    );
    assert!(
        op.metrics().lines().any(|l| {
            l.starts_with("weft_operator_ipam_available_ips_per_subnet{") && l.ends_with(" 0")
        }),
        "the subnet is reported full:\n{}",
        op.metrics()
    );
    assert_eq!(
        azure
            .arm
            .requests()
            .iter()
            .filter(|r| r.method == "PUT")
            .count(),
        0,
        "no PUT while the subnet is full"
    );
    assert!(
        azure.cluster.operator_error("vmss-1").is_empty(),
        "a full subnet is not an error"
    );
    // Room again: the next full resync (every minute) sees it and the node is served.
    azure.arm.release_subnet_fillers("aks-subnet");
    azure.wait_pool("vmss-1", 8, Duration::from_secs(90));
    assert_pool_is_the_nic(&azure, "vmss-1", &instance);
    assert_eq!(refused_puts(&azure), 0);
}

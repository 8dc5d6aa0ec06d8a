//! `--azure-release-excess-ips` (beyond Cilium, which never releases on Azure): addresses
//! beyond the watermarks are marked, released only once the agent answered
//! `ready-for-release`, removed from the NIC in one PUT and from the pool, never one the agent
//! uses or refused.

use std::{collections::BTreeMap, time::Duration};

use serde_json::{Value, json};

use super::{Azure, VMSS, assert_pool_is_the_nic, scenario};
use crate::wait_for;

fn release_ips(azure: &Azure, node: &str) -> BTreeMap<String, String> {
    azure
        .cluster
        .cilium_node(node)
        .and_then(|n| n["status"]["ipam"]["release-ips"].as_object().cloned())
        .into_iter()
        .flatten()
        .map(|(ip, s)| (ip, s.as_str().unwrap_or_default().to_owned()))
        .collect()
}

#[test]
fn excess_addresses_are_released_after_the_agent_agrees() {
    let azure = Azure::start(scenario(|s| s.scale_sets[0].nics[0].secondary_ips = 20));
    let instance = azure.vmss_instance(0);
    let nic = azure.arm.vmss_nic_id(VMSS, 0, VMSS);
    azure.add_node("vmss-0", &instance, &json!({"pre-allocate": 8}));
    let _op = azure.operator(&["--azure-release-excess-ips"]);
    let pool = azure.wait_pool("vmss-0", 20, Duration::from_secs(30));
    let in_use = pool[0].0.clone();
    azure.set_used("vmss-0", std::slice::from_ref(&in_use));
    // 20 held, 1 used, 8 kept free: 11 marked, never the used one.
    wait_for(
        "11 addresses marked for release",
        Duration::from_secs(30),
        || {
            let marked = release_ips(&azure, "vmss-0");
            (marked.len() == 11 && marked.values().all(|s| s == "marked-for-release"))
                .then_some(())
                .ok_or_else(|| format!("{marked:?}"))
        },
    );
    assert!(!release_ips(&azure, "vmss-0").contains_key(&in_use));
    assert_eq!(
        azure.arm.nic_addresses(&nic).len(),
        21,
        "nothing released before the agent answers"
    );
    // The agent's answers: one refused, the others ready.
    let mut node = azure.cluster.cilium_node("vmss-0").expect("node");
    let marked = release_ips(&azure, "vmss-0");
    let refused = marked.keys().next().expect("marked").clone();
    let answers: serde_json::Map<String, Value> = marked
        .keys()
        .map(|ip| {
            let answer = if *ip == refused {
                "do-not-release"
            } else {
                "ready-for-release"
            };
            (ip.clone(), json!(answer))
        })
        .collect();
    node["status"]["ipam"]["release-ips"] = Value::Object(answers);
    azure.cluster.emu.put(node);
    wait_for("10 addresses released", Duration::from_secs(30), || {
        let states = release_ips(&azure, "vmss-0");
        let released = states.values().filter(|s| *s == "released").count();
        (released == 10 && !states.contains_key(&refused))
            .then_some(())
            .ok_or_else(|| format!("{states:?}"))
    });
    azure.wait_pool("vmss-0", 10, Duration::from_secs(30));
    assert_pool_is_the_nic(&azure, "vmss-0", &instance);
    let pool = azure.pool("vmss-0");
    assert!(
        pool.iter().any(|(ip, _)| *ip == in_use),
        "the used address stays"
    );
    assert!(
        pool.iter().any(|(ip, _)| *ip == refused),
        "the refused address stays"
    );
    let puts = azure
        .arm
        .requests()
        .iter()
        .filter(|r| r.method == "PUT")
        .count();
    assert_eq!(puts, 1, "one PUT removed the ten");
}

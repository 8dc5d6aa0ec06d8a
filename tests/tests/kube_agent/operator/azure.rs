//! Azure mode end to end: the ARM emulator and the real operator next to the API server, real
//! agents in `azure` mode on a VMSS instance and a standalone VM. Each node's CiliumNode fills
//! with `pre-allocate` addresses of its NIC, pods get them through weft-cni and reach each
//! other on the node, `status.ipam.used` shows them (and the agent's router address) and the
//! operator tops the node up.

use std::time::Duration;

use serde_json::Value;
use weft_tests::{
    azure::{ArmEmulator, Scenario},
    require_root,
};

use super::{Lan, all_reach_each_other, node_name};
use crate::wait_for;

const SCENARIO: &str = r"
subscriptionId: 11111111-2222-3333-4444-555555555555
resourceGroup: MC_weft_cluster_westeurope
vnets:
  - name: aks-vnet
    subnets:
      - {name: aks-subnet, cidr: 10.240.0.0/22}
vms:
  - name: standalone-0
    nics:
      - {name: standalone-0-nic, subnet: aks-vnet/aks-subnet}
scaleSets:
  - name: aks-nodepool1-vmss
    nics:
      - {name: aks-nodepool1-vmss, subnet: aks-subnet}
    instances: [{index: 0}]
";

fn pool(node: &Value) -> Vec<String> {
    node["spec"]["ipam"]["pool"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn pods_on_azure_nodes_get_nic_addresses_and_the_operator_tops_the_nodes_up() {
    require_root();
    let lan = Lan::new(2);
    let arm = lan.in_bridge(|| {
        ArmEmulator::start(Scenario::from_yaml(SCENARIO).unwrap_or_else(|e| panic!("{e}")))
    });
    let group = arm.resource_group_id();
    let providers = [
        format!(
            "azure://{group}/providers/Microsoft.Compute/virtualMachineScaleSets/aks-nodepool1-vmss/virtualMachines/0"
        ),
        format!("azure://{group}/providers/Microsoft.Compute/virtualMachines/standalone-0"),
    ];
    for (n, provider) in providers.iter().enumerate() {
        lan.cluster.add_node_at(
            &node_name(n + 1),
            &format!("192.0.2.{}", n + 1),
            provider,
            None,
        );
    }
    let url = arm.url();
    let _op = lan.operator(&[
        "--ipam=azure",
        "--leader-election=false",
        "--azure-arm-endpoint",
        &url,
        "--azure-imds-endpoint",
        &url,
    ]);
    let mut agents: Vec<_> = (1..=2)
        .map(|n| lan.agent(n, &["--ipam", "azure", "--enable-health-checking", "false"]))
        .collect();
    for agent in &mut agents {
        agent.wait_ready(Duration::from_mins(1));
    }
    for n in 1..=2 {
        wait_for(&format!("node {n}'s pool"), Duration::from_secs(30), || {
            let node = lan.cilium_node(&node_name(n));
            (pool(&node).len() == 8)
                .then_some(())
                .ok_or_else(|| node["spec"].to_string())
        });
    }
    let subnet: ipnet::IpNet = "10.240.0.0/22".parse().expect("cidr");
    let a = lan.pod(&agents[0], "web", "a", 1, &Value::Null);
    let b = lan.pod(&agents[0], "web", "b", 1, &Value::Null);
    let c = lan.pod(&agents[1], "web", "c", 2, &Value::Null);
    for pod in [&a, &b, &c] {
        assert!(
            subnet.contains(&pod.ips[0]),
            "{} got {:?}",
            pod.name,
            pod.ips
        );
    }
    let first = lan.cilium_node(&node_name(1));
    assert!(
        pool(&first).contains(&a.ips[0].to_string()),
        "a's address is in node 1's pool"
    );
    let vm_nic = arm.vm_nic_id("standalone-0-nic");
    assert!(
        arm.nic_addresses(&vm_nic)
            .iter()
            .any(|ip| std::net::IpAddr::V4(*ip) == c.ips[0]),
        "c's address is on the VM's NIC in Azure"
    );
    all_reach_each_other(&[&a, &b], Duration::from_secs(20));
    // In use on node 1: the two pods and the agent's router address; eight are kept free.
    wait_for("node 1 topped up", Duration::from_secs(30), || {
        let node = lan.cilium_node(&node_name(1));
        let used: Vec<String> = node["status"]["ipam"]["used"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let pods_in_use = [&a, &b]
            .iter()
            .all(|p| used.contains(&p.ips[0].to_string()));
        (pods_in_use && used.len() == 3 && pool(&node).len() == used.len() + 8)
            .then_some(())
            .ok_or_else(|| format!("used {used:?}, pool {}", pool(&node).len()))
    });
}

//! The Azure parts of `cargo xtask demo-azure`: the ARM + IMDS emulator's scenario (one scale
//! set, an instance per node) and program on node-a, the nodes' provider IDs, and the wait for
//! the operator to fill both nodes' pools from their NICs.

use std::fs;

use anyhow::Result;

use super::{
    NODES, bin,
    kubectl::{kubectl, kubectl_shown},
    path, section, start_daemon,
    teardown::Created,
    wait, wait_log,
};
use crate::run;

/// Where the ARM + IMDS emulator listens, on node-a (azure mode).
pub(super) const ARM_PORT: u16 = 8443;

/// The Azure the demo's nodes live in: one VMSS with an instance per node.
const SCENARIO: &str = "subscriptionId: 11111111-2222-3333-4444-555555555555
resourceGroup: MC_weft_demo_westeurope
vnets:
  - name: demo-vnet
    subnets: [{name: nodes, cidr: 10.240.0.0/22}]
scaleSets:
  - name: demo-vmss
    nics: [{name: demo-vmss, subnet: nodes}]
    instances: [{index: 0}, {index: 1}]
";

/// The node's provider ID in azure mode (instance `i` of the demo's VMSS).
pub(super) fn provider_id(i: usize) -> String {
    format!(
        "azure:///subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/MC_weft_demo_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/demo-vmss/virtualMachines/{i}"
    )
}

/// The ARM + IMDS emulator on node-a, for weft-operator's Azure IPAM.
pub(super) fn start_arm(created: &mut Created) -> Result<()> {
    section("Azure: weft's ARM + IMDS EMULATOR on node-a (not Azure)");
    println!(
        "The emulator (tests/src/azure, run as the `arm-emulator` program) speaks Azure Resource\n\
         Manager's and the Instance Metadata Service's wire protocols: one scale set, an instance\n\
         per node, each with a NIC on subnet 10.240.0.0/22. The operator adds ipConfigurations to\n\
         the NICs as it would in Azure."
    );
    let scenario = path("azure-scenario.yaml");
    fs::write(&scenario, SCENARIO)?;
    println!("{}:\n{SCENARIO}", scenario.display());
    let listen = format!("127.0.0.1:{ARM_PORT}");
    let mut arm = NODES[0].enter(bin("arm-emulator"));
    arm.args(["--listen", &listen, "--scenario"]).arg(&scenario);
    let daemon = start_daemon(created, "arm-emulator", "arm-emulator", &mut arm)?;
    wait_log(daemon, 20, "http://")?;
    Ok(())
}

/// Azure: wait until the operator put 8 addresses of each node's NIC in its pool; show them.
pub(super) fn nic_addresses() -> Result<()> {
    let took = wait(
        30,
        "the operator to fill both nodes' pools from their NICs",
        || {
            let text = run::output(&mut kubectl_shown(&["get", "ciliumnodes", "-o", "json"]))?;
            let list: serde_json::Value = serde_json::from_str(&text)?;
            let items = list["items"].as_array().cloned().unwrap_or_default();
            Ok(items.len() == NODES.len()
                && items.iter().all(|n| {
                    n["spec"]["ipam"]["pool"]
                        .as_object()
                        .is_some_and(|p| p.len() >= 8)
                }))
        },
    )?;
    println!(
        "both nodes hold 8 free NIC addresses (after {:.1} s more)",
        took.as_secs_f64()
    );
    println!("\neach node's instance, its NIC and the addresses the operator added to it:");
    kubectl(&[
        "get",
        "ciliumnodes",
        "-o",
        "custom-columns=NAME:.metadata.name,INSTANCE:.spec.instance-id,NIC:.status.azure.interfaces[*].name,ADDRESSES:.status.azure.interfaces[*].addresses[*].ip",
    ])
}

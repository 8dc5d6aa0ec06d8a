//! The custom roles of `deploy/azure/` against the emulator's RBAC: each topology works with
//! exactly its files (every call the operator makes is covered: no 403 in the log), and a
//! role lacking an action makes the node's `operator-status` name the action, the scope and a
//! role that grants it, even when the refused call is the full resync at start (the operator
//! keeps running and serves the nodes once the role is granted).

use std::{path::Path, time::Duration};

use serde_json::json;
use weft_tests::azure::RoleDefinition;

use super::{Azure, scenario};
use crate::wait_for;

fn roles(files: &[&str]) -> Vec<RoleDefinition> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/azure");
    files
        .iter()
        .map(|f| {
            RoleDefinition::from_file(&dir.join(format!("weft-ipam-{f}.json")))
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// The scenario with only scale sets (`vmss`) or only the standalone VM.
fn topology(vmss: bool) -> weft_tests::azure::Scenario {
    scenario(|s| {
        if vmss {
            s.vms.clear();
        } else {
            s.scale_sets.clear();
        }
    })
}

/// Every ARM request (not IMDS, AAD or polls) was authorized.
fn assert_no_refusal(azure: &Azure) {
    let refused: Vec<String> = azure
        .arm
        .requests()
        .iter()
        .filter(|r| r.status == 403)
        .map(|r| format!("{} {} ({:?})", r.method, r.path, r.action))
        .collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
}

#[test]
fn each_topology_works_with_exactly_its_roles() {
    // (files, node, static IP?)
    let cases: &[(&[&str], bool, bool)] = &[
        (&["common", "vmss"], true, false),
        (&["common", "vm"], false, false),
        (&["common", "vmss", "static-ip-vmss"], true, true),
        (&["common", "vm", "static-ip-vm"], false, true),
    ];
    for &(files, vmss, static_ip) in cases {
        let azure = Azure::start(topology(vmss));
        azure.arm.set_roles(roles(files));
        let instance = if vmss {
            azure.vmss_instance(0)
        } else {
            azure.vm_instance("standalone-0")
        };
        let ipam = if static_ip {
            json!({"static-ip-tags": {"weft": "egress"}})
        } else {
            json!({})
        };
        azure.add_node("n", &instance, &ipam);
        let _op = azure.operator(&[]);
        azure.wait_pool("n", 8, Duration::from_secs(30));
        if static_ip {
            wait_for(
                &format!("{files:?}: the static IP"),
                Duration::from_secs(30),
                || {
                    let n = azure.cluster.cilium_node("n").ok_or("no node")?;
                    n["status"]["ipam"]["assigned-static-ip"]
                        .as_str()
                        .filter(|ip| !ip.is_empty())
                        .map(|_| ())
                        .ok_or_else(|| n["status"].to_string())
                },
            );
        }
        assert_no_refusal(&azure);
        assert!(azure.cluster.operator_error("n").is_empty(), "{files:?}");
    }
}

#[test]
fn a_missing_action_is_named_with_its_scope_and_a_role() {
    // (files, node on a VMSS?, the action taken out and named)
    let cases: &[(&[&str], bool, &str)] = &[
        (
            &["common", "vmss"],
            true,
            "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write",
        ),
        (
            &["common", "vm"],
            false,
            "Microsoft.Network/networkInterfaces/write",
        ),
    ];
    for &(files, vmss, action) in cases {
        let azure = Azure::start(topology(vmss));
        let mut granted = roles(files);
        for role in &mut granted {
            role.actions.retain(|a| a != action);
        }
        azure.arm.set_roles(granted);
        let instance = if vmss {
            azure.vmss_instance(0)
        } else {
            azure.vm_instance("standalone-0")
        };
        azure.add_node("n", &instance, &json!({}));
        let _op = azure.operator(&[]);
        wait_for(&format!("{action} named"), Duration::from_secs(30), || {
            let error = azure.cluster.operator_error("n");
            (error.contains(&format!("Azure refused action {action} on scope"))
                && error.contains("built-in role")
                && error.contains("deploy/azure/"))
            .then_some(())
            .ok_or(error)
        });
    }
}

#[test]
fn a_role_too_small_for_the_resync_is_reported_on_each_node_until_it_is_granted() {
    let azure = Azure::start(topology(true));
    azure.arm.set_roles(roles(&["common"]));
    for (node, index) in [("n0", 0), ("n1", 1)] {
        azure.add_node(node, &azure.vmss_instance(index), &json!({}));
    }
    let mut op = azure.operator(&[]);
    let action =
        "Azure refused action Microsoft.Compute/virtualMachineScaleSets/networkInterfaces/read";
    for node in ["n0", "n1"] {
        wait_for(
            &format!("{node}'s status naming the action"),
            Duration::from_secs(30),
            || {
                let error = azure.cluster.operator_error(node);
                (error.contains(action) && error.contains("deploy/azure/"))
                    .then_some(())
                    .ok_or(error)
            },
        );
    }
    assert_eq!(
        op.exited(),
        None,
        "the operator keeps running:\n{}",
        op.log()
    );
    // Granted: the next resync goes through, the nodes are served and their error goes.
    azure.arm.set_roles(roles(&["common", "vmss"]));
    for node in ["n0", "n1"] {
        azure.wait_pool(node, 8, Duration::from_mins(1));
        wait_for(
            &format!("{node}'s error cleared"),
            Duration::from_secs(30),
            || {
                let error = azure.cluster.operator_error(node);
                error.is_empty().then_some(()).ok_or(error)
            },
        );
    }
    assert_eq!(op.exited(), None, "{}", op.log());
}

#[test]
fn a_missing_linked_join_is_named() {
    let azure = Azure::start(topology(true));
    let mut files = roles(&["common", "vmss"]);
    for role in &mut files {
        role.actions
            .retain(|a| a != "Microsoft.Network/virtualNetworks/subnets/join/action");
    }
    azure.arm.set_roles(files);
    azure.add_node("n", &azure.vmss_instance(1), &json!({}));
    let _op = azure.operator(&[]);
    wait_for("the join action named", Duration::from_secs(30), || {
        let error = azure.cluster.operator_error("n");
        error
            .contains("Azure refused action Microsoft.Network/virtualNetworks/subnets/join/action")
            .then_some(())
            .ok_or(error)
    });
}

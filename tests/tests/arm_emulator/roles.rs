//! RBAC with the custom roles of `deploy/azure/`: each topology's flow (full resync plus
//! allocation on scale sets or standalone VMs, static public IPs) passes with its role files and
//! fails with 403 as soon as any one of their actions is missing, so the files hold exactly the
//! minimum; a missing action gives ARM's exact `AuthorizationFailed` text, a missing linked
//! action `LinkedAuthorizationFailed`; wildcards and `NotActions` are honoured; the request log
//! records each request's action.

use std::{collections::BTreeSet, path::Path};

use serde_json::Value;
use weft_tests::azure::{ArmEmulator, Operation, RoleDefinition, Scenario, derived_object_id};

use super::{
    Client, S, VMSS, cilium_nic_config, cilium_vmss_config,
    public_ips::{Failed, static_ip_vm, static_ip_vmss},
    scenario, v,
};

fn role(file: &str) -> RoleDefinition {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/azure")
        .join(file);
    RoleDefinition::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn expect(r: super::Resp, status: u16) -> Result<super::Resp, Failed> {
    if r.status == status {
        Ok(r)
    } else {
        Err((r.status, r.code()))
    }
}

/// Cilium's full resync: scale sets, their NICs, the group's NICs, their subnets.
fn resync(client: &Client) -> Result<(), Failed> {
    let sets = expect(
        client.get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachineScaleSets"
        ))),
        200,
    )?
    .json();
    let mut nics: Vec<Value> = Vec::new();
    for set in sets["value"].as_array().into_iter().flatten() {
        if set["sku"]["capacity"] == 0 {
            continue;
        }
        let name = set["name"].as_str().unwrap_or("");
        let r = client.get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachineScaleSets/{name}/networkInterfaces"
        )));
        if r.status == 404 {
            continue;
        }
        nics.extend(
            expect(r, 200)?.json()["value"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
    }
    let own = expect(
        client.get(&v(&format!("{S}/Microsoft.Network/networkInterfaces"))),
        200,
    )?
    .json();
    nics.extend(own["value"].as_array().cloned().unwrap_or_default());
    let subnets: BTreeSet<String> = nics
        .iter()
        .filter_map(|n| {
            n["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"].as_str()
        })
        .map(str::to_owned)
        .collect();
    for id in subnets {
        expect(client.get(&v(&id)), 200)?;
    }
    Ok(())
}

/// Cilium's scale set allocation on instance 0, then its instance sync.
fn allocate_vmss(client: &Client) -> Result<(), Failed> {
    let path = format!("{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/0");
    let mut vm = expect(client.get(&v(&format!("{path}?$expand=instanceView"))), 200)?.json();
    let nic =
        &mut vm["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"][0];
    let first = nic["properties"]["ipConfigurations"][0]["properties"].clone();
    let subnet = first["subnet"]["id"].as_str().unwrap_or("").to_owned();
    if let Some(configs) = nic["properties"]["ipConfigurations"].as_array_mut() {
        configs.push(cilium_vmss_config(
            "Cilium-vmss0001",
            &subnet,
            &first["applicationSecurityGroups"],
        ));
    }
    vm["properties"]["storageProfile"]["imageReference"] = Value::Null;
    let put = expect(client.put(&v(&path), &vm), 202)?;
    client.wait(&put);
    expect(client.get(&v(&format!("{path}/networkInterfaces"))), 200)?;
    Ok(())
}

/// Cilium's standalone VM allocation.
fn allocate_vm(client: &Client) -> Result<(), Failed> {
    let path = v(&format!(
        "{S}/Microsoft.Network/networkInterfaces/standalone-0-nic"
    ));
    let mut nic = expect(client.get(&path), 200)?.json();
    let first = nic["properties"]["ipConfigurations"][0]["properties"].clone();
    let subnet = first["subnet"]["id"].as_str().unwrap_or("").to_owned();
    if let Some(configs) = nic["properties"]["ipConfigurations"].as_array_mut() {
        configs.push(cilium_nic_config(
            "Cilium-vm000001",
            &subnet,
            &first["applicationSecurityGroups"],
        ));
    }
    let put = expect(client.put(&path, &nic), 200)?;
    client.wait(&put);
    Ok(())
}

struct Topology {
    files: &'static [&'static str],
    vms: bool,
    scale_sets: bool,
    flow: fn(&Client) -> Result<(), Failed>,
}

const TOPOLOGIES: [Topology; 4] = [
    Topology {
        files: &[
            "weft-ipam-common.json",
            "weft-ipam-vmss.json",
            "weft-ipam-asg.json",
        ],
        vms: false,
        scale_sets: true,
        flow: |c| resync(c).and_then(|()| allocate_vmss(c)),
    },
    Topology {
        files: &[
            "weft-ipam-common.json",
            "weft-ipam-vm.json",
            "weft-ipam-asg.json",
        ],
        vms: true,
        scale_sets: false,
        flow: |c| resync(c).and_then(|()| allocate_vm(c)),
    },
    Topology {
        files: &[
            "weft-ipam-common.json",
            "weft-ipam-vmss.json",
            "weft-ipam-asg.json",
            "weft-ipam-static-ip-vmss.json",
        ],
        vms: false,
        scale_sets: true,
        flow: |c| {
            resync(c)?;
            allocate_vmss(c)?;
            static_ip_vmss(c, 0).map(|_| ())
        },
    },
    Topology {
        files: &[
            "weft-ipam-common.json",
            "weft-ipam-vm.json",
            "weft-ipam-asg.json",
            "weft-ipam-static-ip-vm.json",
        ],
        vms: true,
        scale_sets: false,
        flow: |c| {
            resync(c)?;
            allocate_vm(c)?;
            static_ip_vm(c, "standalone-0").map(|_| ())
        },
    },
];

fn topology_scenario(t: &Topology) -> Scenario {
    let mut s = scenario();
    if !t.vms {
        s.vms.clear();
    }
    if !t.scale_sets {
        s.scale_sets.clear();
    }
    s
}

fn run(t: &Topology, roles: Vec<RoleDefinition>) -> Result<(), Failed> {
    let emulator = ArmEmulator::start(topology_scenario(t));
    emulator.set_roles(roles);
    (t.flow)(&Client::new(&emulator))
}

#[test]
fn each_topology_passes_with_its_role_files_and_needs_every_action() {
    for t in &TOPOLOGIES {
        let roles: Vec<RoleDefinition> = t.files.iter().map(|f| role(f)).collect();
        assert_eq!(
            run(t, roles.clone()),
            Ok(()),
            "{:?} are not enough",
            t.files
        );
        let actions: BTreeSet<String> = roles.iter().flat_map(|r| r.actions.clone()).collect();
        for action in &actions {
            let without: Vec<RoleDefinition> = roles
                .iter()
                .map(|r| RoleDefinition {
                    actions: r.actions.iter().filter(|a| *a != action).cloned().collect(),
                    ..r.clone()
                })
                .collect();
            match run(t, without) {
                Err((403, code)) => assert!(
                    code == "AuthorizationFailed" || code == "LinkedAuthorizationFailed",
                    "{code}"
                ),
                other => panic!(
                    "{:?} without {action}: {other:?} (the action is not needed)",
                    t.files
                ),
            }
        }
    }
}

#[test]
fn a_missing_action_gives_the_exact_authorization_failed_text() {
    let emulator = ArmEmulator::start(scenario());
    emulator.set_role(Some(role("weft-ipam-common.json")));
    let client = Client::new(&emulator);
    client
        .get(&v(&format!("{S}/Microsoft.Network/networkInterfaces")))
        .expect(200);
    let path = format!("{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/0");
    let r = client.get(&v(&path)).expect(403);
    assert_eq!(r.code(), "AuthorizationFailed");
    let client_id = &emulator.scenario().identity.service_principals[0].client_id;
    let object_id = derived_object_id(client_id);
    assert_eq!(
        r.json()["error"]["message"],
        format!(
            "The client '{client_id}' with object id '{object_id}' does not have authorization to \
             perform action 'Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read' over \
             scope '{path}' or the scope is invalid. If access was recently granted, please \
             refresh your credentials."
        )
    );
    let logged = emulator.requests();
    let last = logged.last().expect("logged");
    assert_eq!((last.operation, last.status), (Operation::VmssVmGet, 403));
    assert_eq!(
        last.action.as_deref(),
        Some("Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read")
    );
    assert_eq!(last.client_id.as_deref(), Some(client_id.as_str()));
    // Lifting RBAC lets it through.
    emulator.set_role(None);
    client.get(&v(&path)).expect(200);
}

#[test]
fn a_missing_linked_action_refuses_the_put_and_changes_nothing() {
    let emulator = ArmEmulator::start(scenario());
    emulator.set_roles(vec![
        role("weft-ipam-common.json"),
        role("weft-ipam-vmss.json"),
    ]);
    let client = Client::new(&emulator);
    let nic_id = emulator.vmss_nic_id(VMSS, 0, VMSS);
    let before = emulator.nic_addresses(&nic_id);
    match allocate_vmss(&client) {
        Err((403, code)) => assert_eq!(code, "LinkedAuthorizationFailed"),
        other => panic!("{other:?}"),
    }
    let put = emulator
        .requests()
        .into_iter()
        .find(|r| r.operation == Operation::VmssVmPut)
        .expect("the PUT was logged");
    let asg = format!(
        "{}/providers/Microsoft.Network/applicationSecurityGroups/asg-nodes",
        emulator.resource_group_id()
    );
    assert!(
        put.linked.contains(&(
            "Microsoft.Network/applicationSecurityGroups/joinIpConfiguration/action".to_owned(),
            asg
        )),
        "{:?}",
        put.linked
    );
    assert_eq!(emulator.nic_addresses(&nic_id), before);
    assert_eq!(emulator.pending_operations(), 0);
}

#[test]
fn wildcards_and_not_actions() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    emulator.set_role(Some(RoleDefinition {
        name: "readers".into(),
        actions: vec![
            "Microsoft.Network/*/read".into(),
            "microsoft.compute/*/READ".into(),
        ],
        ..RoleDefinition::default()
    }));
    assert_eq!(resync(&client), Ok(()));
    assert_eq!(
        allocate_vm(&client),
        Err((403, "AuthorizationFailed".to_owned()))
    );
    emulator.set_role(Some(RoleDefinition {
        name: "all but NIC writes".into(),
        actions: vec!["*".into()],
        not_actions: vec!["Microsoft.Network/networkInterfaces/write".into()],
        ..RoleDefinition::default()
    }));
    assert_eq!(
        allocate_vm(&client),
        Err((403, "AuthorizationFailed".to_owned()))
    );
    assert_eq!(allocate_vmss(&client), Ok(()));
    // Assigned at another resource group only: nothing in the nodes' group is allowed.
    emulator.set_role_scopes(vec![
        "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/elsewhere".into(),
    ]);
    assert_eq!(
        resync(&client),
        Err((403, "AuthorizationFailed".to_owned()))
    );
}

//! PUTs as Cilium's allocator makes them: GET the NIC (or scale set VM with
//! `$expand=instanceView`), append ipConfigurations, PUT the whole thing back (read-only fields,
//! `etag` and the instance view included). New configs get the subnet's lowest free address and
//! join its `ipConfigurations`; async operations answer `InProgress` then `Succeeded`; the 256
//! limit, the scale set same-subnet rule and a full subnet refuse the PUT and change nothing;
//! fewer configs give addresses back.

use serde_json::{Value, json};
use weft_tests::azure::{
    ArmEmulator, IP_CONFIGS_PER_NIC, LroMode, LroSpec, Operation, TOO_MANY_IP_CONFIGS,
};

use super::{Client, S, VMSS, addresses, cilium_nic_config, cilium_vmss_config, scenario, v};

fn nic_path() -> String {
    v(&format!(
        "{S}/Microsoft.Network/networkInterfaces/standalone-0-nic"
    ))
}

fn vm_path(index: u32) -> String {
    format!("{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/{index}")
}

/// The NIC with `n` Cilium configs appended.
fn nic_with(client: &Client, names: &[&str], subnet: &str) -> Value {
    let mut nic = client.get(&nic_path()).expect(200).json();
    let asgs =
        nic["properties"]["ipConfigurations"][0]["properties"]["applicationSecurityGroups"].clone();
    let configs = nic["properties"]["ipConfigurations"]
        .as_array_mut()
        .expect("configs");
    for name in names {
        configs.push(cilium_nic_config(name, subnet, &asgs));
    }
    nic
}

/// Scale set VM `index` (as GET with the instance view) with configs appended to NIC 0.
fn vm_with(client: &Client, index: u32, names: &[&str], subnet: &str) -> Value {
    let mut vm = client
        .get(&v(&format!("{}?$expand=instanceView", vm_path(index))))
        .expect(200)
        .json();
    assert!(
        vm["properties"]["instanceView"].is_object(),
        "no instanceView: {vm}"
    );
    let nic =
        &mut vm["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"][0];
    let asgs =
        nic["properties"]["ipConfigurations"][0]["properties"]["applicationSecurityGroups"].clone();
    let configs = nic["properties"]["ipConfigurations"]
        .as_array_mut()
        .expect("configs");
    for name in names {
        configs.push(cilium_vmss_config(name, subnet, &asgs));
    }
    vm["properties"]["storageProfile"]["imageReference"] = Value::Null;
    vm
}

#[test]
fn nic_put_assigns_lowest_free_addresses_through_an_async_operation() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let subnet = emulator.subnet_id("aks-subnet");
    let mut nic = nic_with(&client, &["Cilium-bcdfghjk", "Cilium-lmnpqrst"], &subnet);
    nic["etag"] = json!("W/\"stale\"");
    nic["properties"]["provisioningState"] = json!("Failed");
    nic["properties"]["someFutureField"] = json!({"kept": true});
    let put = client.put(&nic_path(), &nic).expect(200);
    assert!(put.header("azure-asyncoperation").is_some());
    let body = put.json();
    assert_eq!(body["properties"]["provisioningState"], "Updating");
    assert_eq!(body["properties"]["someFutureField"]["kept"], true);
    assert_ne!(body["etag"], "W/\"stale\"");
    assert_eq!(addresses(&body), ["10.240.0.4", "10.240.0.7", "10.240.0.8"]);
    let states = |nic: &Value| -> Vec<String> {
        nic["properties"]["ipConfigurations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                c["properties"]["provisioningState"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(states(&body), ["Succeeded", "Updating", "Updating"]);
    assert_eq!(emulator.pending_operations(), 1);
    // One InProgress poll (the default), then Succeeded.
    assert_eq!(client.wait(&put), 2);
    let after = client.get(&nic_path()).expect(200).json();
    assert_eq!(states(&after), ["Succeeded", "Succeeded", "Succeeded"]);
    assert_eq!(emulator.subnet_ip_configurations("aks-subnet"), 5);
    assert_eq!(emulator.subnet_free("aks-subnet"), 1014);
    assert_eq!(emulator.count(Operation::NicPut), 1);
    assert_eq!(emulator.count(Operation::AsyncOperation), 2);
}

#[test]
fn synchronous_mode_answers_succeeded_at_once() {
    let emulator = super::start_with(|s| {
        s.lro = LroSpec {
            mode: LroMode::Sync,
            ..LroSpec::default()
        };
    });
    let client = Client::new(&emulator);
    let nic = nic_with(&client, &["Cilium-one"], &emulator.subnet_id("aks-subnet"));
    let put = client.put(&nic_path(), &nic).expect(200);
    assert!(put.header("azure-asyncoperation").is_none());
    let body = put.json();
    assert_eq!(body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        body["properties"]["ipConfigurations"][1]["properties"]["provisioningState"],
        "Succeeded"
    );
    let vm = vm_with(
        &client,
        0,
        &["Cilium-two"],
        &emulator.subnet_id("aks-subnet"),
    );
    let put = client.put(&v(&vm_path(0)), &vm).expect(200);
    assert_eq!(put.json()["properties"]["provisioningState"], "Succeeded");
}

#[test]
fn vmss_vm_put_keeps_one_subnet_per_nic_and_polls_async() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let nic_id = emulator.vmss_nic_id(VMSS, 0, VMSS);
    let before = emulator.nic_addresses(&nic_id);
    let other = emulator.subnet_id("pods");
    let refused = client
        .put(&v(&vm_path(0)), &vm_with(&client, 0, &["Cilium-x"], &other))
        .expect(400);
    assert_eq!(
        refused.code(),
        "VMScaleSetIpConfigurationsOnSameNicCannotUseDifferentSubnets"
    );
    assert_eq!(emulator.nic_addresses(&nic_id), before);
    assert_eq!(emulator.pending_operations(), 0);

    let subnet = emulator.subnet_id("aks-subnet");
    let put = client
        .put(
            &v(&vm_path(0)),
            &vm_with(&client, 0, &["Cilium-a", "Cilium-b"], &subnet),
        )
        .expect(202);
    let location = put.header("location").expect("a Location");
    client.get(&location).expect(202);
    client.wait(&put);
    let done = client.get(&location).expect(200).json();
    assert_eq!(done["properties"]["provisioningState"], "Succeeded");
    assert!(
        done["properties"]["storageProfile"]["imageReference"].is_object(),
        "the image was dropped: {done}"
    );
    let (nics, _) = client.list(&v(&format!("{}/networkInterfaces", vm_path(0))));
    assert_eq!(
        addresses(&nics[0]),
        ["10.240.0.5", "10.240.0.7", "10.240.0.8"]
    );
    let cfgs = nics[0]["properties"]["ipConfigurations"]
        .as_array()
        .expect("configs");
    assert!(
        cfgs.iter()
            .all(|c| c["properties"]["provisioningState"] == "Succeeded")
    );
    assert!(
        cfgs[2]["id"]
            .as_str()
            .is_some_and(|id| id.ends_with(&format!(
                "virtualMachines/0/networkInterfaces/{VMSS}/ipConfigurations/Cilium-b"
            ))),
        "{}",
        cfgs[2]["id"]
    );
}

#[test]
fn at_most_256_ip_configurations_per_nic() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let subnet = emulator.subnet_id("aks-subnet");
    let nic_id = emulator.vm_nic_id("standalone-0-nic");
    emulator.set_ip_config_count(&nic_id, IP_CONFIGS_PER_NIC - 1);
    let refused = client
        .put(
            &nic_path(),
            &nic_with(&client, &["Cilium-1", "Cilium-2"], &subnet),
        )
        .expect(400);
    assert_eq!(refused.code(), TOO_MANY_IP_CONFIGS);
    assert_eq!(emulator.nic_addresses(&nic_id).len(), 255);
    let put = client
        .put(&nic_path(), &nic_with(&client, &["Cilium-1"], &subnet))
        .expect(200);
    assert_eq!(addresses(&put.json()).len(), 256);

    let vmss_nic = emulator.vmss_nic_id(VMSS, 1, VMSS);
    emulator.set_ip_config_count(&vmss_nic, IP_CONFIGS_PER_NIC);
    let refused = client
        .put(
            &v(&vm_path(1)),
            &vm_with(&client, 1, &["Cilium-3"], &subnet),
        )
        .expect(400);
    assert_eq!(refused.code(), TOO_MANY_IP_CONFIGS);
    assert_eq!(emulator.nic_addresses(&vmss_nic).len(), 256);
}

#[test]
fn a_full_subnet_refuses_and_fewer_configs_give_addresses_back() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let subnet = emulator.subnet_id("aks-subnet");
    let put = client
        .put(
            &nic_path(),
            &nic_with(&client, &["Cilium-1", "Cilium-2", "Cilium-3"], &subnet),
        )
        .expect(200);
    client.wait(&put);
    assert_eq!(emulator.subnet_free("aks-subnet"), 1013);
    // Drop two of them: their addresses go back.
    let mut nic = client.get(&nic_path()).expect(200).json();
    nic["properties"]["ipConfigurations"]
        .as_array_mut()
        .expect("configs")
        .truncate(2);
    let put = client.put(&nic_path(), &nic).expect(200);
    assert_eq!(addresses(&put.json()), ["10.240.0.4", "10.240.0.7"]);
    assert_eq!(emulator.subnet_free("aks-subnet"), 1015);

    emulator.fill_subnet("aks-subnet", 1);
    let refused = client
        .put(
            &nic_path(),
            &nic_with(&client, &["Cilium-4", "Cilium-5"], &subnet),
        )
        .expect(400);
    assert_eq!(refused.code(), "SubnetIsFull");
    assert_eq!(
        emulator
            .nic_addresses(&emulator.vm_nic_id("standalone-0-nic"))
            .len(),
        2
    );
    assert_eq!(emulator.subnet_free("aks-subnet"), 1);
    client
        .put(&nic_path(), &nic_with(&client, &["Cilium-4"], &subnet))
        .expect(200);
    assert_eq!(emulator.subnet_free("aks-subnet"), 0);
}

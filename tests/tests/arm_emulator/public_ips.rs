//! Static public IPs the way Cilium's `AllocateStaticIP` gets them: find a public IP prefix by
//! tags, then for a standalone VM put a `publicIPAddress` on the primary ipConfiguration of its
//! primary NIC and read it back with `PublicIPAddresses.Get`; for a scale set VM put a
//! `publicIPAddressConfiguration` on its model and read it back through the scale set VM public
//! IP list. The flows return the first failing answer so `roles.rs` can reuse them.

use serde_json::{Value, json};
use weft_tests::azure::ArmEmulator;

use super::{Client, Resp, S, VMSS, scenario, v};

/// A failed step: status and ARM error code.
pub(crate) type Failed = (u16, String);

fn ok(r: Resp, status: u16) -> Result<Resp, Failed> {
    if r.status == status {
        Ok(r)
    } else {
        Err((r.status, r.code()))
    }
}

/// The id of the first prefix tagged `weft: egress` with addresses left.
pub(crate) fn find_prefix(client: &Client) -> Result<String, Failed> {
    let list = ok(
        client.get(&v(&format!("{S}/Microsoft.Network/publicIPPrefixes"))),
        200,
    )?
    .json();
    list["value"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| {
            let cidr: Option<ipnet::Ipv4Net> = p["properties"]["ipPrefix"]
                .as_str()
                .and_then(|c| c.parse().ok());
            let total = cidr.map_or(0, |c| 1usize << (32 - c.prefix_len()));
            let used = p["properties"]["publicIPAddresses"]
                .as_array()
                .map_or(0, Vec::len);
            p["tags"]["weft"] == "egress"
                && p["properties"]["provisioningState"] == "Succeeded"
                && used < total
        })
        .and_then(|p| p["id"].as_str().map(str::to_owned))
        .ok_or((404, "no prefix".to_owned()))
}

/// Cilium's VM path for `vm`: its public IP.
pub(crate) fn static_ip_vm(client: &Client, vm: &str) -> Result<String, Failed> {
    let vm = ok(
        client.get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachines/{vm}?$expand=instanceView"
        ))),
        200,
    )?
    .json();
    let nic_id = vm["properties"]["networkProfile"]["networkInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["properties"]["primary"] == true)
        .and_then(|n| n["id"].as_str())
        .expect("a primary NIC")
        .to_owned();
    let nic_path = v(&nic_id);
    let mut nic = ok(client.get(&nic_path), 200)?.json();
    let prefix = find_prefix(client)?;
    let primary = nic["properties"]["ipConfigurations"]
        .as_array_mut()
        .and_then(|c| c.iter_mut().find(|c| c["properties"]["primary"] == true))
        .expect("a primary ipConfiguration");
    primary["properties"]["publicIPAddress"] = json!({"name": "cilium-managed-public-ip",
        "properties": {"publicIPAllocationMethod": "Static", "publicIPPrefix": {"id": prefix}}});
    let put = ok(client.put(&nic_path, &nic), 200)?;
    client.wait(&put);
    let nic = ok(client.get(&nic_path), 200)?.json();
    let ip_id = nic["properties"]["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["properties"]["primary"] == true)
        .and_then(|c| c["properties"]["publicIPAddress"]["id"].as_str())
        .expect("a public IP id")
        .to_owned();
    let ip = ok(client.get(&v(&ip_id)), 200)?.json();
    Ok(ip["properties"]["ipAddress"]
        .as_str()
        .unwrap_or("")
        .to_owned())
}

/// Cilium's scale set path for instance `index`: its public IP.
pub(crate) fn static_ip_vmss(client: &Client, index: u32) -> Result<String, Failed> {
    let vm_path =
        format!("{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/{index}");
    let mut vm = ok(
        client.get(&v(&format!("{vm_path}?$expand=instanceView"))),
        200,
    )?
    .json();
    let prefix = find_prefix(client)?;
    let nic = vm["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"]
        .as_array_mut()
        .and_then(|n| n.iter_mut().find(|n| n["properties"]["primary"] == true))
        .expect("a primary NIC configuration");
    let cfg = nic["properties"]["ipConfigurations"]
        .as_array_mut()
        .and_then(|c| c.iter_mut().find(|c| c["properties"]["primary"] == true))
        .expect("a primary ipConfiguration");
    cfg["properties"]["publicIPAddressConfiguration"] = json!({"name": "cilium-managed-public-ip",
        "properties": {"publicIPPrefix": {"id": prefix}}});
    vm["properties"]["storageProfile"]["imageReference"] = Value::Null;
    let put = ok(client.put(&v(&vm_path), &vm), 202)?;
    client.wait(&put);
    let nics = ok(client.get(&v(&format!("{vm_path}/networkInterfaces"))), 200)?.json();
    let nic = nics["value"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["properties"]["primary"] == true)
        .expect("a primary NIC");
    let cfg = nic["properties"]["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["properties"]["primary"] == true)
        .and_then(|c| c["name"].as_str())
        .expect("a primary ipConfiguration");
    let ips = ok(
        client.get(&v(&format!(
            "{vm_path}/networkInterfaces/{}/ipconfigurations/{cfg}/publicipaddresses",
            nic["name"].as_str().unwrap_or("")
        ))),
        200,
    )?
    .json();
    Ok(ips["value"][0]["properties"]["ipAddress"]
        .as_str()
        .unwrap_or("")
        .to_owned())
}

#[test]
fn standalone_vm_gets_a_static_ip_from_the_tagged_prefix() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let ip = static_ip_vm(&client, "standalone-0").expect("the VM flow");
    // 20.0.0.0 is the pre-existing `taken-ip`.
    assert_eq!(ip, "20.0.0.1");
    // Running the flow again keeps the same address.
    assert_eq!(static_ip_vm(&client, "standalone-0"), Ok(ip));
    let prefixes = client
        .get(&v(&format!("{S}/Microsoft.Network/publicIPPrefixes")))
        .expect(200)
        .json();
    assert_eq!(
        prefixes["value"][0]["properties"]["publicIPAddresses"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

#[test]
fn scale_set_vms_get_static_ips_until_the_prefix_is_full() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    assert_eq!(static_ip_vmss(&client, 0).as_deref(), Ok("20.0.0.1"));
    assert_eq!(static_ip_vmss(&client, 1).as_deref(), Ok("20.0.0.2"));
    assert_eq!(
        static_ip_vm(&client, "standalone-0").as_deref(),
        Ok("20.0.0.3")
    );
    // The /30 prefix is full now: Cilium finds no prefix; a direct PUT is refused.
    assert_eq!(find_prefix(&client), Err((404, "no prefix".to_owned())));
    emulator.add_vmss_instance(VMSS, 2, None);
    let vm_path = format!("{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/2");
    let mut vm = client.get(&v(&vm_path)).expect(200).json();
    let prefix = format!(
        "{}/providers/Microsoft.Network/publicIPPrefixes/weft-prefix",
        emulator.resource_group_id()
    );
    vm["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"][0]["properties"]
        ["ipConfigurations"][0]["properties"]["publicIPAddressConfiguration"] =
        json!({"name": "pip", "properties": {"publicIPPrefix": {"id": prefix}}});
    let refused = client.put(&v(&vm_path), &vm).expect(400);
    assert_eq!(
        refused.code(),
        "PublicIpPrefixOutOfIpAddressesForVMScaleSet"
    );
    // Deleting an instance deletes its scale-set-managed public IP.
    assert!(emulator.delete_vmss_instance(VMSS, 0));
    assert_eq!(emulator.public_ips().len(), 3);
}

//! Reads as Cilium's full resync and instance sync make them: paging through `nextLink`,
//! lowercase names (Cilium builds paths from lowercased instance ids) answered with ids in their
//! original case, scale set NIC ids under the scale set VM with `virtualMachine.id` set, 404s
//! for missing resources and for an empty scale set NIC list, and the subnet free count.

use serde_json::Value;
use weft_tests::azure::ArmEmulator;

use super::{Client, S, VMSS, scenario, start_with, v};

#[test]
fn lists_page_through_next_link() {
    let emulator = ArmEmulator::start(scenario());
    emulator.set_page_size(1);
    let client = Client::new(&emulator);
    let (nics, pages) = client.list(&v(&format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/networkInterfaces"
    )));
    assert_eq!((nics.len(), pages), (2, 2));
    let first = client
        .get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/networkInterfaces"
        )))
        .expect(200)
        .json();
    let next = first["nextLink"].as_str().expect("a nextLink");
    assert!(
        next.contains("api-version=") && next.starts_with(&emulator.url()),
        "{next}"
    );
    emulator.set_page_size(50);
    let (all, pages) = client.list(&v(&format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/networkInterfaces"
    )));
    assert_eq!((all.len(), pages), (2, 1));
    assert_eq!(nics, all);
}

#[test]
fn names_match_in_any_case_and_ids_keep_theirs() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let lower = format!(
        "{S}/microsoft.compute/virtualmachinescalesets/{VMSS}/virtualmachines/1/networkinterfaces"
    )
    .to_ascii_lowercase();
    let (nics, _) = client.list(&v(&lower));
    assert_eq!(nics.len(), 1);
    let nic = &nics[0];
    let vm = format!(
        "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/MC_weft_cluster_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/1"
    );
    assert_eq!(nic["id"], format!("{vm}/networkInterfaces/{VMSS}"));
    assert_eq!(nic["properties"]["virtualMachine"]["id"], vm);
    let cfg = &nic["properties"]["ipConfigurations"][0]["properties"];
    assert_eq!(cfg["primary"], true);
    assert_eq!(cfg["provisioningState"], "Succeeded");
    assert!(
        cfg["subnet"]["id"].as_str().is_some_and(|s| s
            .contains("/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet")),
        "{cfg}"
    );
    // The standalone VM NIC by a differently cased name.
    let got = client
        .get(&v(&format!(
            "{S}/Microsoft.Network/networkInterfaces/STANDALONE-0-NIC"
        )))
        .expect(200)
        .json();
    assert_eq!(got["name"], "standalone-0-nic");
    let vm = client
        .get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachines/Standalone-0?$expand=instanceView"
        )))
        .expect(200)
        .json();
    assert_eq!(
        vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"],
        got["id"]
    );
    assert!(
        vm["properties"]["instanceView"]["statuses"].is_array(),
        "{vm}"
    );
}

#[test]
fn missing_resources_and_empty_scale_sets_are_404() {
    let emulator = start_with(|s| {
        let mut empty = s.scale_sets[0].clone();
        empty.name = "empty-vmss".into();
        empty.instances = Some(Vec::new());
        s.scale_sets.push(empty);
    });
    let client = Client::new(&emulator);
    let (sets, _) = client.list(&v(&format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets"
    )));
    let capacity = |name: &str| {
        sets.iter()
            .find(|s| s["name"] == name)
            .map_or(Value::Null, |s| s["sku"]["capacity"].clone())
    };
    assert_eq!(
        (capacity(VMSS), capacity("empty-vmss")),
        (2.into(), 0.into())
    );
    let empty = client
        .get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachineScaleSets/empty-vmss/networkInterfaces"
        )))
        .expect(404);
    assert_eq!(empty.code(), "ResourceNotFound");
    let gone = format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/7/networkInterfaces"
    );
    assert_eq!(client.get(&v(&gone)).expect(404).code(), "ResourceNotFound");
    client
        .get(&v(&format!("{S}/Microsoft.Network/networkInterfaces/nope")))
        .expect(404);
    let subnet = client
        .get(&v(&format!(
            "{S}/Microsoft.Network/virtualNetworks/aks-vnet/subnets/nope"
        )))
        .expect(404);
    assert_eq!(subnet.code(), "NotFound");
    let other_rg = "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/other/providers/Microsoft.Network/networkInterfaces";
    assert_eq!(
        client.get(&v(other_rg)).expect(404).code(),
        "ResourceGroupNotFound"
    );

    // Instances come and go at run time.
    let one = format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/1/networkInterfaces"
    );
    client.get(&v(&one)).expect(200);
    assert!(emulator.delete_vmss_instance(VMSS, 1));
    client.get(&v(&one)).expect(404);
    emulator.add_vmss_instance(VMSS, 5, None);
    let (nics, _) = client.list(&v(&format!(
        "{S}/Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/5/networkInterfaces"
    )));
    // Instance 1's address went back to the subnet and is the lowest free one again.
    assert_eq!(super::addresses(&nics[0]), ["10.240.0.6"]);
}

#[test]
fn subnet_free_count_is_what_cilium_computes() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let path = v(&format!(
        "{S}/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet"
    ));
    let free = || {
        let subnet = client.get(&path).expect(200).json();
        let prefix: ipnet::Ipv4Net = subnet["properties"]["addressPrefix"]
            .as_str()
            .and_then(|p| p.parse().ok())
            .expect("an addressPrefix");
        let used = subnet["properties"]["ipConfigurations"]
            .as_array()
            .map_or(0, Vec::len) as u64;
        (1u64 << (32 - prefix.prefix_len())) - 5 - used
    };
    // Three NICs with one address each in a /22.
    assert_eq!(free(), 1016);
    assert_eq!(emulator.subnet_free("aks-subnet"), 1016);
    emulator.fill_subnet("aks-subnet", 10);
    assert_eq!(free(), 10);
    emulator.exhaust_subnet("aks-subnet");
    assert_eq!((free(), emulator.subnet_free("aks-subnet")), (0, 0));
    emulator.release_subnet_fillers("aks-subnet");
    assert_eq!(free(), 1016);
}

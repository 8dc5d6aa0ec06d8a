//! Wire-level tests of the release, subnet and static public IP operations.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::*;

#[tokio::test(start_paused = true)]
async fn release_removes_exactly_those_addresses() {
    let server = TestServer::start().await;
    let nic_path = format!("{P}/Microsoft.Network/networkInterfaces/eth0?api-version=2025-07-01");
    let original = nic(
        "eth0",
        &json!([
            config("p", "10.0.0.4", true),
            config("Cilium-a", "10.0.0.5", false),
            config("Cilium-b", "10.0.0.6", false)
        ]),
    );
    server.expect("GET", &nic_path, Reply::json(200, &original));
    server.expect(
        "PUT",
        &nic_path,
        Reply::json(
            200,
            &json!({"properties": {"provisioningState": "Succeeded"}}),
        ),
    );
    // Refusals read the NIC and write nothing.
    server.expect("GET", &nic_path, Reply::json(200, &original));
    server.expect("GET", &nic_path, Reply::json(200, &original));
    let (client, _) = client(&server, 4.0, 20);
    client
        .release_private_ips_vm("eth0", &["10.0.0.5".parse().unwrap()])
        .await
        .unwrap();
    let err = client
        .release_private_ips_vm(
            "eth0",
            &["10.0.0.6".parse().unwrap(), "10.0.0.9".parse().unwrap()],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "address 10.0.0.9 is not on interface eth0; nothing released"
    );
    let err = client
        .release_private_ips_vm("eth0", &["10.0.0.4".parse().unwrap()])
        .await
        .unwrap_err();
    assert!(matches!(err, ArmError::PrimaryAddress { .. }), "{err}");
    client.release_private_ips_vm("eth0", &[]).await.unwrap();
    let seen = server.finish();
    assert_eq!(
        (seen[1].method.as_str(), seen[1].uri.as_str()),
        ("PUT", nic_path.as_str())
    );
    let body = seen[1].json();
    let kept: Vec<&str> = body["properties"]["ipConfigurations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(kept, ["p", "Cilium-b"]);
}

#[tokio::test(start_paused = true)]
async fn release_vmss_maps_addresses_through_the_nic() {
    let server = TestServer::start().await;
    server.expect(
        "GET",
        &format!("{VMSS_VM}/networkInterfaces?api-version=2018-10-01"),
        Reply::json(200, &json!({"value": [nic("eth0", &json!([config("ipconfig1", "10.0.0.4", true), config("Cilium-abc", "10.0.0.7", false)]))]})),
    );
    server.expect(
        "GET",
        &format!("{VMSS_VM}?$expand=instanceView&api-version=2026-03-01"),
        Reply::json(200, &vmss_vm()),
    );
    server.expect(
        "PUT",
        &format!("{VMSS_VM}?api-version=2026-03-01"),
        Reply::json(200, &json!({})),
    );
    let (client, _) = client(&server, 4.0, 20);
    client
        .release_private_ips_vmss("3", "pool", "eth0", &["10.0.0.7".parse().unwrap()])
        .await
        .unwrap();
    let seen = server.finish();
    let body = seen[2].json();
    let configs = &body["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"]
        [0]["properties"]["ipConfigurations"];
    assert_eq!(configs.as_array().unwrap().len(), 1);
    assert_eq!(configs[0]["name"], "ipconfig1");
    assert!(
        body["properties"]["storageProfile"]
            .get("imageReference")
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn subnets_use_the_clients_subscription() {
    let server = TestServer::start().await;
    let good = "/subscriptions/other/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s1";
    let missing = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s2";
    let bad_case = "/subscriptions/sub/resourceGroups/rg/providers/microsoft.network/virtualNetworks/v/subnets/s3";
    server.expect(
        "GET",
        "/subscriptions/sub/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s1?api-version=2025-07-01",
        Reply::json(200, &json!({"properties": {"addressPrefix": "10.0.0.0/24", "ipConfigurations": [{"id": "x"}]}})),
    );
    server.expect(
        "GET",
        "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s2?api-version=2025-07-01",
        Reply::json(404, &json!({"error": {"code": "NotFound", "message": "no"}})),
    );
    let (client, _) = client(&server, 4.0, 20);
    let ids: BTreeSet<String> = [good, missing, bad_case, "garbage"]
        .map(str::to_owned)
        .into();
    let map = client.get_subnets(&ids).await;
    assert_eq!(map.keys().collect::<Vec<_>>(), [good]);
    assert_eq!(map[good].available_addresses, 256 - 5 - 1);
    assert_eq!(map[good].cidr, Some("10.0.0.0/24".parse().unwrap()));
    server.finish();
}

fn tags() -> BTreeMap<String, String> {
    [("pool".to_owned(), "egress".to_owned())].into()
}

#[tokio::test(start_paused = true)]
async fn public_ip_vm_attaches_from_a_prefix() {
    let server = TestServer::start().await;
    let nic_id = format!("{P}/Microsoft.Network/networkInterfaces/eth0");
    server.expect(
        "GET",
        &format!("{P}/Microsoft.Compute/virtualMachines/vm1?$expand=instanceView&api-version=2026-03-01"),
        Reply::json(200, &json!({"properties": {"networkProfile": {"networkInterfaces": [
            {"id": format!("{P}/Microsoft.Network/networkInterfaces/other"), "properties": {"primary": false}},
            {"id": nic_id, "properties": {"primary": true}}]}}})),
    );
    let nic_path = format!("{nic_id}?api-version=2025-07-01");
    server.expect(
        "GET",
        &nic_path,
        Reply::json(200, &nic("eth0", &json!([config("c", "10.0.0.4", true)]))),
    );
    server.expect(
        "GET",
        &format!("{P}/Microsoft.Network/publicIPPrefixes?api-version=2025-07-01"),
        Reply::json(
            200,
            &json!({"value": [{"id": "/prefix/1", "tags": {"pool": "egress"},
            "properties": {"provisioningState": "Succeeded", "ipPrefix": "20.0.0.0/30"}}]}),
        ),
    );
    let pip_id = "/subscriptions/sub/resourceGroups/pip-rg/providers/Microsoft.Network/publicIPAddresses/cilium-managed-public-ip";
    server.expect(
        "PUT",
        &nic_path,
        Reply::json(
            200,
            &json!({"properties": {"provisioningState": "Succeeded", "ipConfigurations": [
            {"name": "c", "properties": {"primary": true, "publicIPAddress": {"id": pip_id}}}]}}),
        ),
    );
    server.expect(
        "GET",
        "/subscriptions/sub/resourceGroups/pip-rg/providers/Microsoft.Network/publicIPAddresses/cilium-managed-public-ip?api-version=2025-07-01",
        Reply::json(200, &json!({"properties": {"ipAddress": "20.0.0.1"}})),
    );
    let (client, _) = client(&server, 4.0, 20);
    let id = "/subscriptions/sub/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1";
    assert_eq!(
        client.assign_public_ip_vm(id, &tags()).await.unwrap(),
        "20.0.0.1"
    );
    let seen = server.finish();
    assert_eq!(
        seen[3].json()["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"],
        json!({"name": "cilium-managed-public-ip", "properties": {"publicIPAllocationMethod": "Static", "publicIPPrefix": {"id": "/prefix/1"}}})
    );
}

#[tokio::test(start_paused = true)]
async fn public_ip_vmss_reads_back_or_fails_without_prefix() {
    let server = TestServer::start().await;
    let get = format!("{VMSS_VM}?$expand=instanceView&api-version=2026-03-01");
    let mut with_pip = vmss_vm();
    with_pip["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"][0]["properties"]
        ["ipConfigurations"][0]["properties"]["publicIPAddressConfiguration"] =
        json!({"name": "cilium-managed-public-ip"});
    server.expect("GET", &get, Reply::json(200, &with_pip));
    server.expect(
        "GET",
        &format!("{VMSS_VM}/networkInterfaces?api-version=2018-10-01"),
        Reply::json(
            200,
            &json!({"value": [nic("eth0", &json!([config("ipconfig1", "10.0.0.4", true)]))]}),
        ),
    );
    server.expect(
        "GET",
        &format!("{VMSS_VM}/networkInterfaces/eth0/ipconfigurations/ipconfig1/publicipaddresses?api-version=2018-10-01"),
        Reply::json(200, &json!({"value": [{"properties": {}}, {"properties": {"ipAddress": "20.0.0.2"}}]})),
    );
    server.expect("GET", &get, Reply::json(200, &vmss_vm()));
    server.expect(
        "GET",
        &format!("{P}/Microsoft.Network/publicIPPrefixes?api-version=2025-07-01"),
        Reply::json(200, &json!({"value": [{"id": "/prefix/1", "tags": {"pool": "other"}, "properties": {"provisioningState": "Succeeded"}}]})),
    );
    let (client, _) = client(&server, 4.0, 20);
    let id = VMSS_VM.to_lowercase();
    assert_eq!(
        client
            .assign_public_ip_vmss(&id, "pool", &tags())
            .await
            .unwrap(),
        "20.0.0.2"
    );
    let err = client
        .assign_public_ip_vmss(&id, "pool", &tags())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"public IP prefix with tags {"pool": "egress"} not found in resource group rg"#
    );
    server.finish();
}

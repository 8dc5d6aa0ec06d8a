//! Wire-level tests of the ARM client against a local server that answers a scripted
//! sequence and fails on any other call: transport, paging, retries, rate limit and LROs
//! here, the release, subnet and public-IP operations in `ops`. Waits run on tokio's paused clock, so the gaps
//! between recorded requests are exactly the waits the client chose.

use std::{sync::Arc, time::Duration};

use prometheus_client::{encoding::text::encode, registry::Registry};
use serde_json::{Value, json};

use super::{
    testserver::{Reply, Seen, TestServer},
    *,
};
use crate::azure::auth::StaticToken;

mod ops;

const P: &str = "/subscriptions/sub/resourceGroups/rg/providers";
const SUBNET: &str =
    "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s";
const VMSS_VM: &str = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/3";

fn client(server: &TestServer, qps: f64, burst: u32) -> (ArmClient, ApiMetrics) {
    let mut settings = ArmSettings::new(
        &server.url,
        "sub",
        "rg",
        "https://management.core.windows.net/.default",
    );
    settings.timeout = None;
    settings.qps = qps;
    settings.burst = burst;
    let metrics = ApiMetrics::default();
    let client =
        ArmClient::new(settings, Arc::new(StaticToken::new("tok")), metrics.clone()).unwrap();
    (client, metrics)
}

fn metrics_text(metrics: &ApiMetrics) -> String {
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    text
}

fn nic(name: &str, configs: &Value) -> Value {
    json!({
        "id": format!("{P}/Microsoft.Network/networkInterfaces/{name}"),
        "name": name, "location": "westeurope", "etag": "W/\"1\"",
        "properties": {"macAddress": "00-0D-3A-00-00-01", "enableIPForwarding": true, "primary": true,
            "virtualMachine": {"id": "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1"},
            "ipConfigurations": configs}
    })
}

fn config(name: &str, ip: &str, primary: bool) -> Value {
    json!({"name": name, "properties": {"privateIPAddress": ip, "primary": primary, "provisioningState": "Succeeded",
        "subnet": {"id": SUBNET}, "applicationSecurityGroups": [{"id": "asg-1"}]}})
}

fn names(nics: &[model::NetworkInterface]) -> Vec<&str> {
    nics.iter().filter_map(|n| n.name.as_deref()).collect()
}

fn gaps(seen: &[Seen]) -> Vec<Duration> {
    seen.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[tokio::test(start_paused = true)]
async fn full_resync_pages_skips_and_appends() {
    let server = TestServer::start().await;
    let next = format!(
        "{}{P}/Microsoft.Compute/virtualMachineScaleSets?api-version=2026-03-01&%24skiptoken=2",
        server.url
    );
    server.expect(
        "GET",
        &format!("{P}/Microsoft.Compute/virtualMachineScaleSets?api-version=2026-03-01"),
        Reply::json(200, &json!({"value": [{"name": "a", "sku": {"capacity": 2}}, {"name": "empty", "sku": {"capacity": 0}}], "nextLink": next})),
    );
    server.expect(
        "GET",
        &format!(
            "{P}/Microsoft.Compute/virtualMachineScaleSets?api-version=2026-03-01&%24skiptoken=2"
        ),
        Reply::json(
            200,
            &json!({"value": [{"name": "gone", "sku": {"capacity": 1}}]}),
        ),
    );
    server.expect(
        "GET",
        &format!("{P}/Microsoft.Compute/virtualMachineScaleSets/a/networkInterfaces?api-version=2018-10-01"),
        Reply::json(200, &json!({"value": [nic("a-0", &json!([])), nic("a-1", &json!([]))], "nextLink": ""})),
    );
    server.expect(
        "GET",
        &format!("{P}/Microsoft.Compute/virtualMachineScaleSets/gone/networkInterfaces?api-version=2018-10-01"),
        Reply::json(404, &json!({"error": {"code": "NotFound", "message": "no NICs"}})),
    );
    server.expect(
        "GET",
        &format!("{P}/Microsoft.Network/networkInterfaces?api-version=2025-07-01"),
        Reply::json(200, &json!({"value": [nic("vm-nic", &json!([]))]})),
    );
    let (client, _) = client(&server, 4.0, 20);
    let nics = client.list_all_network_interfaces().await.unwrap();
    assert_eq!(names(&nics), ["a-0", "a-1", "vm-nic"]);
    for seen in server.finish() {
        assert_eq!(seen.header("authorization"), Some("Bearer tok"));
        assert_eq!(
            seen.header("user-agent"),
            Some(concat!("weft-operator/", env!("CARGO_PKG_VERSION")))
        );
    }
}

#[tokio::test(start_paused = true)]
async fn retries_honour_retry_after() {
    let server = TestServer::start().await;
    let path = format!("{VMSS_VM}/networkInterfaces?api-version=2018-10-01");
    server.expect(
        "GET",
        &path,
        Reply::json(429, &json!({})).header("Retry-After", "7"),
    );
    server.expect("GET", &path, Reply::text(503, "busy"));
    server.expect(
        "GET",
        &path,
        Reply::json(200, &json!({"value": [nic("n", &json!([]))]})),
    );
    let (client, metrics) = client(&server, 4.0, 20);
    let id = VMSS_VM.to_lowercase();
    let nics = client.list_vm_network_interfaces(&id).await.unwrap();
    assert_eq!(names(&nics), ["n"]);
    // Retry-After 7 s, then the second backoff step (1.6 s).
    assert_eq!(
        gaps(&server.finish()),
        [Duration::from_secs(7), Duration::from_millis(1600)]
    );
    assert_eq!(
        metrics.retries("Interfaces.ListVirtualMachineScaleSetVMNetworkInterfaces"),
        2
    );
    let text = metrics_text(&metrics);
    assert!(text.contains(r#"azure_api_duration_seconds_count{operation="Interfaces.ListVirtualMachineScaleSetVMNetworkInterfaces",response_code="OK"} 1"#), "{text}");
}

#[tokio::test(start_paused = true)]
async fn retries_give_up_and_404_is_not_found() {
    let server = TestServer::start().await;
    let path = format!("{VMSS_VM}/networkInterfaces?api-version=2018-10-01");
    for _ in 0..4 {
        server.expect(
            "GET",
            &path,
            Reply::json(
                500,
                &json!({"error": {"code": "InternalError", "message": "oops"}}),
            ),
        );
    }
    server.expect(
        "GET",
        &path,
        Reply::json(
            404,
            &json!({"error": {"code": "ResourceNotFound", "message": "gone"}}),
        ),
    );
    let (client, metrics) = client(&server, 4.0, 20);
    let id = VMSS_VM.to_lowercase();
    let err = client.list_vm_network_interfaces(&id).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "Interfaces.ListVirtualMachineScaleSetVMNetworkInterfaces: HTTP 500: InternalError: oops"
    );
    let err = client.list_vm_network_interfaces(&id).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let seen = server.finish();
    assert_eq!(
        gaps(&seen[..4]),
        [800, 1600, 3200].map(Duration::from_millis)
    );
    assert!(metrics_text(&metrics).contains(r#"response_code="Failed"} 2"#));

    let err = client
        .list_vm_network_interfaces(
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ArmError::NotVmssInstance { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("is not a virtual machine scale set instance")
    );
}

#[tokio::test(start_paused = true)]
async fn rate_limit_waits_are_observed() {
    let server = TestServer::start().await;
    let path = format!("{VMSS_VM}/networkInterfaces?api-version=2018-10-01");
    for _ in 0..3 {
        server.expect("GET", &path, Reply::json(200, &json!({"value": []})));
    }
    let (client, metrics) = client(&server, 4.0, 2);
    let id = VMSS_VM.to_lowercase();
    for _ in 0..3 {
        client.list_vm_network_interfaces(&id).await.unwrap();
    }
    assert_eq!(
        gaps(&server.finish()),
        [Duration::ZERO, Duration::from_millis(250)]
    );
    let text = metrics_text(&metrics);
    let op = "Interfaces.ListVirtualMachineScaleSetVMNetworkInterfaces";
    assert!(
        text.contains(&format!(
            r#"azure_api_rate_limit_duration_seconds_sum{{operation="{op}"}} 0.25"#
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            r#"azure_api_rate_limit_duration_seconds_count{{operation="{op}"}} 1"#
        )),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn decode_errors_name_the_path() {
    let server = TestServer::start().await;
    server.expect(
        "GET",
        &format!("{VMSS_VM}/networkInterfaces?api-version=2018-10-01"),
        Reply::json(
            200,
            &json!({"value": [{"name": "n", "properties": {"ipConfigurations": "nope"}}]}),
        ),
    );
    let (client, _) = client(&server, 4.0, 20);
    let err = client
        .list_vm_network_interfaces(&VMSS_VM.to_lowercase())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ArmError::Decode { path, .. } if path == "value[0].properties.ipConfigurations"),
        "{err:?}"
    );
    server.finish();
}

#[tokio::test(start_paused = true)]
async fn assign_vm_puts_the_whole_nic_and_polls_the_operation() {
    let server = TestServer::start().await;
    let nic_path = format!("{P}/Microsoft.Network/networkInterfaces/eth0?api-version=2025-07-01");
    let original = nic("eth0", &json!([config("ipconfig1", "10.0.0.4", true)]));
    server.expect("GET", &nic_path, Reply::json(200, &original));
    let op_url = format!("{}/operations/1?api-version=2025-07-01", server.url);
    server.expect(
        "PUT",
        &nic_path,
        Reply::json(
            201,
            &json!({"properties": {"provisioningState": "Updating"}}),
        )
        .header("Azure-AsyncOperation", &op_url)
        .header("Retry-After", "2"),
    );
    server.expect(
        "GET",
        "/operations/1?api-version=2025-07-01",
        Reply::json(200, &json!({"status": "InProgress"})).header("Retry-After", "3"),
    );
    server.expect(
        "GET",
        "/operations/1?api-version=2025-07-01",
        Reply::json(200, &json!({"status": "Succeeded"})),
    );
    server.expect("GET", &nic_path, Reply::json(200, &original));
    let (client, _) = client(&server, 4.0, 20);
    client
        .assign_private_ips_vm(SUBNET, "eth0", 2)
        .await
        .unwrap();
    let seen = server.finish();
    assert_eq!(
        gaps(&seen[1..4]),
        [Duration::from_secs(2), Duration::from_secs(3)]
    );
    let body = seen[1].json();
    assert_eq!(seen[1].header("content-type"), Some("application/json"));
    // Everything ARM sent is sent back.
    assert_eq!(body["location"], "westeurope");
    assert_eq!(body["etag"], "W/\"1\"");
    assert_eq!(body["properties"]["enableIPForwarding"], true);
    let configs = body["properties"]["ipConfigurations"].as_array().unwrap();
    assert_eq!(configs.len(), 3);
    assert_eq!(configs[0], original["properties"]["ipConfigurations"][0]);
    for c in &configs[1..] {
        assert!(c["name"].as_str().unwrap().starts_with("Cilium-"));
        assert_eq!(
            c["properties"],
            json!({"privateIPAllocationMethod": "Dynamic", "subnet": {"id": SUBNET}, "applicationSecurityGroups": [{"id": "asg-1"}]})
        );
    }
    assert_ne!(configs[1]["name"], configs[2]["name"]);
}

#[tokio::test(start_paused = true)]
async fn failed_operation_is_an_error() {
    let server = TestServer::start().await;
    let nic_path = format!("{P}/Microsoft.Network/networkInterfaces/eth0?api-version=2025-07-01");
    server.expect(
        "GET",
        &nic_path,
        Reply::json(200, &nic("eth0", &json!([config("c", "10.0.0.4", true)]))),
    );
    server.expect(
        "PUT",
        &nic_path,
        Reply::json(202, &json!({})).header("Operation-Location", &format!("{}/op", server.url)),
    );
    server.expect(
        "GET",
        "/op",
        Reply::json(200, &json!({"status": "Failed", "error": {"code": "SubnetIsFull", "message": "no addresses left"}})),
    );
    let (client, _) = client(&server, 4.0, 20);
    let err = client
        .assign_private_ips_vm(SUBNET, "eth0", 1)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Interfaces.CreateOrUpdate: the long-running operation ended Failed: SubnetIsFull: no addresses left"
    );
    let seen = server.finish();
    // No Retry-After: the configured poll interval.
    assert_eq!(gaps(&seen[1..]), [Duration::from_secs(5)]);
}

fn vmss_vm() -> Value {
    json!({
        "id": VMSS_VM, "instanceId": "3", "sku": {"name": "Standard_D2"},
        "properties": {
            "storageProfile": {"imageReference": {"publisher": "p"}, "osDisk": {"caching": "ReadWrite"}},
            "instanceView": {"statuses": [{"code": "ProvisioningState/succeeded"}]},
            "networkProfileConfiguration": {"networkInterfaceConfigurations": [{
                "name": "eth0", "properties": {"primary": true, "ipConfigurations": [
                    {"name": "ipconfig1", "properties": {"primary": true, "subnet": {"id": SUBNET}, "applicationSecurityGroups": [{"id": "asg-1"}]}},
                    {"name": "Cilium-abc", "properties": {"subnet": {"id": SUBNET}}}
                ]}
            }]}
        }
    })
}

#[tokio::test(start_paused = true)]
async fn assign_vmss_follows_location() {
    let server = TestServer::start().await;
    let get = format!("{VMSS_VM}?$expand=instanceView&api-version=2026-03-01");
    let put = format!("{VMSS_VM}?api-version=2026-03-01");
    server.expect("GET", &get, Reply::json(200, &vmss_vm()));
    server.expect(
        "PUT",
        &put,
        Reply::text(202, "")
            .header("Location", &format!("{}/loc", server.url))
            .header("Retry-After", "1"),
    );
    server.expect("GET", "/loc", Reply::text(202, ""));
    server.expect("GET", "/loc", Reply::json(200, &vmss_vm()));
    server.expect("GET", &get, Reply::json(200, &vmss_vm()));
    let (client, _) = client(&server, 4.0, 20);
    client
        .assign_private_ips_vmss("3", "pool", SUBNET, "eth0", 1)
        .await
        .unwrap();
    let err = client
        .assign_private_ips_vmss("3", "pool", SUBNET, "eth9", 1)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "interface eth9 does not exist in VM 3");
    let seen = server.finish();
    assert_eq!(
        gaps(&seen[1..4]),
        [Duration::from_secs(1), Duration::from_secs(5)]
    );
    let body = seen[1].json();
    assert!(
        body["properties"]["storageProfile"]
            .get("imageReference")
            .is_none()
    );
    assert_eq!(
        body["properties"]["storageProfile"]["osDisk"]["caching"],
        "ReadWrite"
    );
    assert_eq!(body["instanceId"], "3");
    assert_eq!(
        body["properties"]["instanceView"],
        vmss_vm()["properties"]["instanceView"]
    );
    let configs = body["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"]
        .as_array()
        .unwrap();
    assert_eq!(configs.len(), 3);
    assert!(configs[2]["name"].as_str().unwrap().starts_with("Cilium-"));
    assert_eq!(
        configs[2]["properties"],
        json!({"privateIPAddressVersion": "IPv4", "subnet": {"id": SUBNET}, "applicationSecurityGroups": [{"id": "asg-1"}]})
    );
}

#[tokio::test(start_paused = true)]
async fn put_polls_the_resource_until_terminal() {
    let server = TestServer::start().await;
    let nic_path = format!("{P}/Microsoft.Network/networkInterfaces/eth0?api-version=2025-07-01");
    let updating = json!({"name": "eth0", "properties": {"provisioningState": "Updating"}});
    server.expect(
        "GET",
        &nic_path,
        Reply::json(200, &nic("eth0", &json!([config("c", "10.0.0.4", true)]))),
    );
    server.expect("PUT", &nic_path, Reply::json(200, &updating));
    server.expect("GET", &nic_path, Reply::json(200, &updating));
    server.expect(
        "GET",
        &nic_path,
        Reply::json(
            200,
            &json!({"name": "eth0", "properties": {"provisioningState": "Succeeded"}}),
        ),
    );
    let (client, _) = client(&server, 4.0, 20);
    client
        .assign_private_ips_vm(SUBNET, "eth0", 1)
        .await
        .unwrap();
    server.finish();
}

#[tokio::test(start_paused = true)]
async fn status_url_without_state_is_polled_terminal_state_is_not() {
    let server = TestServer::start().await;
    let nic_path = format!("{P}/Microsoft.Network/networkInterfaces/eth0?api-version=2025-07-01");
    let original = nic("eth0", &json!([config("c", "10.0.0.4", true)]));
    let op_url = format!("{}/op", server.url);
    server.expect("GET", &nic_path, Reply::json(200, &original));
    server.expect(
        "PUT",
        &nic_path,
        Reply::json(201, &json!({"name": "eth0"})).header("Azure-AsyncOperation", &op_url),
    );
    server.expect(
        "GET",
        "/op",
        Reply::json(200, &json!({"status": "Succeeded"})),
    );
    server.expect("GET", &nic_path, Reply::json(200, &original));
    server.expect("GET", &nic_path, Reply::json(200, &original));
    server.expect(
        "PUT",
        &nic_path,
        Reply::json(
            200,
            &json!({"properties": {"provisioningState": "Succeeded"}}),
        )
        .header("Azure-AsyncOperation", &op_url),
    );
    let (client, _) = client(&server, 4.0, 20);
    client
        .assign_private_ips_vm(SUBNET, "eth0", 1)
        .await
        .unwrap();
    client
        .assign_private_ips_vm(SUBNET, "eth0", 1)
        .await
        .unwrap();
    server.finish();
}

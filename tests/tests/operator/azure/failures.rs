//! What goes wrong, and what the operator does about it: ARM throttling for 30 s (the client
//! keeps its rate and the node is served after), a SIGKILL between the GET and the PUT (no
//! address lost or twice; the next operator sees the NIC as it is), the nodes' resource group
//! mistaken, a resource ID given as the identity's client ID, a service principal AAD refuses
//! — each said where a user looks — and a service principal AAD accepts.

use std::time::Duration;

use serde_json::json;
use weft_tests::{
    azure::{Fault, Operation},
    operator::Operator,
};

use super::{Azure, assert_pool_is_the_nic, scenario};
use crate::wait_for;

#[test]
fn thirty_seconds_of_throttling_hold_the_rate_and_the_node_is_served_after() {
    let azure = Azure::start(scenario(|_| {}));
    let instance = azure.vmss_instance(0);
    let window = Duration::from_secs(30);
    // From the start: the first resync waits it out too.
    azure.arm.inject(
        Fault::throttle(None, 1)
            .path("/subscriptions/")
            .for_duration(window),
    );
    let started = std::time::Instant::now();
    azure.add_node("vmss-0", &instance, &json!({}));
    let mut op = azure.operator(&["--limit-ipam-api-qps=2", "--limit-ipam-api-burst=4"]);
    azure.wait_pool("vmss-0", 8, Duration::from_mins(2));
    assert!(
        started.elapsed() >= window,
        "served only after the throttling ended"
    );
    assert_pool_is_the_nic(&azure, "vmss-0", &instance);
    // During the window: at most burst + qps × seconds requests (and the 429s were answered).
    let throttled: Vec<_> = azure
        .arm
        .requests()
        .into_iter()
        .filter(|r| r.status == 429)
        .collect();
    assert!(!throttled.is_empty(), "the fault was hit");
    let first = throttled.first().map(|r| r.at).expect("a 429");
    let in_window = azure
        .arm
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/subscriptions/") && r.at >= first && r.at < first + window)
        .count();
    let ceiling = 4 + 2 * 30;
    assert!(
        in_window <= ceiling,
        "{in_window} ARM requests in 30 s; the limit allows {ceiling}"
    );
    assert_eq!(op.exited(), None, "the operator rode it out");
}

#[test]
fn a_sigkill_between_get_and_put_loses_and_doubles_nothing() {
    let azure = Azure::start(scenario(|_| {}));
    let instance = azure.vmss_instance(1);
    // The PUT hangs, so the operator dies with it in flight.
    azure
        .arm
        .inject(Fault::latency(Some(Operation::VmssVmPut), Duration::from_secs(5)).times(1));
    let mut op = azure.operator(&[]);
    azure.add_node("vmss-1", &instance, &json!({}));
    wait_for("the round's GET", Duration::from_secs(30), || {
        azure
            .arm
            .requests()
            .iter()
            .any(|r| r.operation == Operation::VmssVmGet)
            .then_some(())
            .ok_or_else(|| "no VMSS VM GET yet".to_owned())
    });
    std::thread::sleep(Duration::from_millis(500));
    op.kill();
    // Azure finishes what it accepted, whoever polls.
    azure.arm.complete_operations();
    let _next = azure.operator(&[]);
    azure.wait_pool("vmss-1", 8, Duration::from_secs(30));
    assert_pool_is_the_nic(&azure, "vmss-1", &instance);
    assert_eq!(
        azure.arm.instance_addresses(&instance).len(),
        9,
        "the primary and eight: nothing allocated twice"
    );
}

#[test]
fn nodes_of_another_resource_group_name_the_flag_to_fix() {
    // The AKS cluster's own group exists (it holds a VNet) but no VM.
    let azure = Azure::start(scenario(|s| {
        let mut vnet = s.vnets[0].clone();
        vnet.name = "cluster-vnet".into();
        vnet.resource_group = Some("weft-cluster-rg".into());
        vnet.subnets[0].name = "cluster-subnet".into();
        vnet.subnets[0].cidr = "10.250.0.0/24".parse().expect("cidr");
        s.vnets.push(vnet);
    }));
    let instance = azure.vmss_instance(0);
    azure.add_node("vmss-0", &instance, &json!({}));
    // The operator reads the AKS cluster's group, not the nodes' (MC_…).
    let _op = azure.operator(&["--azure-resource-group=weft-cluster-rg"]);
    wait_for(
        "the node's operator-status",
        Duration::from_secs(30),
        || {
            let error = azure.cluster.operator_error("vmss-0");
            error
                .contains("--azure-resource-group must be the resource group of the nodes")
                .then_some(())
                .ok_or(error)
        },
    );
    assert!(
        azure
            .cluster
            .operator_error("vmss-0")
            .contains("mc_weft_cluster_westeurope")
    );
    assert!(azure.pool("vmss-0").is_empty());
}

#[test]
fn a_resource_group_that_does_not_exist_stops_the_operator_naming_the_flag() {
    let azure = Azure::start(scenario(|_| {}));
    let mut op = azure.operator(&["--azure-resource-group=no-such-rg"]);
    assert_eq!(
        op.wait_exit(Duration::from_secs(30)),
        Some(1),
        "{}",
        op.log()
    );
    let log = op.log();
    assert!(
        log.contains("resource group \"no-such-rg\" does not exist"),
        "{log}"
    );
    assert!(
        log.contains("--azure-resource-group must be the resource group of the nodes"),
        "{log}"
    );
}

#[test]
fn a_resource_id_as_the_identity_stops_the_operator_with_the_fix() {
    let azure = Azure::start(scenario(|_| {}));
    let url = azure.arm.url();
    let mut op = Operator::new(
        &azure.cluster.kubeconfig,
        &Azure::flags(
            &url,
            &[
                "--azure-user-assigned-identity-id=/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/weft",
            ],
        ),
    );
    op.spawn();
    let code = op.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(1), "{}", op.log());
    let log = op.log();
    assert!(log.contains("client ID"), "{log}");
    assert!(log.contains("az identity show"), "{log}");
    assert_eq!(azure.arm.requests().len(), 0, "refused before any request");
}

fn with_service_principal(azure: &Azure, secret: &str, extra: &[&str]) -> Operator {
    let url = azure.arm.url();
    let mut op = Operator::new(&azure.cluster.kubeconfig, &Azure::flags(&url, extra));
    let principal = &azure.arm.scenario().identity.service_principals[0];
    op.env = vec![
        ("AZURE_CLIENT_ID".into(), principal.client_id.clone()),
        ("AZURE_TENANT_ID".into(), azure.arm.tenant_id()),
        ("AZURE_CLIENT_SECRET".into(), secret.to_owned()),
        ("AZURE_AUTHORITY_HOST".into(), url.clone()),
    ];
    op.spawn();
    op
}

#[test]
fn a_service_principal_aad_refuses_stops_the_operator_naming_the_answer() {
    let azure = Azure::start(scenario(|_| {}));
    let mut op = with_service_principal(&azure, "not-the-secret", &[]);
    let code = op.wait_exit(Duration::from_secs(30));
    let log = op.log();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("initial synchronization with instances API failed"),
        "{log}"
    );
    assert!(
        log.contains("/oauth2/v2.0/token"),
        "names the token endpoint: {log}"
    );
    assert!(log.contains("invalid_client"), "AAD's error: {log}");
    assert!(
        !log.contains("not-the-secret"),
        "the secret is never logged"
    );
}

#[test]
fn a_service_principal_from_the_environment_is_used() {
    let azure = Azure::start(scenario(|_| {}));
    let secret = azure.arm.scenario().identity.service_principals[0]
        .client_secret
        .clone()
        .expect("the scenario's secret");
    let instance = azure.vmss_instance(0);
    azure.add_node("vmss-0", &instance, &json!({}));
    let _op = with_service_principal(&azure, &secret, &[]);
    azure.wait_pool("vmss-0", 8, Duration::from_secs(30));
    let principal = azure.arm.scenario().identity.service_principals[0]
        .client_id
        .clone();
    let requests = azure.arm.requests();
    assert!(requests.iter().any(|r| r.operation == Operation::AadToken));
    assert!(
        requests
            .iter()
            .filter(|r| r.path.starts_with("/subscriptions/"))
            .all(|r| r.client_id.as_deref() == Some(principal.as_str())),
        "every ARM call as the service principal"
    );
    assert!(!requests.iter().any(|r| r.operation == Operation::ImdsToken));
}

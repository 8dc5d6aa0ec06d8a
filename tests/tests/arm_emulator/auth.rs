//! Tokens: ARM refuses requests without a valid bearer token (401 with `WWW-Authenticate`),
//! expired ones and ones for another audience; AAD issues tokens for a client secret or a
//! federated assertion and answers AAD's errors otherwise; IMDS requires `Metadata: true`,
//! serves the compute fields Cilium reads and issues managed-identity tokens.

use bytes::Bytes;
use std::time::Duration;

use weft_tests::azure::ArmEmulator;

use super::{Client, S, scenario, v};

fn aad(client: &Client, tenant: &str, form: &str) -> super::Resp {
    client.send(
        "POST",
        &format!("/{tenant}/oauth2/v2.0/token"),
        &[("content-type", "application/x-www-form-urlencoded")],
        Some(Bytes::from(form.to_owned())),
    )
}

#[test]
fn arm_requires_a_valid_bearer_token() {
    let emulator = ArmEmulator::start(scenario());
    let nics = v(&format!("{S}/Microsoft.Network/networkInterfaces"));
    let mut client = Client::anonymous(&emulator);
    let missing = client.get(&nics).expect(401);
    assert_eq!(missing.code(), "AuthenticationFailed");
    let challenge = missing
        .header("www-authenticate")
        .expect("WWW-Authenticate");
    assert!(
        challenge.starts_with("Bearer authorization_uri=\"https://login.windows.net/"),
        "{challenge}"
    );
    client.token = Some("not-a-token".into());
    assert_eq!(
        client.get(&nics).expect(401).code(),
        "InvalidAuthenticationToken"
    );
    client.token = Some(emulator.token());
    client.get(&nics).expect(200);
    emulator.revoke_tokens();
    assert_eq!(
        client.get(&nics).expect(401).code(),
        "InvalidAuthenticationToken"
    );
}

#[test]
fn expired_tokens_are_refused_and_fresh_ones_work() {
    let emulator = ArmEmulator::start(scenario());
    let nics = v(&format!("{S}/Microsoft.Network/networkInterfaces"));
    emulator.set_token_lifetime(Duration::ZERO);
    let mut client = Client::new(&emulator);
    assert_eq!(
        client.get(&nics).expect(401).code(),
        "ExpiredAuthenticationToken"
    );
    emulator.set_token_lifetime(Duration::from_mins(1));
    client.token = Some(emulator.token());
    client.get(&nics).expect(200);
}

#[test]
fn api_version_is_required() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::new(&emulator);
    let r = client
        .get(&format!("{S}/Microsoft.Network/networkInterfaces"))
        .expect(400);
    assert_eq!(r.code(), "MissingApiVersionParameter");
    client
        .get(&format!(
            "{S}/Microsoft.Network/networkInterfaces?api-version=1999-01-01"
        ))
        .expect(200);
}

#[test]
fn aad_client_credentials_with_secret_or_federated_token() {
    let emulator = ArmEmulator::start(scenario());
    let tenant = emulator.tenant_id();
    let sp = &emulator.scenario().identity.service_principals[0];
    let (id, secret) = (
        sp.client_id.clone(),
        sp.client_secret.clone().expect("a secret"),
    );
    let federated = sp.federated_token.clone().expect("a federated token");
    let scope = "https%3A%2F%2Fmanagement.core.windows.net%2F%2F.default";
    let mut client = Client::anonymous(&emulator);

    let ok = aad(
        &client,
        &tenant,
        &format!(
            "grant_type=client_credentials&client_id={id}&client_secret={secret}&scope={scope}"
        ),
    )
    .expect(200)
    .json();
    assert_eq!(ok["token_type"], "Bearer");
    assert!(ok["expires_in"].as_u64().is_some_and(|s| s > 0), "{ok}");
    client.token = ok["access_token"].as_str().map(str::to_owned);
    client
        .get(&v(&format!("{S}/Microsoft.Network/networkInterfaces")))
        .expect(200);

    let assertion = aad(&client, &tenant, &format!(
        "grant_type=client_credentials&client_id={id}&scope={scope}&client_assertion={federated}\
         &client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
    ))
    .expect(200)
    .json();
    assert!(assertion["access_token"].is_string());

    let wrong = aad(
        &client,
        &tenant,
        &format!("grant_type=client_credentials&client_id={id}&client_secret=nope&scope={scope}"),
    )
    .expect(401)
    .json();
    assert_eq!(wrong["error"], "invalid_client");
    assert!(
        wrong["error_description"]
            .as_str()
            .unwrap_or("")
            .starts_with("AADSTS7000215")
    );

    let unknown = aad(&client, &tenant, &format!(
        "grant_type=client_credentials&client_id=someone-else&client_secret={secret}&scope={scope}"
    ))
    .expect(400)
    .json();
    assert_eq!(unknown["error"], "unauthorized_client");

    let other_tenant = aad(
        &client,
        "other-tenant",
        &format!(
            "grant_type=client_credentials&client_id={id}&client_secret={secret}&scope={scope}"
        ),
    )
    .expect(400)
    .json();
    assert_eq!(other_tenant["error"], "invalid_request");

    // A token for another resource is refused by ARM.
    let graph = aad(
        &client,
        &tenant,
        &format!(
            "grant_type=client_credentials&client_id={id}&client_secret={secret}\
         &scope=https%3A%2F%2Fgraph.microsoft.com%2F.default"
        ),
    )
    .expect(200)
    .json();
    client.token = graph["access_token"].as_str().map(str::to_owned);
    let refused = client
        .get(&v(&format!("{S}/Microsoft.Network/networkInterfaces")))
        .expect(401);
    assert_eq!(refused.code(), "InvalidAuthenticationTokenAudience");
}

#[test]
fn imds_needs_the_metadata_header_and_serves_compute_fields() {
    let emulator = ArmEmulator::start(scenario());
    let client = Client::anonymous(&emulator);
    let path = "/metadata/instance/compute/azEnvironment?api-version=2019-06-01&format=text";
    let refused = client.get(path).expect(400).json();
    assert_eq!(
        refused["error"],
        "Bad request. Required metadata header not specified"
    );
    let md = [("Metadata", "true")];
    let text = |p: &str| client.send("GET", p, &md, None).expect(200).text();
    assert_eq!(text(path), "AzurePublicCloud");
    assert_eq!(
        text("/metadata/instance/compute/subscriptionId?api-version=2019-06-01&format=text"),
        "11111111-2222-3333-4444-555555555555"
    );
    assert_eq!(
        text("/metadata/instance/compute/resourceGroupName?api-version=2019-06-01&format=text"),
        "MC_weft_cluster_westeurope"
    );
    let no_version = client
        .send(
            "GET",
            "/metadata/instance/compute/azEnvironment?format=text",
            &md,
            None,
        )
        .expect(400);
    assert!(
        no_version.text().contains("api-version"),
        "{}",
        no_version.text()
    );
}

#[test]
fn imds_issues_managed_identity_tokens() {
    let emulator = ArmEmulator::start(scenario());
    let mi = emulator.scenario().identity.managed_identities[0]
        .client_id
        .clone();
    let mut client = Client::anonymous(&emulator);
    let base = "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F";
    let refused = client.get(base).expect(400).json();
    assert_eq!(refused["error"], "invalid_request");
    let md = [("Metadata", "true")];
    let token = client
        .send("GET", &format!("{base}&client_id={mi}"), &md, None)
        .expect(200)
        .json();
    for field in [
        "access_token",
        "expires_in",
        "expires_on",
        "resource",
        "token_type",
    ] {
        assert!(token[field].is_string(), "{field} is not a string: {token}");
    }
    assert_eq!(token["resource"], "https://management.azure.com/");
    assert!(
        token["expires_on"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .is_some()
    );
    let unknown = client
        .send("GET", &format!("{base}&client_id=not-mine"), &md, None)
        .expect(400)
        .json();
    assert_eq!(unknown["error_description"], "Identity not found");
    // One identity: no client_id needed.
    client.send("GET", base, &md, None).expect(200);
    client.token = token["access_token"].as_str().map(str::to_owned);
    client
        .get(&v(&format!(
            "{S}/Microsoft.Compute/virtualMachineScaleSets"
        )))
        .expect(200);
}

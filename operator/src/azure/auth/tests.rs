//! Tests of the credential chain against a local token endpoint.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

const SCOPE: &str = "https://management.core.windows.net/.default";
use crate::azure::api::testserver::{Reply, TestServer};

fn options(server: &TestServer, user_assigned: Option<&str>) -> CredentialOptions {
    CredentialOptions {
        authority_host: "https://login.invalid".into(),
        imds_base_url: server.url.clone(),
        user_assigned_identity_id: user_assigned.map(str::to_owned),
        timeout: None,
    }
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

fn form(seen: &crate::azure::api::testserver::Seen) -> BTreeMap<String, String> {
    form_urlencoded::parse(&seen.body).into_owned().collect()
}

#[tokio::test]
async fn client_secret_is_cached() {
    let server = TestServer::start().await;
    server.expect(
        "POST",
        "/tenant-1/oauth2/v2.0/token",
        Reply::json(
            200,
            &json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "tok-1"}),
        ),
    );
    let cred = Credential::from_env(
        &options(&server, None),
        env(&[
            ("AZURE_CLIENT_ID", "cid"),
            ("AZURE_TENANT_ID", "tenant-1"),
            ("AZURE_CLIENT_SECRET", "s3cret"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent"),
            ("AZURE_AUTHORITY_HOST", &format!("{}/", server.url)),
        ]),
    )
    .unwrap();
    assert_eq!(cred.kind(), &CredentialKind::ClientSecret);
    let token = cred.token(SCOPE).await.unwrap();
    assert_eq!(token.secret(), "tok-1");
    assert!(!format!("{token:?}").contains("tok-1"));
    assert!(!format!("{cred:?}").contains("s3cret"));
    assert_eq!(cred.token(SCOPE).await.unwrap().secret(), "tok-1");
    let seen = server.finish();
    assert_eq!(seen.len(), 1, "the second token came from the cache");
    assert_eq!(
        seen[0].header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let body = form(&seen[0]);
    assert_eq!(body["grant_type"], "client_credentials");
    assert_eq!(body["client_id"], "cid");
    assert_eq!(body["client_secret"], "s3cret");
    assert_eq!(
        body["scope"],
        "https://management.core.windows.net/.default"
    );
}

#[tokio::test]
async fn workload_identity_rereads_the_file() {
    let server = TestServer::start().await;
    let file = std::env::temp_dir().join(format!("weft-fed-token-{}", fastrand::u64(..)));
    std::fs::write(&file, "jwt-1\n").unwrap();
    // expires_in 0: refreshed on every call.
    for token in ["a", "b"] {
        server.expect(
            "POST",
            "/t/oauth2/v2.0/token",
            Reply::json(200, &json!({"expires_in": "0", "access_token": token})),
        );
    }
    let cred = Credential::from_env(
        &options(&server, None),
        env(&[
            ("AZURE_CLIENT_ID", "cid"),
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_SECRET", ""),
            ("AZURE_FEDERATED_TOKEN_FILE", file.to_str().unwrap()),
            ("AZURE_AUTHORITY_HOST", &server.url),
        ]),
    )
    .unwrap();
    assert_eq!(cred.kind(), &CredentialKind::WorkloadIdentity);
    assert_eq!(cred.token(SCOPE).await.unwrap().secret(), "a");
    std::fs::write(&file, "jwt-2").unwrap();
    assert_eq!(cred.token(SCOPE).await.unwrap().secret(), "b");
    std::fs::remove_file(&file).unwrap();
    let seen = server.finish();
    let assertions: Vec<String> = seen
        .iter()
        .map(|s| form(s)["client_assertion"].clone())
        .collect();
    assert_eq!(assertions, ["jwt-1", "jwt-2"]);
    let body = form(&seen[0]);
    assert_eq!(
        body["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    assert!(!body.contains_key("client_secret"));

    // A missing file names the file.
    let cred = Credential::from_env(
        &options(&server, None),
        env(&[
            ("AZURE_CLIENT_ID", "cid"),
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent/token"),
        ]),
    )
    .unwrap();
    let err = cred.token(SCOPE).await.unwrap_err();
    assert!(err.to_string().contains("/nonexistent/token"), "{err}");
}

#[tokio::test]
async fn managed_identity_with_client_id() {
    let server = TestServer::start().await;
    server.expect(
        "GET",
        "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.core.windows.net%2F&client_id=11111111-2222-3333-4444-555555555555",
        Reply::json(200, &json!({"access_token": "mi", "expires_in": "86399", "expires_on": "1", "token_type": "Bearer"})),
    );
    // The flag wins over a service principal in the environment, as in Cilium.
    let cred = Credential::from_env(
        &options(&server, Some("11111111-2222-3333-4444-555555555555")),
        env(&[
            ("AZURE_CLIENT_ID", "cid"),
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_SECRET", "s"),
        ]),
    )
    .unwrap();
    assert_eq!(cred.token(SCOPE).await.unwrap().secret(), "mi");
    let seen = server.finish();
    assert_eq!(seen[0].header("metadata"), Some("true"));
}

#[tokio::test]
async fn system_assigned_and_rejections() {
    let server = TestServer::start().await;
    server.expect(
        "GET",
        "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.core.windows.net%2F",
        Reply::json(400, &json!({"error": "invalid_request", "error_description": "Identity not found"})),
    );
    let cred = Credential::from_env(&options(&server, None), env(&[])).unwrap();
    assert_eq!(
        cred.kind(),
        &CredentialKind::ManagedIdentity { client_id: None }
    );
    let err = cred.token(SCOPE).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "token endpoint {}/metadata/identity/oauth2/token: HTTP 400: invalid_request: Identity not found",
            server.url
        )
    );
    server.finish();

    let server = TestServer::start().await;
    server.expect(
        "POST",
        "/t/oauth2/v2.0/token",
        Reply::json(
            401,
            &json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}),
        ),
    );
    server.expect(
        "POST",
        "/t/oauth2/v2.0/token",
        Reply::json(200, &json!({"access_token": "x"})),
    );
    let cred = Credential::from_env(
        &options(&server, None),
        env(&[
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_SECRET", "bad"),
            ("AZURE_AUTHORITY_HOST", &server.url),
        ]),
    )
    .unwrap();
    let err = cred.token(SCOPE).await.unwrap_err();
    assert!(
        matches!(err, AuthError::Rejected { status: 401, ref error, .. } if error == "invalid_client")
    );
    assert!(err.to_string().contains("AADSTS7000215"));
    let err = cred.token(SCOPE).await.unwrap_err();
    assert!(matches!(err, AuthError::NoExpiry { .. }), "{err}");
    server.finish();
}

#[test]
fn lifetimes() {
    let now = std::time::UNIX_EPOCH + Duration::from_secs(1_000);
    let parse = |v: serde_json::Value| {
        serde_json::from_value::<TokenResponse>(v)
            .unwrap()
            .lifetime(now)
    };
    let secs = |s| Some(Duration::from_secs(s));
    assert_eq!(
        parse(json!({"access_token": "", "expires_in": 3600})),
        secs(3600)
    );
    assert_eq!(
        parse(json!({"access_token": "", "expires_in": "60"})),
        secs(60)
    );
    assert_eq!(
        parse(json!({"access_token": "", "expires_on": 1_600})),
        secs(600)
    );
    assert_eq!(
        parse(json!({"access_token": "", "expires_on": "1600"})),
        secs(600)
    );
    assert_eq!(
        parse(json!({"access_token": "", "expires_on": "900"})),
        secs(0)
    );
    assert_eq!(
        parse(json!({"access_token": "", "expires_in": "soon"})),
        None
    );

    let t0 = Instant::now();
    assert_eq!(
        refresh_at(t0, Duration::from_hours(1)),
        t0 + Duration::from_mins(55)
    );
    assert_eq!(
        refresh_at(t0, Duration::from_mins(10)),
        t0 + Duration::from_mins(5)
    );
    assert_eq!(refresh_at(t0, Duration::ZERO), t0);
}

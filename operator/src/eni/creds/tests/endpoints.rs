//! Container credentials (the authorization token or its file, the allowed full URIs) and the
//! instance role through IMDS (token flow, role name, the document's `Code`).

use super::*;

#[tokio::test]
async fn container_credentials_with_an_authorization_token() {
    let server = TestServer::start().await;
    server.expect(
        "GET",
        "/v1/credentials",
        Reply::ok(&json_creds("ASIAPOD", in_hours(6))),
    );
    server.expect(
        "GET",
        "/v1/credentials",
        Reply::ok(&json_creds("ASIAPOD2", in_hours(6))),
    );
    let token = TempFile::new("pod-identity-token\n");
    let url = format!("{}/v1/credentials", server.url);
    let first = chain(
        "http://127.0.0.1:1",
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &url),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                "ignored-when-a-file-is-set",
            ),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", token.path()),
        ],
    );
    assert_eq!(first.kind(), SourceKind::Container);
    let c = first.credentials().await.unwrap();
    assert_eq!(c.access_key_id(), "ASIAPOD");
    assert_eq!(c.session_token(), Some("json-session"));
    let second = chain(
        "http://127.0.0.1:1",
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &url),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "plain-token"),
        ],
    );
    assert_eq!(
        second.credentials().await.unwrap().access_key_id(),
        "ASIAPOD2"
    );
    let seen = server.finish();
    assert_eq!(seen[0].header("authorization"), Some("pod-identity-token"));
    assert_eq!(seen[1].header("authorization"), Some("plain-token"));
}

#[test]
fn container_uris() {
    let relative = container_source(&env(&[(
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "/v2/credentials/abc",
    )]))
    .unwrap()
    .unwrap();
    assert_eq!(relative.url, "http://169.254.170.2/v2/credentials/abc");
    for allowed in [
        "http://169.254.170.23/v1/credentials",
        "http://[fd00:ec2::23]/v1/credentials",
        "http://169.254.170.2/x",
        "http://127.0.0.1:8080/x",
        "http://[::1]/x",
        "http://localhost/x",
    ] {
        let source = container_source(&env(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", allowed)]));
        assert!(matches!(source, Ok(Some(_))), "{allowed}");
    }
    for refused in [
        "http://169.254.169.254/latest",
        "http://example.com/creds",
        "https://10.0.0.1/creds",
        "not a url",
    ] {
        let err =
            container_source(&env(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", refused)])).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "credentials from the container credentials endpoint: AWS_CONTAINER_CREDENTIALS_FULL_URI"
            ),
            "{err}"
        );
    }
    assert!(container_source(&env(&[])).unwrap().is_none());
    let token = container_source(&env(&[
        ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/x"),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "very-secret"),
    ]))
    .unwrap()
    .unwrap();
    assert!(!format!("{token:?}").contains("very-secret"));
}

#[tokio::test]
async fn instance_role_through_imds_v2() {
    let server = TestServer::start().await;
    server.expect("PUT", "/latest/api/token", Reply::ok("imds-token"));
    server.expect(
        "GET",
        "/latest/meta-data/iam/security-credentials/",
        Reply::ok("node-role\n"),
    );
    server.expect(
        "GET",
        "/latest/meta-data/iam/security-credentials/node-role",
        Reply::ok(&json_creds("ASIANODE", in_hours(6))),
    );
    let chain = chain(&server.url, &[]);
    assert_eq!(chain.kind(), SourceKind::InstanceRole);
    let c = chain.credentials().await.unwrap();
    assert_eq!(c.access_key_id(), "ASIANODE");
    assert_eq!(c.secret_access_key(), "json-secret");
    assert!(c.expires_at().is_some());
    // Cached: no further request.
    assert_eq!(
        chain.credentials().await.unwrap().access_key_id(),
        "ASIANODE"
    );
    let seen = server.finish();
    assert!(
        seen[1..]
            .iter()
            .all(|s| s.header("x-aws-ec2-metadata-token") == Some("imds-token"))
    );
}

#[tokio::test]
async fn instance_role_failures_name_the_source() {
    let server = TestServer::start().await;
    server.expect("PUT", "/latest/api/token", Reply::ok("t"));
    server.expect(
        "GET",
        "/latest/meta-data/iam/security-credentials/",
        Reply::new(404, "no role"),
    );
    server.expect(
        "GET",
        "/latest/meta-data/iam/security-credentials/",
        Reply::ok("r"),
    );
    server.expect(
        "GET",
        "/latest/meta-data/iam/security-credentials/r",
        Reply::ok(r#"{"Code":"AssumeRoleUnauthorizedAccess","Message":"denied"}"#),
    );
    let chain = chain(&server.url, &[]);
    let err = chain.credentials().await.unwrap_err();
    assert_eq!(err.to_string(), "credentials from the instance role (IMDS)");
    assert!(matches!(err, CredentialsError::Imds { .. }));
    let err = chain.credentials().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "credentials from the instance role (IMDS): {}/latest/meta-data/iam/security-credentials/r: \
             unusable answer: Code is \"AssumeRoleUnauthorizedAccess\"",
            server.url
        )
    );
    server.finish();
}

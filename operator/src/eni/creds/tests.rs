//! The chain against scripted local endpoints: each source, their order, caching and the
//! refresh 5 minutes before expiry, errors naming the source (and no secret), and the
//! redacting `Debug`. The environment is a map; files live in a per-test temporary folder.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, SystemTime},
};

use super::*;
use crate::eni::api::testserver::{Reply, TestServer};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn options(imds: &str) -> ChainOptions {
    ChainOptions {
        region: Some("us-east-1".into()),
        imds_base_url: imds.to_owned(),
        timeout: Some(Duration::from_secs(5)),
    }
}

fn chain(imds: &str, pairs: &[(&str, &str)]) -> CredentialChain {
    CredentialChain::from_env(&options(imds), env(pairs)).unwrap()
}

/// A file in a folder of its own, removed with the guard.
struct TempFile(PathBuf);

impl TempFile {
    fn new(content: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "weft-creds-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, content).unwrap();
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn rfc3339(t: SystemTime) -> String {
    aws_smithy_types::DateTime::from(t)
        .fmt(aws_smithy_types::date_time::Format::DateTime)
        .unwrap()
}

fn sts_ok(key: &str, expires: SystemTime) -> Reply {
    Reply::ok(&format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>system:serviceaccount:kube-system:cilium-operator</SubjectFromWebIdentityToken>\
         <AssumedRoleUser><Arn>arn:aws:sts::123:assumed-role/r/s</Arn></AssumedRoleUser>\
         <Credentials><AccessKeyId>{key}</AccessKeyId><SecretAccessKey>sts-secret</SecretAccessKey>\
         <SessionToken>sts-session</SessionToken><Expiration>{}</Expiration></Credentials>\
         </AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>\
         </AssumeRoleWithWebIdentityResponse>",
        rfc3339(expires)
    ))
}

fn json_creds(key: &str, expires: SystemTime) -> String {
    format!(
        r#"{{"Code":"Success","LastUpdated":"2026-01-01T00:00:00Z","Type":"AWS-HMAC","AccessKeyId":"{key}","SecretAccessKey":"json-secret","Token":"json-session","Expiration":"{}"}}"#,
        rfc3339(expires)
    )
}

fn in_hours(h: u64) -> SystemTime {
    SystemTime::now() + Duration::from_hours(h)
}

#[tokio::test]
async fn environment_keys_come_first() {
    let file = TempFile::new("jwt");
    let chain = chain(
        "http://127.0.0.1:1",
        &[
            ("AWS_ACCESS_KEY_ID", "AKIAENV"),
            ("AWS_SECRET_ACCESS_KEY", "env-secret"),
            ("AWS_SESSION_TOKEN", "env-session"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", file.path()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123:role/r"),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
        ],
    );
    assert_eq!(chain.kind(), SourceKind::Environment);
    let c = chain.credentials().await.unwrap();
    assert_eq!(c.access_key_id(), "AKIAENV");
    assert_eq!(c.secret_access_key(), "env-secret");
    assert_eq!(c.session_token(), Some("env-session"));
    assert_eq!(c.expires_at(), None);
    // A key without its secret is not a source.
    let chain = CredentialChain::from_env(
        &options("http://127.0.0.1:1"),
        env(&[
            ("AWS_ACCESS_KEY_ID", "AKIAENV"),
            ("AWS_SECRET_ACCESS_KEY", ""),
        ]),
    )
    .unwrap();
    assert_eq!(chain.kind(), SourceKind::InstanceRole);
}

#[test]
fn the_order_of_the_sources() {
    let web = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/token"),
        ("AWS_ROLE_ARN", "arn:aws:iam::123:role/r"),
    ];
    let container = [("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds")];
    let both: Vec<_> = web.iter().chain(&container).copied().collect();
    let kinds = [
        (both.as_slice(), SourceKind::WebIdentity),
        (&web[..1], SourceKind::InstanceRole),
        (&container[..], SourceKind::Container),
        (&[][..], SourceKind::InstanceRole),
    ];
    for (pairs, want) in kinds {
        let chain = CredentialChain::with_client(
            &options("http://127.0.0.1:1"),
            env(pairs),
            transport::client().unwrap(),
        )
        .unwrap();
        assert_eq!(chain.kind(), want, "{pairs:?}");
    }
}

#[tokio::test]
async fn web_identity_through_sts_cached_until_near_expiry() {
    let server = TestServer::start().await;
    let file = TempFile::new("jwt-1\n");
    // Expires in 4 minutes: inside the refresh margin, so the next call refreshes.
    server.expect_action(
        "AssumeRoleWithWebIdentity",
        sts_ok("ASIA1", SystemTime::now() + Duration::from_mins(4)),
    );
    server.expect_action("AssumeRoleWithWebIdentity", sts_ok("ASIA2", in_hours(1)));
    let chain = chain(
        "http://127.0.0.1:1",
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", file.path()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123:role/cilium-operator"),
            ("AWS_ROLE_SESSION_NAME", "weft"),
            ("AWS_ENDPOINT_URL_STS", &format!("{}/", server.url)),
        ],
    );
    assert_eq!(chain.kind(), SourceKind::WebIdentity);
    let first = chain.credentials().await.unwrap();
    assert_eq!(first.access_key_id(), "ASIA1");
    assert_eq!(first.secret_access_key(), "sts-secret");
    assert_eq!(first.session_token(), Some("sts-session"));
    std::fs::write(&file.0, "jwt-2").unwrap();
    assert_eq!(chain.credentials().await.unwrap().access_key_id(), "ASIA2");
    // Valid for an hour: served from the cache (the server expects nothing more).
    assert_eq!(chain.credentials().await.unwrap().access_key_id(), "ASIA2");
    let seen = server.finish();
    assert_eq!(seen[0].param("Version").as_deref(), Some("2011-06-15"));
    assert_eq!(
        seen[0].param("RoleArn").as_deref(),
        Some("arn:aws:iam::123:role/cilium-operator")
    );
    assert_eq!(seen[0].param("RoleSessionName").as_deref(), Some("weft"));
    assert_eq!(seen[0].param("WebIdentityToken").as_deref(), Some("jwt-1"));
    assert_eq!(seen[1].param("WebIdentityToken").as_deref(), Some("jwt-2"));
    assert_eq!(
        seen[0].header("authorization"),
        None,
        "STS is called unsigned"
    );
}

#[tokio::test]
async fn a_refused_web_identity_names_the_source_and_no_secret() {
    let server = TestServer::start().await;
    let file = TempFile::new("secret-jwt");
    server.expect_action(
        "AssumeRoleWithWebIdentity",
        Reply::new(
            400,
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>\
             <Code>InvalidIdentityToken</Code><Message>No OpenIDConnect provider found in your account</Message>\
             </Error><RequestId>r</RequestId></ErrorResponse>",
        ),
    );
    let chain = chain(
        "http://127.0.0.1:1",
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", file.path()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123:role/r"),
            ("AWS_ENDPOINT_URL_STS", &server.url),
        ],
    );
    let err = chain.credentials().await.unwrap_err();
    let text = crate::chain(&err);
    assert_eq!(
        err.to_string(),
        format!(
            "credentials from the web identity (AWS_WEB_IDENTITY_TOKEN_FILE, STS): {}: HTTP 400: \
             InvalidIdentityToken: No OpenIDConnect provider found in your account",
            server.url
        )
    );
    assert!(!text.contains("secret-jwt"), "{text}");
    server.finish();

    let missing = chain_missing_file();
    let err = missing.credentials().await.unwrap_err();
    assert!(
        matches!(
            &err,
            CredentialsError::TokenFile {
                kind: SourceKind::WebIdentity,
                ..
            }
        ),
        "{err}"
    );
}

fn chain_missing_file() -> CredentialChain {
    chain(
        "http://127.0.0.1:1",
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/weft/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::123:role/r"),
        ],
    )
}

#[test]
fn sts_endpoints() {
    assert_eq!(
        sts_endpoint(Some("eu-west-1"), None),
        "https://sts.eu-west-1.amazonaws.com"
    );
    assert_eq!(
        sts_endpoint(Some("cn-north-1"), None),
        "https://sts.cn-north-1.amazonaws.com.cn"
    );
    assert_eq!(sts_endpoint(None, None), "https://sts.amazonaws.com");
    assert_eq!(
        sts_endpoint(Some("us-east-1"), Some("http://127.0.0.1:9/")),
        "http://127.0.0.1:9"
    );
}

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

#[tokio::test]
async fn a_failed_refresh_keeps_valid_credentials() {
    let server = TestServer::start().await;
    server.expect(
        "GET",
        "/creds",
        Reply::ok(&json_creds(
            "ASIA1",
            SystemTime::now() + Duration::from_mins(3),
        )),
    );
    server.expect(
        "GET",
        "/creds",
        Reply::new(500, r#"{"code":"Internal","message":"x"}"#),
    );
    server.expect("GET", "/creds", Reply::ok(r#"{"AccessKeyId":"ASIA3"}"#));
    let chain = chain(
        "http://127.0.0.1:1",
        &[(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            &format!("{}/creds", server.url),
        )],
    );
    assert_eq!(chain.credentials().await.unwrap().access_key_id(), "ASIA1");
    // The refresh fails; the current ones have 3 minutes left.
    assert_eq!(chain.credentials().await.unwrap().access_key_id(), "ASIA1");
    // Still within the margin: asked again; a document without a secret is refused.
    assert_eq!(chain.credentials().await.unwrap().access_key_id(), "ASIA1");
    server.finish();

    // Nothing cached: the failure is the answer.
    let server = TestServer::start().await;
    server.expect(
        "GET",
        "/creds",
        Reply::new(403, r#"{"code":"AccessDenied","message":"no"}"#),
    );
    let chain = CredentialChain::from_env(
        &options("http://127.0.0.1:1"),
        env(&[(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            &format!("{}/creds", server.url),
        )]),
    )
    .unwrap();
    let err = chain.credentials().await.unwrap_err();
    assert!(
        matches!(&err, CredentialsError::Rejected { kind: SourceKind::Container, status: 403, code, .. } if code == "AccessDenied"),
        "{err}"
    );
    server.finish();
}

#[test]
fn debug_never_shows_secrets() {
    let c = Credentials::new("AKIA1", "the-secret", Some("the-session".into()), None);
    let text = format!("{c:?}");
    assert!(text.contains("AKIA1"));
    assert!(
        !text.contains("the-secret") && !text.contains("the-session"),
        "{text}"
    );
    let chain = CredentialChain::with_client(
        &options("http://127.0.0.1:1"),
        env(&[
            ("AWS_ACCESS_KEY_ID", "AKIA1"),
            ("AWS_SECRET_ACCESS_KEY", "the-secret"),
        ]),
        transport::client().unwrap(),
    )
    .unwrap();
    let text = format!("{chain:?}");
    assert!(!text.contains("the-secret"), "{text}");
}

#[test]
fn credential_documents() {
    let c = credential_document(json_creds("A", in_hours(1)).as_bytes()).unwrap();
    assert_eq!(c.access_key_id(), "A");
    assert!(c.expires_at().unwrap() > SystemTime::now());
    assert!(!c.needs_refresh(SystemTime::now()));
    assert!(c.needs_refresh(SystemTime::now() + Duration::from_mins(56)));
    let cases = [
        (r#"{"SecretAccessKey":"s"}"#, "no AccessKeyId"),
        (r#"{"AccessKeyId":"a"}"#, "no SecretAccessKey"),
        (
            r#"{"AccessKeyId":"a","SecretAccessKey":"s","Expiration":"tomorrow"}"#,
            "Expiration \"tomorrow\" is not an RFC 3339 time",
        ),
        (
            "<html>",
            "not a JSON credentials document (line 1, column 1)",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(credential_document(body.as_bytes()).unwrap_err(), want);
    }
    assert_eq!(
        parse_time("2026-12-03T12:00:00Z").unwrap(),
        SystemTime::UNIX_EPOCH + Duration::from_hours(498_972)
    );
}

//! The chain: the environment source, the order of the sources, keeping valid credentials
//! when a refresh fails, the redacting `Debug`, the credential documents; STS in
//! `web_identity`, the container endpoint and IMDS in `endpoints`. Network sources are
//! scripted local servers, the environment is a map, files live in a per-test folder.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, SystemTime},
};

use super::*;
use crate::eni::api::testserver::{Reply, TestServer};

mod endpoints;
mod web_identity;

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

//! Web identity: STS `AssumeRoleWithWebIdentity` (the token file re-read on refresh, the
//! cache until 5 minutes before expiry), a refusal naming the source without the token, and
//! the STS endpoints.

use super::*;

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

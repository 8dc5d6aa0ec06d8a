//! Credentials as the operator finds them (spec §3.6): from the environment, and from a web
//! identity (IRSA: `AWS_ROLE_ARN` + `AWS_WEB_IDENTITY_TOKEN_FILE`, exchanged at STS — the
//! emulator's `AssumeRoleWithWebIdentity`, through `AWS_ENDPOINT_URL_STS`), every EC2 request
//! then signed with the key STS issued; and an STS that refuses the web identity: the log
//! names the source tried and STS's refusal, and prints neither the token nor a secret.

use std::time::Duration;

use weft_tests::{
    ec2::{ACTIONS, Scenario},
    unique,
};

use super::{ACCESS_KEY, Aws, SECRET_KEY, log_lines};

const ROLE: &str = "arn:aws:iam::123456789012:role/weft-operator";
const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.weft-e2e-token.signature";

/// A token file holding `token`, removed on drop.
struct TokenFile(std::path::PathBuf);

impl TokenFile {
    fn new(token: &str) -> Self {
        let path = std::env::temp_dir().join(unique("weft-web-identity-"));
        std::fs::write(&path, token).expect("write the token file");
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Strings no log line may carry.
fn assert_no_secret(log: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!log.contains(secret), "{secret:?} printed:\n{log}");
    }
    // The emulator's issued secrets and session tokens have these forms.
    assert!(
        !log.contains("weft-secret-"),
        "an issued secret printed:\n{log}"
    );
    assert!(
        !log.contains("weft-session-"),
        "a session token printed:\n{log}"
    );
}

#[test]
fn credentials_from_the_environment_sign_every_call() {
    let aws = Aws::with(Scenario::example());
    aws.add_node("node-e");
    let op = aws.operator(&[]);
    aws.wait_pool("node-e", 8, Duration::from_mins(1), &op);
    assert!(
        !log_lines(&op, &["AWS credentials source chosen", "environment"]).is_empty(),
        "the source is logged:\n{}",
        op.log()
    );
    let keys: Vec<Option<String>> = (aws.ec2.requests().into_iter())
        .filter(|r| ACTIONS.contains(&r.action.as_str()))
        .map(|r| r.access_key)
        .filter(|k| k.as_deref() != Some(ACCESS_KEY))
        .collect();
    assert!(keys.is_empty(), "signed with other keys: {keys:?}");
    assert_no_secret(&op.log(), &[SECRET_KEY]);
}

#[test]
fn credentials_from_a_web_identity_through_sts_sign_every_call() {
    let aws = Aws::with(Scenario::example().web_identity(ROLE, &[TOKEN]));
    let token = TokenFile::new(TOKEN);
    let url = aws.ec2.url();
    aws.add_node("node-w");
    let op = aws.operator_with_env(
        &[],
        &[
            ("AWS_ROLE_ARN", ROLE),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token.path()),
            ("AWS_ROLE_SESSION_NAME", "weft-e2e"),
            ("AWS_ENDPOINT_URL_STS", &url),
        ],
    );
    aws.wait_pool("node-w", 8, Duration::from_mins(1), &op);
    assert!(
        !log_lines(&op, &["AWS credentials source chosen", "web identity"]).is_empty(),
        "the source is logged:\n{}",
        op.log()
    );
    let sts = aws.ec2.log().of("AssumeRoleWithWebIdentity");
    assert!(!sts.is_empty(), "STS was asked");
    assert_eq!(sts[0].param("RoleArn"), Some(ROLE));
    assert_eq!(sts[0].param("RoleSessionName"), Some("weft-e2e"));
    let keys: Vec<Option<String>> = (aws.ec2.requests().into_iter())
        .filter(|r| ACTIONS.contains(&r.action.as_str()))
        .map(|r| r.access_key)
        .filter(|k| !k.as_deref().is_some_and(|k| k.starts_with("ASIAWEFT")))
        .collect();
    assert!(
        keys.is_empty(),
        "EC2 calls not signed with STS's key: {keys:?}"
    );
    assert_no_secret(&op.log(), &[TOKEN]);
}

#[test]
fn an_sts_refusing_the_web_identity_is_a_clear_error_without_secrets() {
    let aws = Aws::with(Scenario::example().web_identity(ROLE, &[TOKEN]));
    let wrong = "eyJhbGciOiJSUzI1NiJ9.not-the-token.signature";
    let token = TokenFile::new(wrong);
    let url = aws.ec2.url();
    aws.add_node("node-r");
    let mut op = aws.operator_with_env(
        &[],
        &[
            ("AWS_ROLE_ARN", ROLE),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token.path()),
            ("AWS_ENDPOINT_URL_STS", &url),
        ],
    );
    op.wait_log("InvalidIdentityToken", Duration::from_secs(30));
    let lines = log_lines(&op, &["InvalidIdentityToken", "web identity"]);
    assert!(
        !lines.is_empty(),
        "the source and STS's refusal in one line:\n{}",
        op.log()
    );
    let sent: Vec<String> = (aws.ec2.requests().into_iter())
        .filter(|r| ACTIONS.contains(&r.action.as_str()))
        .map(|r| r.action)
        .collect();
    assert!(sent.is_empty(), "no EC2 call without credentials: {sent:?}");
    assert!(
        super::pool(&aws.node("node-r")).is_empty(),
        "nothing allocated"
    );
    assert_no_secret(&op.log(), &[wrong]);
}

//! Credentials the emulator hands out and accepts: STS `AssumeRoleWithWebIdentity` (IRSA: the
//! role ARN and a token the scenario accepts; STS's own answer and error shapes, namespace
//! `https://sts.amazonaws.com/doc/2011-06-15/`), the instance role's credentials IMDS serves,
//! and the set of access keys EC2 requests may be signed with (the scenario's, or any, plus
//! every key issued here) with the secrets the emulator knows (the scenario's `secretKeys` and
//! every key issued here), whose signatures are verified. Knows nothing of HTTP or the model.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
    time::{Duration, SystemTime},
};

use super::{
    error::Ec2Error,
    faults::lock,
    query::Params,
    scenario::WebIdentitySpec,
    xml::{Xml, escape, iso8601},
};

/// The STS namespace.
pub const NAMESPACE: &str = "https://sts.amazonaws.com/doc/2011-06-15/";

/// Temporary credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// `ASIA…`.
    pub access_key: String,
    /// The secret.
    pub secret: String,
    /// The session token.
    pub session_token: String,
    /// When they expire.
    pub expiration: SystemTime,
}

/// Which access keys are accepted.
#[derive(Debug, Default)]
pub struct Keys {
    /// The scenario's keys; empty: any.
    pub configured: Vec<String>,
    /// Access key → secret: the scenario's and every issued one (signatures verified).
    secrets: Mutex<HashMap<String, String>>,
    issued: Mutex<HashSet<String>>,
    /// Credentials lifetime.
    pub lifetime: Mutex<Option<Duration>>,
}

impl Keys {
    /// The scenario's keys (empty: any).
    #[must_use]
    pub fn new(configured: Vec<String>, secrets: HashMap<String, String>) -> Self {
        Self {
            configured,
            secrets: Mutex::new(secrets),
            ..Self::default()
        }
    }

    /// The secret of `key`, when the emulator knows it (its signatures are then verified).
    #[must_use]
    pub fn secret(&self, key: &str) -> Option<String> {
        lock(&self.secrets).get(key).cloned()
    }

    /// Whether EC2 accepts `key`.
    #[must_use]
    pub fn accepted(&self, key: &str) -> bool {
        self.configured.is_empty()
            || self.configured.iter().any(|k| k == key)
            || lock(&self.secrets).contains_key(key)
            || lock(&self.issued).contains(key)
    }

    /// Issue fresh temporary credentials (default lifetime one hour).
    pub fn issue(&self) -> Issued {
        let lifetime = lock(&self.lifetime).unwrap_or(Duration::from_hours(1));
        let access_key = format!("ASIAWEFT{:012X}", fastrand::u64(..) & 0xffff_ffff_ffff);
        let secret = format!("weft-secret-{:032x}", fastrand::u128(..));
        lock(&self.issued).insert(access_key.clone());
        lock(&self.secrets).insert(access_key.clone(), secret.clone());
        Issued {
            access_key,
            secret,
            session_token: format!("weft-session-{:048x}", fastrand::u128(..)),
            expiration: SystemTime::now() + lifetime,
        }
    }

    /// Stop accepting every issued key.
    pub fn revoke_issued(&self) {
        let issued: Vec<String> = lock(&self.issued).drain().collect();
        let mut secrets = lock(&self.secrets);
        for key in issued {
            secrets.remove(&key);
        }
    }
}

/// STS's error body.
#[must_use]
pub fn error_body(e: &Ec2Error, request_id: &str) -> String {
    let kind = if e.status >= 500 {
        "Receiver"
    } else {
        "Sender"
    };
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"{NAMESPACE}\"><Error><Type>{kind}</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
        escape(&e.code),
        escape(&e.message),
        escape(request_id)
    )
}

/// `AssumeRoleWithWebIdentity`.
///
/// # Errors
/// A missing parameter (`ValidationError`), another role (`AccessDenied`), a token not
/// accepted (`InvalidIdentityToken`).
pub fn assume_role_with_web_identity(
    keys: &Keys,
    spec: Option<&WebIdentitySpec>,
    account: &str,
    p: &Params,
    rid: &str,
) -> Result<String, Ec2Error> {
    let need = |name: &str| {
        p.get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
            Ec2Error::client("ValidationError", format!("1 validation error detected: Value null at '{name}' failed to satisfy constraint: Member must not be null"))
        })
    };
    let role = need("RoleArn")?;
    let session = need("RoleSessionName")?;
    let token = need("WebIdentityToken")?;
    let Some(spec) = spec.filter(|s| s.role_arn == role) else {
        return Err(Ec2Error::new(
            403,
            "AccessDenied",
            "Not authorized to perform sts:AssumeRoleWithWebIdentity",
        ));
    };
    if !spec.tokens.iter().any(|t| t.trim() == token.trim()) {
        return Err(Ec2Error::client(
            "InvalidIdentityToken",
            "The web identity token is not accepted by the identity provider.",
        ));
    }
    let c = keys.issue();
    let role_name = role.rsplit('/').next().unwrap_or(role);
    Ok(Xml::document(
        "AssumeRoleWithWebIdentityResponse",
        NAMESPACE,
        |x| {
            x.el("AssumeRoleWithWebIdentityResult", |x| {
                x.leaf(
                    "SubjectFromWebIdentityToken",
                    "system:serviceaccount:kube-system:weft-operator",
                )
                .el("AssumedRoleUser", |x| {
                    x.leaf(
                        "Arn",
                        format!("arn:aws:sts::{account}:assumed-role/{role_name}/{session}"),
                    )
                    .leaf("AssumedRoleId", format!("AROAWEFT0000000000000:{session}"));
                })
                .el("Credentials", |x| {
                    x.leaf("SessionToken", &c.session_token)
                        .leaf("SecretAccessKey", &c.secret)
                        .leaf("Expiration", iso8601(c.expiration))
                        .leaf("AccessKeyId", &c.access_key);
                })
                .leaf("Provider", "oidc.eks.us-east-1.amazonaws.com/id/WEFT")
                .leaf("Audience", "sts.amazonaws.com");
            })
            .el("ResponseMetadata", |x| {
                x.leaf("RequestId", rid);
            });
        },
    ))
}

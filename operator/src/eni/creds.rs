//! AWS credentials for signing EC2 calls: the default chain in the AWS SDKs' order (§3.6) —
//! (1) environment keys (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`),
//! (2) web identity / IRSA (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`
//! [+ `AWS_ROLE_SESSION_NAME`] through STS `AssumeRoleWithWebIdentity`), (3) container
//! credentials / EKS Pod Identity (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or `_FULL_URI`),
//! (4) the instance role through IMDS. The shared profile file (`~/.aws/credentials`, which the
//! SDKs read between 2 and 3) is not read: an operator pod has none. As in the SDKs, the
//! first source that is *configured* is used (its failure is not covered by the next one).
//! Credentials are cached and refreshed 5 minutes before they expire; their `Debug` redacts
//! the secret and the session token, and no error carries either. The environment is read
//! through an injected lookup.

use std::{fmt, path::PathBuf, sync::Arc, time::SystemTime};

use futures::future::BoxFuture;
use tokio::sync::Mutex;
use tracing::{info, warn};

use weft_aws_imds::{Imds, ImdsError};

use crate::cloud::transport::{self, HttpClient, TransportError};

mod container;
mod instance;
mod sts;
#[cfg(test)]
mod tests;

pub use container::{ContainerSource, container_source};
pub use sts::{WebIdentitySource, sts_endpoint};

/// How long before expiry credentials are refreshed.
pub const REFRESH_EARLY: std::time::Duration = std::time::Duration::from_mins(5);
/// Timeout of one credential request.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Largest credential answer read.
const BODY_LIMIT: usize = 1 << 20;

/// An access key pair, with a session token and an expiry for temporary ones.
#[derive(Clone)]
pub struct Credentials {
    access_key_id: String,
    secret_access_key: Arc<str>,
    session_token: Option<Arc<str>>,
    expires_at: Option<SystemTime>,
}

impl Credentials {
    /// Credentials from their parts.
    #[must_use]
    pub fn new(
        access_key_id: &str,
        secret_access_key: &str,
        session_token: Option<String>,
        expires_at: Option<SystemTime>,
    ) -> Self {
        Self {
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.into(),
            session_token: session_token.filter(|t| !t.is_empty()).map(Into::into),
            expires_at,
        }
    }

    /// The access key ID (not a secret).
    #[must_use]
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The secret key, for signing only.
    #[must_use]
    pub fn secret_access_key(&self) -> &str {
        &self.secret_access_key
    }

    /// The session token of temporary credentials, for signing only.
    #[must_use]
    pub fn session_token(&self) -> Option<&str> {
        self.session_token.as_deref()
    }

    /// When they expire (`None`: never).
    #[must_use]
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at
    }

    /// Whether they should be refreshed at `now` (within [`REFRESH_EARLY`] of expiry).
    #[must_use]
    pub fn needs_refresh(&self, now: SystemTime) -> bool {
        self.expires_at.is_some_and(|at| now + REFRESH_EARLY >= at)
    }

    fn expired(&self, now: SystemTime) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Which source of the chain credentials come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`.
    Environment,
    /// STS `AssumeRoleWithWebIdentity` (IRSA).
    WebIdentity,
    /// The container credentials endpoint (ECS, EKS Pod Identity).
    Container,
    /// The instance role through IMDS.
    InstanceRole,
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Environment => "environment (AWS_ACCESS_KEY_ID)",
            Self::WebIdentity => "web identity (AWS_WEB_IDENTITY_TOKEN_FILE, STS)",
            Self::Container => "container credentials endpoint",
            Self::InstanceRole => "instance role (IMDS)",
        })
    }
}

/// Credentials could not be had; names the source tried, never a secret.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The HTTP client could not be built.
    #[error("building the credentials HTTP client failed")]
    Client {
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// The source is configured in a way that cannot work.
    #[error("credentials from the {kind}: {what}")]
    Config {
        /// The source.
        kind: SourceKind,
        /// What is wrong and how to fix it.
        what: String,
    },
    /// A token file could not be read.
    #[error("credentials from the {kind}: reading {path} failed")]
    TokenFile {
        /// The source.
        kind: SourceKind,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The credentials endpoint could not be reached.
    #[error("credentials from the {kind}: {endpoint}: request failed")]
    Transport {
        /// The source.
        kind: SourceKind,
        /// The endpoint.
        endpoint: String,
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// The credentials endpoint refused.
    #[error("credentials from the {kind}: {endpoint}: HTTP {status}: {code}: {message}")]
    Rejected {
        /// The source.
        kind: SourceKind,
        /// The endpoint.
        endpoint: String,
        /// HTTP status.
        status: u16,
        /// The endpoint's error code (empty if none).
        code: String,
        /// The endpoint's error message (empty if none).
        message: String,
    },
    /// The answer is not a credentials document.
    #[error("credentials from the {kind}: {endpoint}: unusable answer: {what}")]
    Invalid {
        /// The source.
        kind: SourceKind,
        /// The endpoint.
        endpoint: String,
        /// What is missing or wrong (never a value).
        what: String,
    },
    /// IMDS failed.
    #[error("credentials from the {}", SourceKind::InstanceRole)]
    Imds {
        /// Why.
        #[source]
        source: Box<ImdsError>,
    },
}

/// Something that hands out credentials (the chain, or fixed ones for an emulator).
pub trait ProvideCredentials: Send + Sync + fmt::Debug {
    /// Valid credentials.
    fn credentials(&self) -> BoxFuture<'_, Result<Credentials, CredentialsError>>;
}

/// Fixed credentials.
#[derive(Debug, Clone)]
pub struct StaticCredentials(Credentials);

impl StaticCredentials {
    /// Always `credentials`.
    #[must_use]
    pub fn new(credentials: Credentials) -> Self {
        Self(credentials)
    }
}

impl ProvideCredentials for StaticCredentials {
    fn credentials(&self) -> BoxFuture<'_, Result<Credentials, CredentialsError>> {
        Box::pin(async { Ok(self.0.clone()) })
    }
}

/// Where the chain's network sources are.
#[derive(Clone, Debug)]
pub struct ChainOptions {
    /// The region (`--aws-region`, `AWS_REGION`, ...): picks the regional STS endpoint.
    pub region: Option<String>,
    /// IMDS base URL (`--aws-imds-endpoint`).
    pub imds_base_url: String,
    /// Timeout of one credential request.
    pub timeout: Option<std::time::Duration>,
}

#[derive(Debug)]
enum Source {
    Environment(Credentials),
    WebIdentity(WebIdentitySource),
    Container(ContainerSource),
    InstanceRole,
}

/// The chain with its cache.
pub struct CredentialChain {
    source: Source,
    http: HttpClient,
    imds: Imds,
    timeout: Option<std::time::Duration>,
    cache: Mutex<Option<Credentials>>,
}

impl fmt::Debug for CredentialChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialChain")
            .field("source", &self.kind())
            .finish_non_exhaustive()
    }
}

impl CredentialChain {
    /// Pick the source from the environment (`env` looks a variable up; empty is unset).
    ///
    /// # Errors
    /// [`CredentialsError::Client`] when the HTTP client cannot be built;
    /// [`CredentialsError::Config`] for a container URI that is not allowed.
    pub fn from_env(
        options: &ChainOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CredentialsError> {
        let http = transport::client().map_err(|source| CredentialsError::Client {
            source: Box::new(source),
        })?;
        Self::with_client(options, env, http)
    }

    /// [`CredentialChain::from_env`] over an existing HTTP client.
    ///
    /// # Errors
    /// See [`CredentialChain::from_env`].
    pub fn with_client(
        options: &ChainOptions,
        env: impl Fn(&str) -> Option<String>,
        http: HttpClient,
    ) -> Result<Self, CredentialsError> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let source = if let (Some(id), Some(secret)) =
            (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
        {
            Source::Environment(Credentials::new(
                &id,
                &secret,
                var("AWS_SESSION_TOKEN"),
                None,
            ))
        } else if let Some(web) = WebIdentitySource::from_env(options.region.as_deref(), &var) {
            Source::WebIdentity(web)
        } else if let Some(container) = container_source(&var)? {
            Source::Container(container)
        } else {
            Source::InstanceRole
        };
        let mut imds = Imds::new(&options.imds_base_url);
        if let Some(timeout) = options.timeout {
            imds = imds.timeout(timeout);
        }
        let chain = Self {
            source,
            http,
            imds,
            timeout: options.timeout,
            cache: Mutex::new(None),
        };
        info!(source = %chain.kind(), "AWS credentials source chosen");
        Ok(chain)
    }

    /// The source in use.
    #[must_use]
    pub fn kind(&self) -> SourceKind {
        match &self.source {
            Source::Environment(_) => SourceKind::Environment,
            Source::WebIdentity(_) => SourceKind::WebIdentity,
            Source::Container(_) => SourceKind::Container,
            Source::InstanceRole => SourceKind::InstanceRole,
        }
    }

    async fn fetch(&self) -> Result<Credentials, CredentialsError> {
        match &self.source {
            Source::Environment(c) => Ok(c.clone()),
            Source::WebIdentity(web) => web.fetch(&self.http, self.timeout).await,
            Source::Container(container) => container.fetch(&self.http, self.timeout).await,
            Source::InstanceRole => instance::fetch(&self.imds).await,
        }
    }
}

impl ProvideCredentials for CredentialChain {
    fn credentials(&self) -> BoxFuture<'_, Result<Credentials, CredentialsError>> {
        Box::pin(async move {
            let mut cache = self.cache.lock().await;
            let now = SystemTime::now();
            if let Some(c) = cache.as_ref()
                && !c.needs_refresh(now)
            {
                return Ok(c.clone());
            }
            match self.fetch().await {
                Ok(fresh) => {
                    *cache = Some(fresh.clone());
                    Ok(fresh)
                }
                Err(error) => match cache.as_ref() {
                    Some(c) if !c.expired(now) => {
                        warn!(%error, "refreshing the AWS credentials failed; the current ones are still valid");
                        Ok(c.clone())
                    }
                    _ => Err(error),
                },
            }
        })
    }
}

/// The credential document of the container endpoint and of IMDS:
/// `AccessKeyId`, `SecretAccessKey`, `Token`, `Expiration` (RFC 3339).
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CredentialDocument {
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    token: Option<String>,
    expiration: Option<String>,
}

/// Read a credential document; `Err(what)` names the missing or bad field (never a value).
fn credential_document(body: &[u8]) -> Result<Credentials, String> {
    let doc: CredentialDocument = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not a JSON credentials document (line {}, column {})",
            e.line(),
            e.column()
        )
    })?;
    let id = doc
        .access_key_id
        .filter(|v| !v.is_empty())
        .ok_or("no AccessKeyId")?;
    let secret = doc
        .secret_access_key
        .filter(|v| !v.is_empty())
        .ok_or("no SecretAccessKey")?;
    let expires_at = doc.expiration.as_deref().map(parse_time).transpose()?;
    Ok(Credentials::new(&id, &secret, doc.token, expires_at))
}

/// An RFC 3339 time such as `2026-12-03T12:00:00Z`.
fn parse_time(text: &str) -> Result<SystemTime, String> {
    use aws_smithy_types::date_time::{DateTime, Format};
    DateTime::from_str(text.trim(), Format::DateTimeWithOffset)
        .ok()
        .and_then(|t| SystemTime::try_from(t).ok())
        .ok_or_else(|| format!("Expiration {text:?} is not an RFC 3339 time"))
}

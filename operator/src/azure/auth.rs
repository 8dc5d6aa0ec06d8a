//! ARM access tokens: the credential chain of Azure's `DefaultAzureCredential`, in its order
//! (§6): (a) a service principal from `AZURE_CLIENT_ID`/`AZURE_TENANT_ID`/`AZURE_CLIENT_SECRET`,
//! (b) workload identity from `AZURE_FEDERATED_TOKEN_FILE` (re-read on every refresh), (c)
//! managed identity through IMDS. With `--azure-user-assigned-identity-id` only (c), with that
//! client ID, as Cilium. Tokens are cached and refreshed before they expire, and never logged
//! (the [`AccessToken`] `Debug` redacts). The environment is read through an injected lookup.
//!
//! Why not the official `azure_identity` crate (checked at 1.0/1.1-beta): its IMDS endpoint is a
//! constant (`169.254.169.254`), changeable only through the App Service/Arc variables
//! (`IDENTITY_ENDPOINT`, a different protocol), so managed identity cannot be pointed at an IMDS
//! emulator; its default transport is reqwest, a second HTTP/TLS stack next to kube's
//! hyper + rustls (a custom transport means implementing `azure_core`'s `HttpClient`), and it
//! brings `azure_core`, `url`, `time`, `async-trait` and more for three token requests. It also
//! has no `DefaultAzureCredential` (the chain is built by hand either way). This module is the
//! three requests, over [`crate::cloud::transport`].

use std::{collections::BTreeMap, fmt, path::PathBuf, sync::Arc, time::Duration};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::Method;
use tokio::{sync::Mutex, time::Instant};
use tracing::{debug, info, warn};

use super::imds::Cloud;
use crate::cloud::transport::{self, HttpClient, TransportError};

mod token;

pub use token::refresh_at;
use token::{ErrorBody, TokenResponse};

/// api-version of IMDS's managed-identity token endpoint.
pub const MSI_API_VERSION: &str = "2018-02-01";
/// Token responses are small.
const BODY_LIMIT: usize = 1 << 20;
/// Default timeout of one token request.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The HTTP client could not be built.
    #[error("building the token client failed")]
    Client {
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// The token endpoint could not be reached.
    #[error("token endpoint {endpoint}: request failed")]
    Transport {
        /// The endpoint (no query).
        endpoint: String,
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// The token endpoint refused.
    #[error("token endpoint {endpoint}: HTTP {status}: {error}: {description}")]
    Rejected {
        /// The endpoint (no query).
        endpoint: String,
        /// HTTP status.
        status: u16,
        /// AAD's (or IMDS's) `error`.
        error: String,
        /// AAD's `error_description`.
        description: String,
    },
    /// The token endpoint's answer is not a token response.
    #[error("token endpoint {endpoint}: the answer is not a token response")]
    Decode {
        /// The endpoint (no query).
        endpoint: String,
        /// Why (the body is not echoed: it may hold a token).
        #[source]
        source: serde_json::Error,
    },
    /// The answer has neither `expires_in` nor `expires_on`.
    #[error("token endpoint {endpoint}: the token response has neither expires_in nor expires_on")]
    NoExpiry {
        /// The endpoint (no query).
        endpoint: String,
    },
    /// The federated token file could not be read.
    #[error("reading the federated token file {path} (AZURE_FEDERATED_TOKEN_FILE) failed")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A bearer token; its `Debug` never shows the secret.
#[derive(Clone)]
pub struct AccessToken {
    secret: Arc<str>,
    expires_at: Instant,
}

impl AccessToken {
    /// A token valid until `expires_at`.
    #[must_use]
    pub fn new(secret: &str, expires_at: Instant) -> Self {
        Self {
            secret: secret.into(),
            expires_at,
        }
    }

    /// The token, for the `Authorization` header only.
    #[must_use]
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// When it expires.
    #[must_use]
    pub fn expires_at(&self) -> Instant {
        self.expires_at
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("secret", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Something that hands out tokens (the chain, or a fixed token for an emulator).
pub trait TokenCredential: Send + Sync + fmt::Debug {
    /// A valid token for `scope` (an OAuth2 v2 scope, `{audience}.default`).
    fn token<'a>(&'a self, scope: &'a str) -> BoxFuture<'a, Result<AccessToken, AuthError>>;
}

/// A fixed token (an emulator that checks only that one is sent, tests).
#[derive(Debug, Clone)]
pub struct StaticToken(AccessToken);

impl StaticToken {
    /// Always `secret`.
    #[must_use]
    pub fn new(secret: &str) -> Self {
        Self(AccessToken::new(
            secret,
            Instant::now() + Duration::from_hours(100 * 365 * 24),
        ))
    }
}

impl TokenCredential for StaticToken {
    fn token<'a>(&'a self, _scope: &'a str) -> BoxFuture<'a, Result<AccessToken, AuthError>> {
        Box::pin(async { Ok(self.0.clone()) })
    }
}

/// Where the chain gets its endpoints.
#[derive(Clone, Debug)]
pub struct CredentialOptions {
    /// AAD base URL, e.g. `https://login.microsoftonline.com` (`AZURE_AUTHORITY_HOST` wins).
    pub authority_host: String,
    /// IMDS base URL (`http://169.254.169.254`).
    pub imds_base_url: String,
    /// `--azure-user-assigned-identity-id`: managed identity with this client ID only (the
    /// configuration refuses a resource ID there).
    pub user_assigned_identity_id: Option<String>,
    /// Timeout of one token request (`None`: none).
    pub timeout: Option<Duration>,
}

impl CredentialOptions {
    /// The options for `cloud` with IMDS at `imds_base_url`.
    #[must_use]
    pub fn for_cloud(cloud: &Cloud, imds_base_url: &str) -> Self {
        Self {
            authority_host: cloud.authority_url(),
            imds_base_url: imds_base_url.to_owned(),
            user_assigned_identity_id: None,
            timeout: Some(TIMEOUT),
        }
    }
}

/// Which link of the chain is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    /// Service principal with a client secret.
    ClientSecret,
    /// Workload identity (federated token file).
    WorkloadIdentity,
    /// Managed identity through IMDS, system-assigned or with a client ID.
    ManagedIdentity {
        /// The user-assigned identity's client ID.
        client_id: Option<String>,
    },
}

#[derive(Clone)]
enum Source {
    ClientSecret {
        endpoint: String,
        client_id: String,
        secret: String,
    },
    Workload {
        endpoint: String,
        client_id: String,
        file: PathBuf,
    },
    Managed {
        endpoint: String,
        client_id: Option<String>,
    },
}

struct Cached {
    token: AccessToken,
    refresh_at: Instant,
}

/// The credential chain with its token cache.
pub struct Credential {
    source: Source,
    kind: CredentialKind,
    http: HttpClient,
    timeout: Option<Duration>,
    cache: Mutex<BTreeMap<String, Cached>>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

fn token_endpoint(authority: &str, tenant: &str) -> String {
    let authority = authority.trim_end_matches('/');
    let authority = if authority.contains("://") {
        authority.to_owned()
    } else {
        format!("https://{authority}")
    };
    format!("{authority}/{tenant}/oauth2/v2.0/token")
}

impl Credential {
    /// Pick the chain's link from the environment (`env` looks a variable up; empty is unset).
    ///
    /// # Errors
    /// [`AuthError::Client`] when the HTTP client cannot be built.
    pub fn from_env(
        options: &CredentialOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, AuthError> {
        let http = transport::client().map_err(|source| AuthError::Client {
            source: Box::new(source),
        })?;
        Self::with_client(options, env, http)
    }

    /// [`Credential::from_env`] over an existing HTTP client.
    ///
    /// # Errors
    /// See [`Credential::from_env`].
    pub fn with_client(
        options: &CredentialOptions,
        env: impl Fn(&str) -> Option<String>,
        http: HttpClient,
    ) -> Result<Self, AuthError> {
        let var = |name: &str| env(name).filter(|v| !v.is_empty());
        let managed = |client_id: Option<String>| Source::Managed {
            endpoint: format!(
                "{}/metadata/identity/oauth2/token",
                options.imds_base_url.trim_end_matches('/')
            ),
            client_id,
        };
        let authority =
            var("AZURE_AUTHORITY_HOST").unwrap_or_else(|| options.authority_host.clone());
        let source = if let Some(id) = &options.user_assigned_identity_id {
            managed(Some(id.trim().to_owned()))
        } else {
            match (
                var("AZURE_CLIENT_ID"),
                var("AZURE_TENANT_ID"),
                var("AZURE_CLIENT_SECRET"),
                var("AZURE_FEDERATED_TOKEN_FILE"),
            ) {
                (Some(client_id), Some(tenant), Some(secret), _) => Source::ClientSecret {
                    endpoint: token_endpoint(&authority, &tenant),
                    client_id,
                    secret,
                },
                (Some(client_id), Some(tenant), None, Some(file)) => Source::Workload {
                    endpoint: token_endpoint(&authority, &tenant),
                    client_id,
                    file: file.into(),
                },
                (client_id, ..) => managed(client_id),
            }
        };
        let kind = match &source {
            Source::ClientSecret { .. } => CredentialKind::ClientSecret,
            Source::Workload { .. } => CredentialKind::WorkloadIdentity,
            Source::Managed { client_id, .. } => CredentialKind::ManagedIdentity {
                client_id: client_id.clone(),
            },
        };
        info!(credential = ?kind, "Azure credential chosen");
        Ok(Self {
            source,
            kind,
            http,
            timeout: options.timeout,
            cache: Mutex::new(BTreeMap::new()),
        })
    }

    /// The link in use.
    #[must_use]
    pub fn kind(&self) -> &CredentialKind {
        &self.kind
    }

    fn endpoint(&self) -> &str {
        match &self.source {
            Source::ClientSecret { endpoint, .. }
            | Source::Workload { endpoint, .. }
            | Source::Managed { endpoint, .. } => endpoint,
        }
    }

    async fn fetch(&self, scope: &str) -> Result<AccessToken, AuthError> {
        let endpoint = self.endpoint().to_owned();
        let transport_err = |source| AuthError::Transport {
            endpoint: endpoint.clone(),
            source: Box::new(source),
        };
        let form = |pairs: &[(&str, &str)]| {
            let mut s = form_urlencoded::Serializer::new(String::new());
            s.extend_pairs(pairs);
            Bytes::from(s.finish())
        };
        let content_type = [("Content-Type", "application/x-www-form-urlencoded")];
        let req = match &self.source {
            Source::ClientSecret {
                client_id, secret, ..
            } => {
                let body = form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_secret", secret),
                    ("scope", scope),
                ]);
                transport::request(Method::POST, &endpoint, &content_type, body)
            }
            Source::Workload {
                client_id, file, ..
            } => {
                let assertion = tokio::fs::read_to_string(file).await.map_err(|source| {
                    AuthError::TokenFile {
                        path: file.clone(),
                        source,
                    }
                })?;
                let body = form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    (
                        "client_assertion_type",
                        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    ),
                    ("client_assertion", assertion.trim()),
                    ("scope", scope),
                ]);
                transport::request(Method::POST, &endpoint, &content_type, body)
            }
            Source::Managed { client_id, .. } => {
                // IMDS takes the v1 resource: the scope without `.default`.
                let resource = scope.strip_suffix(".default").unwrap_or(scope);
                let mut query = form_urlencoded::Serializer::new(String::new());
                query.append_pair("api-version", MSI_API_VERSION);
                query.append_pair("resource", resource);
                if let Some(id) = client_id {
                    query.append_pair("client_id", id);
                }
                let url = format!("{endpoint}?{}", query.finish());
                transport::request(Method::GET, &url, &[("Metadata", "true")], Bytes::new())
            }
        }
        .map_err(transport_err)?;
        let sent = Instant::now();
        let resp = transport::send(&self.http, req, self.timeout, BODY_LIMIT)
            .await
            .map_err(transport_err)?;
        if !resp.status.is_success() {
            let body: ErrorBody = serde_json::from_slice(&resp.body).unwrap_or_default();
            return Err(AuthError::Rejected {
                endpoint,
                status: resp.status.as_u16(),
                error: body.error.unwrap_or_default(),
                description: body.error_description.unwrap_or_default(),
            });
        }
        let token: TokenResponse =
            serde_json::from_slice(&resp.body).map_err(|source| AuthError::Decode {
                endpoint: endpoint.clone(),
                source,
            })?;
        let lifetime = token
            .lifetime(std::time::SystemTime::now())
            .ok_or(AuthError::NoExpiry { endpoint })?;
        debug!(credential = ?self.kind, lifetime_secs = lifetime.as_secs(), "got an Azure token");
        Ok(AccessToken::new(&token.access_token, sent + lifetime))
    }
}

impl TokenCredential for Credential {
    fn token<'a>(&'a self, scope: &'a str) -> BoxFuture<'a, Result<AccessToken, AuthError>> {
        Box::pin(async move {
            let mut cache = self.cache.lock().await;
            let now = Instant::now();
            if let Some(c) = cache.get(scope)
                && now < c.refresh_at
            {
                return Ok(c.token.clone());
            }
            match self.fetch(scope).await {
                Ok(token) => {
                    let refresh_at =
                        refresh_at(now, token.expires_at.saturating_duration_since(now));
                    cache.insert(
                        scope.to_owned(),
                        Cached {
                            token: token.clone(),
                            refresh_at,
                        },
                    );
                    Ok(token)
                }
                Err(error) => match cache.get(scope) {
                    Some(c) if now < c.token.expires_at => {
                        warn!(%error, "refreshing the Azure token failed; the current one is still valid");
                        Ok(c.token.clone())
                    }
                    _ => Err(error),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests;

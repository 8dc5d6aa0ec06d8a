//! The EC2 instance metadata service, IMDSv2 (§3.5 of the ENI operator spec), the one client
//! both programs read it with: the operator (region, VPC, cluster name, the instance role's
//! credentials) and the agent in `eni` mode (its CiliumNode's instance, type, zone, VPC and
//! node subnet). A session token from `PUT /latest/api/token` (TTL header), then GETs carrying
//! it; a token request answered 403/404/405 falls back to IMDSv1 (GETs without a token).
//! Answers are at most 1 MiB. Reads the identity document (region, instance ID), the
//! instance's ID, type, MAC and zone, an interface's VPC and subnet by MAC, and any other path
//! as text ([`Imds::get`]; the operator's credential chain reads the role there). The token is
//! a secret: never logged. Unlike Cilium, the base URL is configurable (`--aws-imds-endpoint`),
//! so an emulator can stand in. IMDS is plain HTTP: this crate links no TLS; its
//! [`transport`] is also the exchange the operator's https clients use.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde::Deserialize;
use tokio::{sync::Mutex, time::Instant};
use tracing::debug;

pub mod transport;

use transport::{PlainClient, TransportError};

/// IMDS's address on every EC2 instance.
pub const DEFAULT_BASE_URL: &str = "http://169.254.169.254";
/// The token's path.
pub const TOKEN_PATH: &str = "/latest/api/token";
/// The TTL header of the token request.
pub const TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";
/// The token header of the GETs.
pub const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";
/// Token lifetime asked for (the Rust SDK's 6 hours).
pub const TOKEN_TTL: Duration = Duration::from_hours(6);
/// Timeout of one IMDS request.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read.
pub const BODY_LIMIT: usize = 1 << 20;

/// An IMDS read that failed.
#[derive(Debug, thiserror::Error)]
pub enum ImdsError {
    /// The request failed (no answer).
    #[error("instance metadata {endpoint}{path}: request failed")]
    Transport {
        /// IMDS's base URL.
        endpoint: String,
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// IMDS answered with an unexpected status.
    #[error("instance metadata {endpoint}{path}: HTTP {status}")]
    Status {
        /// IMDS's base URL.
        endpoint: String,
        /// The path.
        path: String,
        /// The status (the body is not echoed: it may be a credential).
        status: u16,
    },
    /// The answer is not what the path holds (not text, not the JSON document).
    #[error("instance metadata {endpoint}{path}: unusable answer: {what}")]
    Invalid {
        /// IMDS's base URL.
        endpoint: String,
        /// The path.
        path: String,
        /// What is wrong.
        what: String,
    },
}

/// `/latest/dynamic/instance-identity/document`, the fields weft reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityDocument {
    /// `region`.
    pub region: String,
    /// `instanceId`.
    pub instance_id: String,
    /// `instanceType`.
    #[serde(default)]
    pub instance_type: String,
    /// `availabilityZone`.
    #[serde(default)]
    pub availability_zone: String,
    /// `accountId`.
    #[serde(default)]
    pub account_id: String,
}

#[derive(Debug)]
enum Token {
    V2 { value: String, refresh_at: Instant },
    V1 { retry_at: Instant },
}

/// An IMDS client with its session token.
#[derive(Debug)]
pub struct Imds {
    base: String,
    http: PlainClient,
    timeout: Option<Duration>,
    token: Mutex<Option<Token>>,
}

impl Imds {
    /// A client for IMDS at `base_url` ([`DEFAULT_BASE_URL`] on EC2).
    #[must_use]
    pub fn new(base_url: &str) -> Self {
        Self::with_client(base_url, transport::plain_client())
    }

    /// A client over an existing plain-HTTP client.
    #[must_use]
    pub fn with_client(base_url: &str, http: PlainClient) -> Self {
        Self {
            base: base_url.trim_end_matches('/').to_owned(),
            http,
            timeout: Some(TIMEOUT),
            token: Mutex::new(None),
        }
    }

    /// The same client with a request timeout of `timeout`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The base URL.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<transport::Response, ImdsError> {
        let url = format!("{}{path}", self.base);
        let transport_err = |source| ImdsError::Transport {
            endpoint: self.base.clone(),
            path: path.to_owned(),
            source: Box::new(source),
        };
        let req = transport::request(method, &url, headers, Bytes::new()).map_err(transport_err)?;
        transport::send(&self.http, req, self.timeout, BODY_LIMIT)
            .await
            .map_err(transport_err)
    }

    /// The session token, or `None` for IMDSv1.
    async fn token(&self) -> Result<Option<String>, ImdsError> {
        let mut cached = self.token.lock().await;
        let now = Instant::now();
        match &*cached {
            Some(Token::V2 { value, refresh_at }) if now < *refresh_at => {
                return Ok(Some(value.clone()));
            }
            Some(Token::V1 { retry_at }) if now < *retry_at => return Ok(None),
            _ => {}
        }
        let ttl = TOKEN_TTL.as_secs().to_string();
        let resp = self
            .exchange(Method::PUT, TOKEN_PATH, &[(TTL_HEADER, &ttl)])
            .await?;
        match resp.status {
            StatusCode::OK => {
                let value = String::from_utf8(resp.body.to_vec())
                    .ok()
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| ImdsError::Invalid {
                        endpoint: self.base.clone(),
                        path: TOKEN_PATH.to_owned(),
                        what: "an empty or non-text token".to_owned(),
                    })?;
                *cached = Some(Token::V2 {
                    value: value.clone(),
                    // Well before the TTL, so a token never expires in flight.
                    refresh_at: now + TOKEN_TTL / 2,
                });
                Ok(Some(value))
            }
            StatusCode::FORBIDDEN | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => {
                debug!(endpoint = %self.base, status = resp.status.as_u16(), "IMDS token refused; using IMDSv1");
                *cached = Some(Token::V1 {
                    retry_at: now + Duration::from_mins(5),
                });
                Ok(None)
            }
            status => Err(ImdsError::Status {
                endpoint: self.base.clone(),
                path: TOKEN_PATH.to_owned(),
                status: status.as_u16(),
            }),
        }
    }

    /// GET `path` (e.g. `/latest/meta-data/instance-id`) as text; anything but 200 is an error.
    ///
    /// # Errors
    /// [`ImdsError`] naming the path and the endpoint.
    pub async fn get(&self, path: &str) -> Result<String, ImdsError> {
        let token = self.token().await?;
        let headers: Vec<(&str, &str)> = token.iter().map(|t| (TOKEN_HEADER, t.as_str())).collect();
        let resp = self.exchange(Method::GET, path, &headers).await?;
        if resp.status == StatusCode::UNAUTHORIZED {
            // The token expired early (IMDS restarted): forget it so the next read asks anew.
            *self.token.lock().await = None;
        }
        if resp.status != StatusCode::OK {
            return Err(ImdsError::Status {
                endpoint: self.base.clone(),
                path: path.to_owned(),
                status: resp.status.as_u16(),
            });
        }
        String::from_utf8(resp.body.to_vec()).map_err(|_| ImdsError::Invalid {
            endpoint: self.base.clone(),
            path: path.to_owned(),
            what: "not UTF-8 text".to_owned(),
        })
    }

    /// A metadata value, trimmed; an empty one is an error.
    async fn value(&self, path: &str) -> Result<String, ImdsError> {
        let text = self.get(path).await?;
        let value = text.trim();
        if value.is_empty() {
            return Err(ImdsError::Invalid {
                endpoint: self.base.clone(),
                path: path.to_owned(),
                what: "empty".to_owned(),
            });
        }
        debug!(path, value, "instance metadata");
        Ok(value.to_owned())
    }

    /// The identity document (region, instance ID, ...).
    ///
    /// # Errors
    /// See [`Imds::get`]; [`ImdsError::Invalid`] when it is not the JSON document.
    pub async fn identity_document(&self) -> Result<IdentityDocument, ImdsError> {
        const PATH: &str = "/latest/dynamic/instance-identity/document";
        let text = self.get(PATH).await?;
        let doc: IdentityDocument =
            serde_json::from_str(&text).map_err(|e| ImdsError::Invalid {
                endpoint: self.base.clone(),
                path: PATH.to_owned(),
                what: format!("not an identity document: {e}"),
            })?;
        if doc.region.is_empty() || doc.instance_id.is_empty() {
            return Err(ImdsError::Invalid {
                endpoint: self.base.clone(),
                path: PATH.to_owned(),
                what: "region or instanceId is empty".to_owned(),
            });
        }
        Ok(doc)
    }

    /// `meta-data/instance-id`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn instance_id(&self) -> Result<String, ImdsError> {
        self.value("/latest/meta-data/instance-id").await
    }

    /// `meta-data/instance-type`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn instance_type(&self) -> Result<String, ImdsError> {
        self.value("/latest/meta-data/instance-type").await
    }

    /// `meta-data/mac`: the primary interface's MAC.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn mac(&self) -> Result<String, ImdsError> {
        self.value("/latest/meta-data/mac").await
    }

    /// `meta-data/placement/availability-zone`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn availability_zone(&self) -> Result<String, ImdsError> {
        self.value("/latest/meta-data/placement/availability-zone")
            .await
    }

    /// The VPC of the interface with `mac`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn vpc_id(&self, mac: &str) -> Result<String, ImdsError> {
        self.value(&format!(
            "/latest/meta-data/network/interfaces/macs/{mac}/vpc-id"
        ))
        .await
    }

    /// The subnet of the interface with `mac`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn subnet_id(&self, mac: &str) -> Result<String, ImdsError> {
        self.value(&format!(
            "/latest/meta-data/network/interfaces/macs/{mac}/subnet-id"
        ))
        .await
    }
}

#[cfg(test)]
mod tests;

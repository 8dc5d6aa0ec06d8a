//! The Azure Instance Metadata Service (§5): the cloud the operator runs in (`azEnvironment`),
//! and the subscription and resource group when no flag names them; and the table of clouds
//! (§3.1) that turns `azEnvironment` into the ARM endpoint, the token audience and the AAD
//! host. Unlike Cilium, a non-200 answer is an error. The managed-identity token endpoint
//! (also on IMDS) is [`super::auth`]'s.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use tracing::debug;

use crate::cloud::transport::{self, HttpClient, TransportError};

/// IMDS's address on every Azure VM.
pub const DEFAULT_BASE_URL: &str = "http://169.254.169.254";
/// api-version of the instance metadata requests.
pub const API_VERSION: &str = "2019-06-01";
/// Timeout of one IMDS request.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest IMDS answer read.
pub const BODY_LIMIT: usize = 1 << 20;

/// An IMDS lookup that failed, or an unknown cloud.
#[derive(Debug, thiserror::Error)]
pub enum ImdsError {
    /// The HTTP client could not be built or the request failed.
    #[error("instance metadata {path}: request failed")]
    Transport {
        /// The metadata path.
        path: String,
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// IMDS answered with a status other than 200.
    #[error("instance metadata {path}: HTTP {status}: {body}")]
    Status {
        /// The metadata path.
        path: String,
        /// The status.
        status: u16,
        /// The start of IMDS's answer.
        body: String,
    },
    /// The answer is not UTF-8 text.
    #[error("instance metadata {path}: the answer is not UTF-8 text")]
    NotText {
        /// The metadata path.
        path: String,
        /// Why.
        #[source]
        source: std::str::Utf8Error,
    },
    /// `azEnvironment` names a cloud weft does not know.
    #[error("Unknown Azure cloud {name:?}")]
    UnknownCloud {
        /// The value IMDS returned.
        name: String,
    },
}

/// An Azure cloud's endpoints (§3.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cloud {
    /// IMDS's `azEnvironment` name, e.g. `AzurePublicCloud`.
    pub name: &'static str,
    /// ARM endpoint, e.g. `https://management.azure.com`.
    pub arm_endpoint: &'static str,
    /// Token audience (resource) for ARM, e.g. `https://management.core.windows.net/`.
    pub audience: &'static str,
    /// AAD host, e.g. `login.microsoftonline.com`.
    pub authority_host: &'static str,
}

impl Cloud {
    /// The OAuth2 v2 scope for ARM: the audience + `.default`.
    #[must_use]
    pub fn scope(&self) -> String {
        format!("{}.default", self.audience)
    }

    /// The AAD base URL, `https://{authority_host}`.
    #[must_use]
    pub fn authority_url(&self) -> String {
        format!("https://{}", self.authority_host)
    }
}

/// The clouds Cilium knows.
pub const CLOUDS: [Cloud; 3] = [
    Cloud {
        name: "AzurePublicCloud",
        arm_endpoint: "https://management.azure.com",
        audience: "https://management.core.windows.net/",
        authority_host: "login.microsoftonline.com",
    },
    Cloud {
        name: "AzureUSGovernmentCloud",
        arm_endpoint: "https://management.usgovcloudapi.net",
        audience: "https://management.core.usgovcloudapi.net/",
        authority_host: "login.microsoftonline.us",
    },
    Cloud {
        name: "AzureChinaCloud",
        arm_endpoint: "https://management.chinacloudapi.cn",
        audience: "https://management.core.chinacloudapi.cn/",
        authority_host: "login.chinacloudapi.cn",
    },
];

/// The cloud of an `azEnvironment` value (exact match, as Cilium).
///
/// # Errors
/// [`ImdsError::UnknownCloud`] for any other value.
pub fn cloud(az_environment: &str) -> Result<Cloud, ImdsError> {
    CLOUDS
        .iter()
        .find(|c| c.name == az_environment)
        .cloned()
        .ok_or_else(|| ImdsError::UnknownCloud {
            name: az_environment.to_owned(),
        })
}

/// An IMDS client.
#[derive(Clone, Debug)]
pub struct Imds {
    base: String,
    http: HttpClient,
    timeout: Option<Duration>,
}

impl Imds {
    /// A client for IMDS at `base_url` ([`DEFAULT_BASE_URL`] on Azure).
    ///
    /// # Errors
    /// [`ImdsError::Transport`] when the HTTP client cannot be built.
    pub fn new(base_url: &str) -> Result<Self, ImdsError> {
        let http = transport::client().map_err(|source| ImdsError::Transport {
            path: String::new(),
            source: Box::new(source),
        })?;
        Ok(Self::with_client(base_url, http))
    }

    /// A client over an existing HTTP client.
    #[must_use]
    pub fn with_client(base_url: &str, http: HttpClient) -> Self {
        Self {
            base: base_url.trim_end_matches('/').to_owned(),
            http,
            timeout: Some(TIMEOUT),
        }
    }

    /// The base URL.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `GET {base}/metadata/{path}?api-version=2019-06-01&format=text` with `Metadata: true`.
    ///
    /// # Errors
    /// [`ImdsError`] when the request fails or IMDS does not answer 200 with text.
    pub async fn get(&self, path: &str) -> Result<String, ImdsError> {
        let url = format!(
            "{}/metadata/{path}?api-version={API_VERSION}&format=text",
            self.base
        );
        let transport_err = |source| ImdsError::Transport {
            path: path.to_owned(),
            source: Box::new(source),
        };
        let req = transport::request(Method::GET, &url, &[("Metadata", "true")], Bytes::new())
            .map_err(transport_err)?;
        let resp = transport::send(&self.http, req, self.timeout, BODY_LIMIT)
            .await
            .map_err(transport_err)?;
        if resp.status != StatusCode::OK {
            let body = String::from_utf8_lossy(&resp.body)
                .chars()
                .take(200)
                .collect();
            return Err(ImdsError::Status {
                path: path.to_owned(),
                status: resp.status.as_u16(),
                body,
            });
        }
        let text = std::str::from_utf8(&resp.body).map_err(|source| ImdsError::NotText {
            path: path.to_owned(),
            source,
        })?;
        debug!(path, value = text, "instance metadata");
        Ok(text.to_owned())
    }

    /// `instance/compute/azEnvironment`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn az_environment(&self) -> Result<String, ImdsError> {
        self.get("instance/compute/azEnvironment").await
    }

    /// `instance/compute/subscriptionId`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn subscription_id(&self) -> Result<String, ImdsError> {
        self.get("instance/compute/subscriptionId").await
    }

    /// `instance/compute/resourceGroupName`.
    ///
    /// # Errors
    /// See [`Imds::get`].
    pub async fn resource_group_name(&self) -> Result<String, ImdsError> {
        self.get("instance/compute/resourceGroupName").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::api::testserver::{Reply, TestServer};

    const Q: &str = "?api-version=2019-06-01&format=text";

    #[tokio::test]
    async fn reads_metadata() {
        let server = TestServer::start().await;
        server.expect(
            "GET",
            &format!("/metadata/instance/compute/azEnvironment{Q}"),
            Reply::text(200, "AzurePublicCloud"),
        );
        server.expect(
            "GET",
            &format!("/metadata/instance/compute/subscriptionId{Q}"),
            Reply::text(200, "sub-1"),
        );
        server.expect(
            "GET",
            &format!("/metadata/instance/compute/resourceGroupName{Q}"),
            Reply::text(200, "MC_rg"),
        );
        let imds = Imds::new(&format!("{}/", server.url)).unwrap();
        assert_eq!(imds.az_environment().await.unwrap(), "AzurePublicCloud");
        assert_eq!(imds.subscription_id().await.unwrap(), "sub-1");
        assert_eq!(imds.resource_group_name().await.unwrap(), "MC_rg");
        for seen in server.finish() {
            assert_eq!(seen.header("metadata"), Some("true"));
        }
    }

    #[tokio::test]
    async fn non_200_is_an_error() {
        let server = TestServer::start().await;
        server.expect(
            "GET",
            &format!("/metadata/instance/compute/subscriptionId{Q}"),
            Reply::text(404, "not here"),
        );
        let imds = Imds::new(&server.url).unwrap();
        let err = imds.subscription_id().await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "instance metadata instance/compute/subscriptionId: HTTP 404: not here"
        );
        server.finish();
    }

    #[tokio::test]
    async fn unreachable_names_the_path() {
        let imds = Imds::new("http://127.0.0.1:1").unwrap();
        let err = imds.az_environment().await.unwrap_err();
        assert!(
            matches!(err, ImdsError::Transport { ref path, .. } if path == "instance/compute/azEnvironment")
        );
    }

    #[test]
    fn clouds() {
        let public = cloud("AzurePublicCloud").unwrap();
        assert_eq!(public.arm_endpoint, "https://management.azure.com");
        assert_eq!(
            public.scope(),
            "https://management.core.windows.net/.default"
        );
        assert_eq!(public.authority_url(), "https://login.microsoftonline.com");
        assert_eq!(
            cloud("AzureUSGovernmentCloud").unwrap().authority_host,
            "login.microsoftonline.us"
        );
        assert_eq!(
            cloud("AzureChinaCloud").unwrap().arm_endpoint,
            "https://management.chinacloudapi.cn"
        );
        assert_eq!(
            cloud("AzureStackCloud").unwrap_err().to_string(),
            "Unknown Azure cloud \"AzureStackCloud\""
        );
    }
}

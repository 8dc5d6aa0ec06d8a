//! Container credentials (ECS task roles, EKS Pod Identity): a GET of
//! `http://169.254.170.2<AWS_CONTAINER_CREDENTIALS_RELATIVE_URI>`, or of
//! `AWS_CONTAINER_CREDENTIALS_FULL_URI` when its host is loopback, `169.254.170.2`,
//! `169.254.170.23` or `fd00:ec2::23` (anything else is refused, as the SDKs do), with the
//! `Authorization` header from `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (re-read on every
//! refresh) or `AWS_CONTAINER_AUTHORIZATION_TOKEN`.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    path::PathBuf,
    time::Duration,
};

use bytes::Bytes;
use http::{Method, Uri};

use super::{BODY_LIMIT, Credentials, CredentialsError, SourceKind, credential_document};
use crate::cloud::transport::{self, HttpClient};

const KIND: SourceKind = SourceKind::Container;
/// The ECS credentials address a relative URI is resolved against.
pub const ECS_BASE: &str = "http://169.254.170.2";
const ALLOWED: [IpAddr; 3] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
];

/// Where the `Authorization` header comes from.
#[derive(Clone)]
enum Authorization {
    File(PathBuf),
    Token(String),
}

/// A configured container credentials endpoint.
#[derive(Clone)]
pub struct ContainerSource {
    /// The full URL.
    pub url: String,
    authorization: Option<Authorization>,
}

impl std::fmt::Debug for ContainerSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = match &self.authorization {
            None => "none".to_owned(),
            Some(Authorization::File(p)) => format!("file {}", p.display()),
            Some(Authorization::Token(_)) => "<redacted>".to_owned(),
        };
        f.debug_struct("ContainerSource")
            .field("url", &self.url)
            .field("authorization", &auth)
            .finish()
    }
}

/// Whether a full URI's host may serve credentials.
fn host_allowed(uri: &Uri) -> bool {
    let Some(host) = uri.host() else {
        return false;
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(ip) => ip.is_loopback() || ALLOWED.contains(&ip),
        Err(_) => false,
    }
}

/// The container source, when `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or `_FULL_URI` is set.
///
/// # Errors
/// [`CredentialsError::Config`] for a full URI that is not a URL or whose host is not allowed.
pub fn container_source(
    var: &impl Fn(&str) -> Option<String>,
) -> Result<Option<ContainerSource>, CredentialsError> {
    let url = if let Some(relative) = var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        let sep = if relative.starts_with('/') { "" } else { "/" };
        format!("{ECS_BASE}{sep}{}", relative.trim())
    } else if let Some(full) = var("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
        let full = full.trim().to_owned();
        let allowed = full.parse::<Uri>().is_ok_and(|u| host_allowed(&u));
        if !allowed {
            return Err(CredentialsError::Config {
                kind: KIND,
                what: format!(
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI {full:?} must be a URL whose host is \
                     loopback, 169.254.170.2, 169.254.170.23 or fd00:ec2::23"
                ),
            });
        }
        full
    } else {
        return Ok(None);
    };
    let authorization = var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        .map(|f| Authorization::File(f.into()))
        .or_else(|| var("AWS_CONTAINER_AUTHORIZATION_TOKEN").map(Authorization::Token));
    Ok(Some(ContainerSource { url, authorization }))
}

impl ContainerSource {
    pub(super) async fn fetch(
        &self,
        http: &HttpClient,
        timeout: Option<Duration>,
    ) -> Result<Credentials, CredentialsError> {
        let token = match &self.authorization {
            None => None,
            Some(Authorization::Token(t)) => Some(t.trim().to_owned()),
            Some(Authorization::File(path)) => Some(
                tokio::fs::read_to_string(path)
                    .await
                    .map_err(|source| CredentialsError::TokenFile {
                        kind: KIND,
                        path: path.clone(),
                        source,
                    })?
                    .trim()
                    .to_owned(),
            ),
        };
        let mut headers = vec![("accept", "application/json")];
        if let Some(t) = &token {
            headers.push(("authorization", t));
        }
        let transport_err = |source| CredentialsError::Transport {
            kind: KIND,
            endpoint: self.url.clone(),
            source: Box::new(source),
        };
        let req = transport::request(Method::GET, &self.url, &headers, Bytes::new())
            .map_err(transport_err)?;
        let resp = transport::send(http, req, timeout, BODY_LIMIT)
            .await
            .map_err(transport_err)?;
        if !resp.status.is_success() {
            #[derive(serde::Deserialize, Default)]
            struct ErrorBody {
                #[serde(default, alias = "Code")]
                code: String,
                #[serde(default, alias = "Message")]
                message: String,
            }
            let body: ErrorBody = serde_json::from_slice(&resp.body).unwrap_or_default();
            return Err(CredentialsError::Rejected {
                kind: KIND,
                endpoint: self.url.clone(),
                status: resp.status.as_u16(),
                code: body.code,
                message: body.message,
            });
        }
        credential_document(&resp.body).map_err(|what| CredentialsError::Invalid {
            kind: KIND,
            endpoint: self.url.clone(),
            what,
        })
    }
}

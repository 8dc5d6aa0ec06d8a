//! Web identity (IRSA): the projected service-account token from `AWS_WEB_IDENTITY_TOKEN_FILE`
//! (re-read on every refresh) exchanged for temporary credentials of `AWS_ROLE_ARN` through
//! STS `AssumeRoleWithWebIdentity` — an unsigned Query call (`Version=2011-06-15`) to
//! `AWS_ENDPOINT_URL_STS`, else the regional `https://sts.<region>.amazonaws.com`.

use std::{path::PathBuf, time::Duration};

use bytes::Bytes;
use http::Method;
use tracing::debug;

use super::{BODY_LIMIT, Credentials, CredentialsError, SourceKind, parse_time};
use crate::{
    cloud::transport::{self, HttpClient},
    eni::api::{aws_domain, query::Query, xml},
};

const ACTION: &str = "AssumeRoleWithWebIdentity";
const KIND: SourceKind = SourceKind::WebIdentity;

/// The STS endpoint: `configured` (`AWS_ENDPOINT_URL_STS`) when set, else the regional one,
/// else the global `https://sts.amazonaws.com`. No trailing slash.
#[must_use]
pub fn sts_endpoint(region: Option<&str>, configured: Option<&str>) -> String {
    match (configured, region) {
        (Some(url), _) => url.trim().trim_end_matches('/').to_owned(),
        (None, Some(region)) => format!("https://sts.{region}.{}", aws_domain(region)),
        (None, None) => "https://sts.amazonaws.com".to_owned(),
    }
}

/// A configured web identity.
#[derive(Clone, Debug)]
pub struct WebIdentitySource {
    /// `AWS_ROLE_ARN`.
    pub role_arn: String,
    /// `AWS_WEB_IDENTITY_TOKEN_FILE`.
    pub token_file: PathBuf,
    /// `AWS_ROLE_SESSION_NAME`, else `weft-operator-<unix seconds>`.
    pub session_name: String,
    /// The STS base URL.
    pub endpoint: String,
}

impl WebIdentitySource {
    /// The source, when both the token file and the role are set.
    pub(super) fn from_env(
        region: Option<&str>,
        var: &impl Fn(&str) -> Option<String>,
    ) -> Option<Self> {
        let token_file = var("AWS_WEB_IDENTITY_TOKEN_FILE")?;
        let role_arn = var("AWS_ROLE_ARN")?;
        let session_name = var("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            format!("weft-operator-{secs}")
        });
        Some(Self {
            role_arn,
            token_file: token_file.into(),
            session_name,
            endpoint: sts_endpoint(region, var("AWS_ENDPOINT_URL_STS").as_deref()),
        })
    }

    pub(super) async fn fetch(
        &self,
        http: &HttpClient,
        timeout: Option<Duration>,
    ) -> Result<Credentials, CredentialsError> {
        let token = tokio::fs::read_to_string(&self.token_file)
            .await
            .map_err(|source| CredentialsError::TokenFile {
                kind: KIND,
                path: self.token_file.clone(),
                source,
            })?;
        let body = Query::new(ACTION, "2011-06-15")
            .param("RoleArn", self.role_arn.as_str())
            .param("RoleSessionName", self.session_name.as_str())
            .param("WebIdentityToken", token.trim())
            .encode();
        let url = format!("{}/", self.endpoint);
        let transport_err = |source| CredentialsError::Transport {
            kind: KIND,
            endpoint: self.endpoint.clone(),
            source: Box::new(source),
        };
        let req = transport::request(
            Method::POST,
            &url,
            &[(
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            )],
            Bytes::from(body),
        )
        .map_err(transport_err)?;
        let resp = transport::send(http, req, timeout, BODY_LIMIT)
            .await
            .map_err(transport_err)?;
        let text = String::from_utf8_lossy(&resp.body);
        if !resp.status.is_success() {
            let (code, message, _) = xml::error_document(&text).unwrap_or_default();
            return Err(CredentialsError::Rejected {
                kind: KIND,
                endpoint: self.endpoint.clone(),
                status: resp.status.as_u16(),
                code,
                message,
            });
        }
        let credentials = self.decode(&text)?;
        debug!(role = %self.role_arn, expires_at = ?credentials.expires_at(), "assumed the role with the web identity");
        Ok(credentials)
    }

    fn decode(&self, text: &str) -> Result<Credentials, CredentialsError> {
        let invalid = |what: String| CredentialsError::Invalid {
            kind: KIND,
            endpoint: self.endpoint.clone(),
            what,
        };
        let doc = xml::parse(ACTION, text).map_err(|e| invalid(e.to_string()))?;
        let creds = xml::at(
            doc.root_element(),
            "AssumeRoleWithWebIdentityResult/Credentials",
        )
        .ok_or_else(|| invalid("no AssumeRoleWithWebIdentityResult/Credentials".to_owned()))?;
        let field = |name: &str| {
            xml::text(creds, name).ok_or_else(|| invalid(format!("no Credentials/{name}")))
        };
        let expires_at = parse_time(&field("Expiration")?).map_err(invalid)?;
        Ok(Credentials::new(
            &field("AccessKeyId")?,
            &field("SecretAccessKey")?,
            Some(field("SessionToken")?),
            Some(expires_at),
        ))
    }
}

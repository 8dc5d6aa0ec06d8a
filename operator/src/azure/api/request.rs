//! One ARM exchange: the rate-limit wait (observed per operation), a bearer token, the
//! `User-Agent`, retries with the server's `Retry-After`, the call's timer; an error status
//! becomes [`ArmError::Http`] with Azure's `error.code`/`error.message`. Also GET-and-decode
//! (with the JSON path of a decode failure) and paging over `nextLink`, and the URLs of the
//! operations (the operator's subscription and RG, api-versions per operation).

use std::time::SystemTime;

use bytes::Bytes;
use http::Method;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::{Serialize, de::DeserializeOwned};
use tracing::{debug, warn};

use super::{
    ArmClient, ArmError,
    retry::{self, MAX_RETRIES},
};
use crate::{
    azure::model::Page,
    cloud::transport::{self, Response},
};

/// Largest ARM response body read (a NIC list page is well below).
const ARM_BODY_LIMIT: usize = 64 << 20;

/// An operation: Cilium's metric name and the SDK's api-version.
#[derive(Clone, Copy, Debug)]
pub(super) struct Op {
    pub name: &'static str,
    pub api_version: &'static str,
}

/// Characters escaped in a path segment.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// `name` escaped for a URL path.
pub(super) fn seg(name: &str) -> String {
    utf8_percent_encode(name, SEGMENT).to_string()
}

#[derive(Debug, Default, serde::Deserialize)]
struct ErrorBody {
    error: Option<ErrorDetail>,
}

#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ErrorDetail {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

pub(super) fn http_error(operation: &'static str, resp: &Response) -> ArmError {
    let detail = serde_json::from_slice::<ErrorBody>(&resp.body)
        .ok()
        .and_then(|b| b.error)
        .unwrap_or_default();
    let message = detail.message.unwrap_or_else(|| {
        String::from_utf8_lossy(&resp.body)
            .chars()
            .take(300)
            .collect()
    });
    ArmError::Http {
        operation,
        status: resp.status.as_u16(),
        code: detail.code.unwrap_or_default(),
        message,
    }
}

/// Decode `body` as `T`, naming the operation and the JSON path on failure.
pub(super) fn decode<T: DeserializeOwned>(
    operation: &'static str,
    body: &[u8],
) -> Result<T, ArmError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| ArmError::Decode {
        operation,
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

/// `value` as a JSON body.
pub(super) fn encode<T: Serialize>(operation: &'static str, value: &T) -> Result<Bytes, ArmError> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|source| ArmError::Decode {
            operation,
            path: String::new(),
            source,
        })
}

impl ArmClient {
    /// `{endpoint}/subscriptions/{sub}/resourceGroups/{rg}/providers/{path}?[$expand=instanceView&]api-version=…`.
    pub(super) fn rg_url(&self, rg: &str, path: &str, op: Op, expand: bool) -> String {
        let s = &self.inner.settings;
        let expand = if expand { "$expand=instanceView&" } else { "" };
        format!(
            "{}/subscriptions/{}/resourceGroups/{}/providers/{path}?{expand}api-version={}",
            s.endpoint,
            seg(&s.subscription_id),
            seg(rg),
            op.api_version
        )
    }

    /// [`ArmClient::rg_url`] in the operator's resource group.
    pub(super) fn url(&self, path: &str, op: Op, expand: bool) -> String {
        self.rg_url(&self.inner.settings.resource_group, path, op, expand)
    }

    /// One rate-limited exchange with retries; a non-2xx answer is an error.
    pub(super) async fn send(
        &self,
        op: Op,
        method: Method,
        url: &str,
        body: Option<Bytes>,
    ) -> Result<Response, ArmError> {
        let waited = self.inner.limiter.acquire().await;
        if !waited.is_zero() {
            self.inner.metrics.observe_rate_limit(op.name, waited);
        }
        self.exchange(op, method, url, body).await
    }

    /// One exchange with retries, without the rate limit (LRO polls).
    #[tracing::instrument(level = "debug", skip(self, body), fields(operation = op.name))]
    pub(super) async fn exchange(
        &self,
        op: Op,
        method: Method,
        url: &str,
        body: Option<Bytes>,
    ) -> Result<Response, ArmError> {
        let inner = &self.inner;
        let mut timer = inner.metrics.start(op.name);
        let mut attempt = 0;
        loop {
            let token = inner
                .credential
                .token(&inner.settings.scope)
                .await
                .map_err(|source| ArmError::Auth {
                    operation: op.name,
                    source: Box::new(source),
                })?;
            let bearer = format!("Bearer {}", token.secret());
            let mut headers = vec![
                ("Authorization", bearer.as_str()),
                ("User-Agent", inner.settings.user_agent.as_str()),
                ("Accept", "application/json"),
            ];
            if body.is_some() {
                headers.push(("Content-Type", "application/json"));
            }
            let req = transport::request(
                method.clone(),
                url,
                &headers,
                body.clone().unwrap_or_default(),
            )
            .map_err(|source| ArmError::Transport {
                operation: op.name,
                source: Box::new(source),
            })?;
            let wait = match transport::send(
                &inner.http,
                req,
                inner.settings.timeout,
                ARM_BODY_LIMIT,
            )
            .await
            {
                Ok(resp) if attempt < MAX_RETRIES && retry::is_retriable(resp.status) => {
                    let wait = retry::delay(attempt, &resp.headers, SystemTime::now());
                    warn!(
                        operation = op.name,
                        status = resp.status.as_u16(),
                        attempt,
                        wait_ms = wait.as_millis(),
                        "Azure API call will be retried"
                    );
                    wait
                }
                Ok(resp) if resp.status.is_success() => {
                    debug!(
                        operation = op.name,
                        status = resp.status.as_u16(),
                        "Azure API call"
                    );
                    timer.ok();
                    return Ok(resp);
                }
                Ok(resp) => return Err(http_error(op.name, &resp)),
                Err(error) if attempt < MAX_RETRIES && error.is_retriable() => {
                    let wait = retry::backoff(attempt);
                    warn!(operation = op.name, %error, attempt, wait_ms = wait.as_millis(), "Azure API call will be retried");
                    wait
                }
                Err(source) => {
                    return Err(ArmError::Transport {
                        operation: op.name,
                        source: Box::new(source),
                    });
                }
            };
            inner.metrics.retried(op.name);
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// GET `url` and decode it.
    pub(super) async fn get<T: DeserializeOwned>(&self, op: Op, url: &str) -> Result<T, ArmError> {
        let resp = self.send(op, Method::GET, url, None).await?;
        decode(op.name, &resp.body)
    }

    /// GET every page of a list.
    pub(super) async fn list<T: DeserializeOwned>(
        &self,
        op: Op,
        url: &str,
    ) -> Result<Vec<T>, ArmError> {
        let mut items = Vec::new();
        let mut next = Some(url.to_owned());
        while let Some(url) = next.take() {
            let page: Page<T> = self.get(op, &url).await?;
            items.extend(page.value);
            next = page
                .next_link
                .filter(|link| !link.is_empty() && *link != url);
        }
        Ok(items)
    }
}

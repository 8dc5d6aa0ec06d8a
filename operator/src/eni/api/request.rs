//! One EC2 call: a token from the shared bucket (a wait observed per operation), then up to
//! [`MAX_ATTEMPTS`] signed `POST /` exchanges with backoff between retriable failures, timed
//! as one call; an error status becomes [`Ec2Error::Api`] (AWS's error document, kept whole)
//! or [`Ec2Error::Http`] (any other body). And listing: every page over `nextToken`, each page
//! charged one token, with `MaxResults` when configured and the switch to
//! [`PAGED_MAX_RESULTS`] on `OperationNotPermitted` (warned once, the listing restarted).
//! Nothing here knows an action's keys or answer.

use std::{sync::atomic::Ordering, time::SystemTime};

use bytes::Bytes;
use http::{Method, Uri};
use tracing::{debug, warn};

use super::{
    Ec2Client, Ec2Error, PAGED_MAX_RESULTS,
    query::Query,
    retry::{MAX_ATTEMPTS, backoff},
    sign::{Scope, sign_request},
    xml::{self, Page},
};
use crate::cloud::transport;

/// Largest answer read (an unpaginated DescribeNetworkInterfaces of a big account is large).
const BODY_LIMIT: usize = 256 << 20;
/// The body's content type.
pub(super) const CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

/// The `Host` header of `url`: its authority without a default port (what SigV4 signs).
pub(crate) fn host_header(url: &str) -> Option<String> {
    let uri: Uri = url.parse().ok()?;
    let host = uri.host()?;
    let default_port = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    Some(match uri.port_u16() {
        Some(port) if port != default_port => format!("{host}:{port}"),
        _ => host.to_owned(),
    })
}

/// The error an answer with a non-2xx `status` and `body` stands for.
pub(crate) fn error_answer(action: &'static str, status: u16, body: &str) -> Ec2Error {
    match xml::error_document(body) {
        Some((code, message, request_id)) => Ec2Error::Api {
            action,
            status,
            code,
            message,
            request_id,
        },
        None => Ec2Error::Http {
            action,
            status,
            body: body.chars().take(300).collect(),
        },
    }
}

impl Ec2Client {
    /// One rate-limited call with retries, its answer read by `decode` (a decoding failure
    /// is timed as `Failed`, as in the SDK, and not retried).
    pub(super) async fn call<T>(
        &self,
        action: &'static str,
        query: &Query,
        decode: impl FnOnce(&str) -> Result<T, Ec2Error>,
    ) -> Result<T, Ec2Error> {
        let inner = &self.inner;
        let waited = inner.limiter.acquire().await;
        if !waited.is_zero() {
            // Only actual waits are observed, as Cilium's limiter does.
            inner.metrics.observe_rate_limit(action, waited);
            debug!(
                action,
                wait_ms = waited.as_millis(),
                "EC2 call waited on the rate limit"
            );
        }
        let mut timer = inner.metrics.start(action);
        let body = Bytes::from(query.encode());
        let mut attempt = 1;
        loop {
            match self.attempt(action, &body).await {
                Ok(answer) => {
                    let decoded = decode(&answer);
                    match &decoded {
                        Ok(_) => timer.ok(),
                        Err(error) => timer.failed(error.response_code()),
                    }
                    return decoded;
                }
                Err(error) if attempt < MAX_ATTEMPTS && error.is_retriable() => {
                    let wait = backoff(attempt, fastrand::f64());
                    warn!(%error, action, attempt, wait_ms = wait.as_millis(), "EC2 call will be retried");
                    inner.metrics.retried(action);
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(error) => {
                    timer.failed(error.response_code());
                    return Err(error);
                }
            }
        }
    }

    /// One signed exchange.
    #[tracing::instrument(level = "debug", skip(self, body))]
    async fn attempt(&self, action: &'static str, body: &Bytes) -> Result<String, Ec2Error> {
        let inner = &self.inner;
        let credentials =
            inner
                .credentials
                .credentials()
                .await
                .map_err(|source| Ec2Error::Credentials {
                    action,
                    source: Box::new(source),
                })?;
        let url = format!("{}/", inner.settings.endpoint);
        let host = host_header(&url).unwrap_or_default();
        let signed = sign_request(
            "POST",
            &url,
            &[("host", &host), ("content-type", CONTENT_TYPE)],
            body,
            &credentials,
            Scope {
                region: &inner.settings.region,
                service: "ec2",
                time: SystemTime::now(),
            },
        )
        .map_err(|source| Ec2Error::Sign {
            action,
            source: Box::new(source),
        })?;
        let mut headers: Vec<(&str, &str)> = vec![
            ("host", &host),
            ("content-type", CONTENT_TYPE),
            ("user-agent", &inner.settings.user_agent),
        ];
        headers.extend(signed.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let transport_err = |source| Ec2Error::Transport {
            action,
            source: Box::new(source),
        };
        let req = transport::request(Method::POST, &url, &headers, body.clone())
            .map_err(transport_err)?;
        let resp = transport::send(&inner.http, req, inner.settings.timeout, BODY_LIMIT)
            .await
            .map_err(transport_err)?;
        let text = String::from_utf8_lossy(&resp.body).into_owned();
        debug!(action, status = resp.status.as_u16(), "EC2 call");
        if resp.status.is_success() {
            Ok(text)
        } else {
            Err(error_answer(action, resp.status.as_u16(), &text))
        }
    }

    /// Every page of a listing. `paged`: the action takes `MaxResults` (and the switch to
    /// paging applies).
    pub(super) async fn list<T>(
        &self,
        action: &'static str,
        query: Query,
        paged: bool,
        parse: fn(&str) -> Result<Page<T>, Ec2Error>,
    ) -> Result<Vec<T>, Ec2Error> {
        'listing: loop {
            let max = if paged {
                self.inner.max_results.load(Ordering::Relaxed)
            } else {
                0
            };
            let first = if max > 0 {
                query.clone().with("MaxResults", max.to_string())
            } else {
                query.clone()
            };
            let mut items = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let page_query = match &token {
                    Some(t) => first.clone().with("NextToken", t.as_str()),
                    None => first.clone(),
                };
                let page = match self.call(action, &page_query, parse).await {
                    Ok(page) => page,
                    Err(error) if paged && max == 0 && error.is_operation_not_permitted() => {
                        if self
                            .inner
                            .max_results
                            .compare_exchange(
                                0,
                                PAGED_MAX_RESULTS,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            )
                            .is_ok()
                        {
                            warn!(%error, action, max_results = PAGED_MAX_RESULTS,
                                "EC2 refused an unpaginated listing; every listing is paged from now on");
                        }
                        continue 'listing;
                    }
                    Err(error) => return Err(error),
                };
                items.extend(page.items);
                token = match page.next_token {
                    Some(next) if token.as_deref() != Some(next.as_str()) => Some(next),
                    _ => return Ok(items),
                };
            }
        }
    }
}

//! When an ARM request is sent again (the Go SDK's defaults, §3.1): on 408, 429, 500, 502,
//! 503 and 504 and on connection failures, at most [`MAX_RETRIES`] times, after the server's
//! `retry-after-ms`/`x-ms-retry-after-ms`/`Retry-After` (seconds or an HTTP-date) if it sent
//! one, else 800 ms doubling up to 60 s. Pure.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, StatusCode};

/// Retries after the first attempt.
pub const MAX_RETRIES: u32 = 3;
/// First backoff.
pub const BASE_DELAY: Duration = Duration::from_millis(800);
/// Longest backoff.
pub const MAX_DELAY: Duration = Duration::from_mins(1);
/// Longest server-requested wait honoured (longer ones are cut to this).
pub const MAX_RETRY_AFTER: Duration = Duration::from_mins(10);

/// Whether a response with `status` is retried.
#[must_use]
pub fn is_retriable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 429 | 500 | 502 | 503 | 504)
}

/// Backoff before retry number `attempt + 1` (0-based) without a server hint.
#[must_use]
pub fn backoff(attempt: u32) -> Duration {
    BASE_DELAY
        .checked_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
        .map_or(MAX_DELAY, |d| d.min(MAX_DELAY))
}

/// The wait a response asks for, if any (`now` turns an HTTP-date into a wait).
#[must_use]
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    for name in ["retry-after-ms", "x-ms-retry-after-ms"] {
        if let Some(ms) = text(name).and_then(|t| t.parse::<u64>().ok()) {
            return Some(Duration::from_millis(ms).min(MAX_RETRY_AFTER));
        }
    }
    let value = text("retry-after")?;
    let wait = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The wait before retry `attempt + 1`: the server's, else the backoff.
#[must_use]
pub fn delay(attempt: u32, headers: &HeaderMap, now: SystemTime) -> Duration {
    retry_after(headers, now).unwrap_or_else(|| backoff(attempt))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn statuses() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(is_retriable(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 409, 501] {
            assert!(!is_retriable(StatusCode::from_u16(s).unwrap()), "{s}");
        }
    }

    #[test]
    fn delays() {
        type Case<'a> = (&'a [(&'static str, &'a str)], Option<Duration>);
        let ms = Duration::from_millis;
        assert_eq!(
            [0, 1, 2, 3].map(backoff),
            [ms(800), ms(1600), ms(3200), ms(6400)]
        );
        assert_eq!(backoff(7), MAX_DELAY);
        assert_eq!(backoff(40), MAX_DELAY);

        let now = SystemTime::UNIX_EPOCH + Duration::from_mins(24_090_208);
        let cases: [Case; 7] = [
            (&[], None),
            (&[("retry-after", "7")], Some(Duration::from_secs(7))),
            (&[("retry-after", " 0 ")], Some(Duration::ZERO)),
            // Wed, 21 Oct 2015 07:28:00 GMT is `now`; 30 s later.
            (
                &[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")],
                Some(Duration::from_secs(30)),
            ),
            (
                &[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")],
                Some(Duration::ZERO),
            ),
            (&[("retry-after", "soon")], None),
            (
                &[("retry-after", "9"), ("x-ms-retry-after-ms", "1500")],
                Some(ms(1500)),
            ),
        ];
        for (h, want) in cases {
            assert_eq!(retry_after(&headers(h), now), want, "{h:?}");
        }
        assert_eq!(
            retry_after(&headers(&[("retry-after", "99999")]), now),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(delay(1, &headers(&[]), now), ms(1600));
        assert_eq!(
            delay(1, &headers(&[("retry-after", "2")]), now),
            Duration::from_secs(2)
        );
    }
}

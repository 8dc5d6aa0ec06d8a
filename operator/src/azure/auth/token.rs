//! What the token endpoints answer (AAD v2 and IMDS): the token and its lifetime
//! (`expires_in` or `expires_on`, each a number or a string), an error's `error` and
//! `error_description`; and when a cached token is refreshed. Pure.

use std::time::Duration;

use serde::Deserialize;
use tokio::time::Instant;

/// When to refresh a token of `lifetime` obtained at `obtained`: 5 minutes early, or at half
/// its life for tokens of 10 minutes or less.
#[must_use]
pub fn refresh_at(obtained: Instant, lifetime: Duration) -> Instant {
    let early = Duration::from_mins(5);
    if lifetime > 2 * early {
        obtained + lifetime.saturating_sub(early)
    } else {
        obtained + lifetime / 2
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ErrorBody {
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// A number that may come as a JSON number or string (IMDS sends strings).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Seconds {
    Number(f64),
    Text(String),
}

impl Seconds {
    fn get(&self) -> Option<u64> {
        let value = match self {
            Self::Number(n) => *n,
            Self::Text(t) => t.trim().parse().ok()?,
        };
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "clamped to a non-negative whole number of seconds first"
        )]
        (value.is_finite()).then(|| value.max(0.0).floor() as u64)
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct TokenResponse {
    pub access_token: String,
    #[serde(default)]
    expires_in: Option<Seconds>,
    #[serde(default)]
    expires_on: Option<Seconds>,
}

impl TokenResponse {
    pub(super) fn lifetime(&self, now: std::time::SystemTime) -> Option<Duration> {
        if let Some(secs) = self.expires_in.as_ref().and_then(Seconds::get) {
            return Some(Duration::from_secs(secs));
        }
        let on = self.expires_on.as_ref().and_then(Seconds::get)?;
        let now = now.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
        Some(Duration::from_secs(on.saturating_sub(now)))
    }
}

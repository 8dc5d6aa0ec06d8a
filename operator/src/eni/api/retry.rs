//! When an EC2 request is sent again (the AWS SDKs' standard retryer, §3.4): at most
//! [`MAX_ATTEMPTS`] attempts in all, on the failures [`super::Ec2Error::is_retriable`] names,
//! after an exponential backoff with full jitter capped at [`MAX_BACKOFF`]. No retry quota.
//! Pure.

use std::time::Duration;

/// Attempts in all, the first included.
pub const MAX_ATTEMPTS: u32 = 3;
/// Longest backoff.
pub const MAX_BACKOFF: Duration = Duration::from_secs(20);

/// The wait after failed attempt number `attempt` (1-based): `jitter × 2^attempt` seconds,
/// at most [`MAX_BACKOFF`]; `jitter` is drawn from `[0, 1)`.
#[must_use]
pub fn backoff(attempt: u32, jitter: f64) -> Duration {
    let ceiling = 2f64.powi(i32::try_from(attempt.min(31)).unwrap_or(31));
    Duration::try_from_secs_f64(jitter.clamp(0.0, 1.0) * ceiling)
        .map_or(MAX_BACKOFF, |d| d.min(MAX_BACKOFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let s = Duration::from_secs;
        assert_eq!(backoff(1, 0.5), s(1));
        assert_eq!(backoff(2, 0.5), s(2));
        assert_eq!(backoff(3, 0.999_999), Duration::from_secs_f64(7.999_992));
        assert_eq!(backoff(1, 0.0), Duration::ZERO);
        assert_eq!(backoff(5, 0.9), MAX_BACKOFF);
        assert_eq!(backoff(400, 1.0), MAX_BACKOFF);
        assert_eq!(backoff(1, f64::NAN), MAX_BACKOFF);
    }
}

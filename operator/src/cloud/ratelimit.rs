//! The client-side token bucket every call to a cloud's API waits on (Cilium's `rate.NewLimiter(qps, burst)`,
//! `--limit-ipam-api-qps`/`--limit-ipam-api-burst`). A caller reserves a token at once (the
//! bucket may go negative, as `x/time/rate` reservations do) and sleeps for its share, so
//! waiters are served in order. Dropping the wait (a cancelled call) keeps the reservation.

use std::{sync::Mutex, time::Duration};

use tokio::time::Instant;

/// A token bucket: `burst` tokens, refilled at `qps` per second.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A full bucket. `qps <= 0` (or not finite) means no limit; `burst` is at least 1.
    #[must_use]
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            state: Mutex::new(State {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Reserve a token; how long the caller must wait for it.
    pub fn reserve(&self) -> Duration {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return Duration::ZERO;
        }
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let refill = now.saturating_duration_since(state.last).as_secs_f64() * self.qps;
        state.tokens = (state.tokens + refill).min(self.burst) - 1.0;
        state.last = now;
        if state.tokens >= 0.0 {
            Duration::ZERO
        } else {
            // A tiny qps (validation bounds it; the limiter must not trust that) owes more
            // than a Duration holds: wait "forever" rather than panic.
            Duration::try_from_secs_f64(-state.tokens / self.qps).unwrap_or(Duration::MAX)
        }
    }

    /// Wait for a token; returns how long that took.
    pub async fn acquire(&self) -> Duration {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let limiter = RateLimiter::new(4.0, 20);
        for _ in 0..20 {
            assert_eq!(limiter.reserve(), Duration::ZERO);
        }
        assert_eq!(limiter.reserve(), Duration::from_millis(250));
        assert_eq!(limiter.reserve(), Duration::from_millis(500));
        tokio::time::advance(Duration::from_secs(10)).await;
        // 10 s refill 40 tokens, capped at the burst; two were owed.
        for _ in 0..20 {
            assert_eq!(limiter.reserve(), Duration::ZERO);
        }
        assert_eq!(limiter.acquire().await, Duration::from_millis(250));
        assert_eq!(RateLimiter::new(0.0, 0).reserve(), Duration::ZERO);
        let single = RateLimiter::new(1.0, 0);
        assert_eq!(single.reserve(), Duration::ZERO);
        assert_eq!(single.reserve(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_tiny_qps_waits_long_instead_of_panicking() {
        let limiter = RateLimiter::new(1e-20, 1);
        assert_eq!(limiter.reserve(), Duration::ZERO);
        assert!(limiter.reserve() >= Duration::from_secs(u64::from(u32::MAX)));
    }
}

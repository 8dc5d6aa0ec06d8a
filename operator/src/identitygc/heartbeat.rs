//! [`Heartbeats`]: when each CiliumIdentity last showed a sign of life (Cilium's operator
//! `heartbeatStore`). A sign of life is an identity created or changed, or a CiliumEndpoint
//! using it at a collection run. Pure: the caller passes the time in; nothing here reads a
//! clock or the API.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

/// The last sign of life of each identity, by name.
#[derive(Clone, Debug)]
pub struct Heartbeats {
    last: BTreeMap<String, Instant>,
    started: Instant,
    timeout: Duration,
}

/// Entries not refreshed for this many timeouts are dropped (their identity went before its
/// last endpoint).
const STALE_TIMEOUTS: u32 = 10;

impl Heartbeats {
    /// An empty table, started at `now`, for `timeout` (`identity-heartbeat-timeout`).
    #[must_use]
    pub const fn new(now: Instant, timeout: Duration) -> Self {
        Self {
            last: BTreeMap::new(),
            started: now,
            timeout,
        }
    }

    /// Record a sign of life of `identity` at `at`.
    pub fn mark_alive(&mut self, identity: &str, at: Instant) {
        self.last.insert(identity.to_owned(), at);
    }

    /// Whether `identity` showed a sign of life within the timeout before `now`. One never seen
    /// counts as alive until the table itself is older than the timeout (a restarted operator
    /// gives every identity a full timeout).
    #[must_use]
    pub fn is_alive(&self, identity: &str, now: Instant) -> bool {
        let since = self.last.get(identity).copied().unwrap_or(self.started);
        now.saturating_duration_since(since) < self.timeout
    }

    /// Forget `identity` (it was deleted).
    pub fn forget(&mut self, identity: &str) {
        self.last.remove(identity);
    }

    /// Drop the entries not refreshed for ten timeouts.
    pub fn gc(&mut self, now: Instant) {
        let limit = self.timeout.saturating_mul(STALE_TIMEOUTS);
        self.last
            .retain(|_, at| now.saturating_duration_since(*at) <= limit);
    }

    /// The number of entries (for tests and logs).
    #[must_use]
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether the table is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }
}

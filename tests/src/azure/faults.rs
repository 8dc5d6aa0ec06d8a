//! Faults a test injects at run time and the record of what was asked. A [`Fault`] matches
//! requests by operation, method and/or a path substring and answers them, for a number of
//! requests or a time window, with a throttle (429 + `Retry-After`), a 500, a 404, any ARM
//! error, or added latency. The [`RequestLog`] keeps every request (method, path, query,
//! status, time, operation, the RBAC action it was authorized as, the caller) and counts per
//! operation. Nothing here touches the model.

use std::{
    collections::BTreeMap,
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant, SystemTime},
};

use super::route::Operation;

/// What a matching request is answered with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAnswer {
    /// 429 `SubscriptionRequestsThrottled` with `Retry-After: secs`.
    Throttle {
        /// The `Retry-After` value in seconds.
        retry_after_secs: u64,
    },
    /// 500 `InternalServerError`.
    Internal,
    /// 404 `ResourceNotFound`.
    NotFound,
    /// Any status with an ARM error body `{"error":{"code","message"}}`.
    Error {
        /// HTTP status.
        status: u16,
        /// `error.code`.
        code: String,
        /// `error.message`.
        message: String,
    },
    /// Serve the request normally after this delay.
    Latency(Duration),
}

/// A rule: which requests, what answer, how many times or for how long.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Only this operation (any if `None`).
    pub operation: Option<Operation>,
    /// Only this HTTP method (any if `None`).
    pub method: Option<String>,
    /// Only paths containing this, compared case-insensitively (any if `None`).
    pub path_contains: Option<String>,
    /// The answer.
    pub answer: FaultAnswer,
    /// Answer at most this many requests (unlimited if `None`).
    pub count: Option<u32>,
    /// Stop answering after this long from injection (forever if `None`).
    pub duration: Option<Duration>,
}

impl Fault {
    /// Answer every request of `operation` (any if `None`) with `answer`, until cleared.
    #[must_use]
    pub fn new(operation: Option<Operation>, answer: FaultAnswer) -> Self {
        Self {
            operation,
            method: None,
            path_contains: None,
            answer,
            count: None,
            duration: None,
        }
    }

    /// 429 with `Retry-After: retry_after_secs` for `operation`.
    #[must_use]
    pub fn throttle(operation: Option<Operation>, retry_after_secs: u64) -> Self {
        Self::new(operation, FaultAnswer::Throttle { retry_after_secs })
    }

    /// 500 for `operation`.
    #[must_use]
    pub fn internal(operation: Option<Operation>) -> Self {
        Self::new(operation, FaultAnswer::Internal)
    }

    /// 404 for `operation`.
    #[must_use]
    pub fn not_found(operation: Option<Operation>) -> Self {
        Self::new(operation, FaultAnswer::NotFound)
    }

    /// Delay `operation` by `latency`.
    #[must_use]
    pub fn latency(operation: Option<Operation>, latency: Duration) -> Self {
        Self::new(operation, FaultAnswer::Latency(latency))
    }

    /// Only the next `count` matching requests.
    #[must_use]
    pub fn times(mut self, count: u32) -> Self {
        self.count = Some(count);
        self
    }

    /// Only for `duration` from injection.
    #[must_use]
    pub fn for_duration(mut self, duration: Duration) -> Self {
        self.duration = Some(duration);
        self
    }

    /// Only paths containing `fragment` (case-insensitive).
    #[must_use]
    pub fn path(mut self, fragment: &str) -> Self {
        self.path_contains = Some(fragment.to_ascii_lowercase());
        self
    }

    /// Only requests with `method` (`GET`, `PUT`, ...).
    #[must_use]
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_ascii_uppercase());
        self
    }
}

#[derive(Debug)]
struct Armed {
    fault: Fault,
    until: Option<Instant>,
}

/// The injected faults.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<Armed>>,
}

impl Faults {
    /// Add a rule (checked after the rules added before it).
    pub fn inject(&self, fault: Fault) {
        let until = fault.duration.map(|d| Instant::now() + d);
        lock(&self.rules).push(Armed { fault, until });
    }

    /// Remove every rule.
    pub fn clear(&self) {
        lock(&self.rules).clear();
    }

    /// Consume one use of the first matching rule; its answer.
    pub(crate) fn take(
        &self,
        operation: Operation,
        method: &str,
        path: &str,
    ) -> Option<FaultAnswer> {
        let now = Instant::now();
        let path = path.to_ascii_lowercase();
        let mut rules = lock(&self.rules);
        rules.retain(|r| r.until.is_none_or(|u| now < u) && r.fault.count != Some(0));
        let rule = rules.iter_mut().find(|r| {
            r.fault.operation.is_none_or(|o| o == operation)
                && r.fault.method.as_deref().is_none_or(|m| m == method)
                && r.fault
                    .path_contains
                    .as_deref()
                    .is_none_or(|p| path.contains(p))
        })?;
        if let Some(n) = &mut rule.fault.count {
            *n -= 1;
        }
        Some(rule.fault.answer.clone())
    }
}

/// One served request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path as sent.
    pub path: String,
    /// Query string as sent (empty if none).
    pub query: String,
    /// Status answered.
    pub status: u16,
    /// When it arrived.
    pub at: Instant,
    /// When it arrived, wall clock.
    pub time: SystemTime,
    /// The operation it was routed to.
    pub operation: Operation,
    /// The RBAC action it was authorized as (none for IMDS, AAD, polls and unrouted paths).
    pub action: Option<String>,
    /// Linked actions checked (`action` on `scope`) for a PUT.
    pub linked: Vec<(String, String)>,
    /// The calling identity's client id, if it sent a valid token.
    pub client_id: Option<String>,
}

/// Largest number of requests kept (counters keep counting past it).
const LOG_CAP: usize = 200_000;

/// Every request and counts per (operation, status).
#[derive(Debug, Default)]
pub struct RequestLog {
    entries: Mutex<Vec<LoggedRequest>>,
    counts: Mutex<BTreeMap<(Operation, u16), u64>>,
}

impl RequestLog {
    /// Every logged request, oldest first.
    #[must_use]
    pub fn entries(&self) -> Vec<LoggedRequest> {
        lock(&self.entries).clone()
    }

    /// Requests of `operation`, whatever they answered.
    #[must_use]
    pub fn count(&self, operation: Operation) -> u64 {
        lock(&self.counts)
            .iter()
            .filter(|((o, _), _)| *o == operation)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests of `operation` that answered `status`.
    #[must_use]
    pub fn count_status(&self, operation: Operation, status: u16) -> u64 {
        lock(&self.counts)
            .get(&(operation, status))
            .copied()
            .unwrap_or(0)
    }

    /// Every counter.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<(Operation, u16), u64> {
        lock(&self.counts).clone()
    }

    /// Forget every entry and count.
    pub fn clear(&self) {
        lock(&self.entries).clear();
        lock(&self.counts).clear();
    }

    pub(crate) fn record(&self, entry: LoggedRequest) {
        *lock(&self.counts)
            .entry((entry.operation, entry.status))
            .or_default() += 1;
        let mut entries = lock(&self.entries);
        if entries.len() < LOG_CAP {
            entries.push(entry);
        }
    }
}

/// Lock, ignoring poisoning (a panicking test thread must not wedge the server).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

//! Faults a test injects at run time, the request-rate limit, and the record of what was
//! asked. A [`Fault`] matches EC2 requests by action (any if none) and answers them, for a
//! number of requests or a time window, with a throttle (503 `RequestLimitExceeded`), a 500
//! `InternalError`, a 503 `Unavailable`, a 5xx with a non-XML body (as moto answers an action it
//! lacks), any EC2 error, or added latency. [`RateLimit`] is a token bucket over every EC2
//! request. The [`RequestLog`] keeps every request (action, parameters, access key, time,
//! status, error code). Nothing here touches the model.

use std::{
    collections::BTreeMap,
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant, SystemTime},
};

use super::error::Ec2Error;

/// What a matching request is answered with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultAnswer {
    /// 503 `RequestLimitExceeded`.
    Throttle,
    /// 500 `InternalError`.
    Internal,
    /// 503 `Unavailable`.
    Unavailable,
    /// This status with an HTML body (no XML error), as moto answers an action it lacks.
    NotXml(u16),
    /// Any EC2 error.
    Error(Ec2Error),
    /// Serve the request normally after this delay.
    Latency(Duration),
}

/// A rule: which requests, what answer, how many times or for how long.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Only this action (any if `None`).
    pub action: Option<String>,
    /// The answer.
    pub answer: FaultAnswer,
    /// Answer at most this many requests (unlimited if `None`).
    pub count: Option<u32>,
    /// Stop answering after this long from injection (forever if `None`).
    pub duration: Option<Duration>,
}

impl Fault {
    /// Answer every request of `action` (any if `None`) with `answer`, until cleared.
    #[must_use]
    pub fn new(action: Option<&str>, answer: FaultAnswer) -> Self {
        Self {
            action: action.map(str::to_owned),
            answer,
            count: None,
            duration: None,
        }
    }

    /// 503 `RequestLimitExceeded` for `action`.
    #[must_use]
    pub fn throttle(action: Option<&str>) -> Self {
        Self::new(action, FaultAnswer::Throttle)
    }

    /// 500 `InternalError` for `action`.
    #[must_use]
    pub fn internal(action: Option<&str>) -> Self {
        Self::new(action, FaultAnswer::Internal)
    }

    /// `code` (status `status`, `message`) for `action`.
    #[must_use]
    pub fn error(action: &str, status: u16, code: &str, message: &str) -> Self {
        Self::new(
            Some(action),
            FaultAnswer::Error(Ec2Error::new(status, code, message)),
        )
    }

    /// Delay `action` by `latency`.
    #[must_use]
    pub fn latency(action: Option<&str>, latency: Duration) -> Self {
        Self::new(action, FaultAnswer::Latency(latency))
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

    /// Rules with a use left.
    pub fn armed(&self) -> usize {
        let now = Instant::now();
        lock(&self.rules)
            .iter()
            .filter(|r| r.until.is_none_or(|u| now < u) && r.fault.count != Some(0))
            .count()
    }

    /// Consume one use of the first rule matching `action`; its answer.
    pub(crate) fn take(&self, action: &str) -> Option<FaultAnswer> {
        let now = Instant::now();
        let mut rules = lock(&self.rules);
        rules.retain(|r| r.until.is_none_or(|u| now < u) && r.fault.count != Some(0));
        let rule = rules
            .iter_mut()
            .find(|r| r.fault.action.as_deref().is_none_or(|a| a == action))?;
        if let Some(n) = &mut rule.fault.count {
            *n -= 1;
        }
        Some(rule.fault.answer.clone())
    }
}

/// A token bucket over every EC2 request: above the rate, `RequestLimitExceeded`.
#[derive(Debug, Default)]
pub struct RateLimit {
    state: Mutex<Option<Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl RateLimit {
    /// Limit to `per_second` with a bucket of `burst` (full now); `None`: no limit.
    pub fn set(&self, limit: Option<(f64, u32)>) {
        *lock(&self.state) = limit.map(|(per_second, burst)| Bucket {
            per_second,
            burst: f64::from(burst.max(1)),
            tokens: f64::from(burst.max(1)),
            at: Instant::now(),
        });
    }

    /// Take a token; false when the bucket is empty (the request is throttled).
    pub(crate) fn admit(&self) -> bool {
        let mut state = lock(&self.state);
        let Some(b) = state.as_mut() else {
            return true;
        };
        let now = Instant::now();
        b.tokens = b
            .burst
            .min(b.tokens + now.duration_since(b.at).as_secs_f64() * b.per_second);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One served request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// `Action` (`Imds`/`ImdsToken` for IMDS, the path's action otherwise).
    pub action: String,
    /// Every form parameter but `Action` and `Version` (IMDS: `path`).
    pub params: BTreeMap<String, String>,
    /// The access key it was signed with, if any.
    pub access_key: Option<String>,
    /// Status answered.
    pub status: u16,
    /// The error code answered, if any.
    pub code: Option<String>,
    /// When it arrived.
    pub at: Instant,
    /// When it arrived, wall clock.
    pub time: SystemTime,
}

impl LoggedRequest {
    /// A parameter.
    #[must_use]
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }
}

/// Largest number of requests kept (counters keep counting past it).
const LOG_CAP: usize = 200_000;

/// Every request and counts per (action, status).
#[derive(Debug, Default)]
pub struct RequestLog {
    entries: Mutex<Vec<LoggedRequest>>,
    counts: Mutex<BTreeMap<(String, u16), u64>>,
}

impl RequestLog {
    /// Every logged request, oldest first.
    #[must_use]
    pub fn entries(&self) -> Vec<LoggedRequest> {
        lock(&self.entries).clone()
    }

    /// Requests of `action`, oldest first.
    #[must_use]
    pub fn of(&self, action: &str) -> Vec<LoggedRequest> {
        lock(&self.entries)
            .iter()
            .filter(|e| e.action == action)
            .cloned()
            .collect()
    }

    /// Requests of `action`, whatever they answered.
    #[must_use]
    pub fn count(&self, action: &str) -> u64 {
        lock(&self.counts)
            .iter()
            .filter(|((a, _), _)| a == action)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests of `action` that answered `status`.
    #[must_use]
    pub fn count_status(&self, action: &str, status: u16) -> u64 {
        lock(&self.counts)
            .get(&(action.to_owned(), status))
            .copied()
            .unwrap_or(0)
    }

    /// Every counter.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<(String, u16), u64> {
        lock(&self.counts).clone()
    }

    /// Forget every entry and count.
    pub fn clear(&self) {
        lock(&self.entries).clear();
        lock(&self.counts).clear();
    }

    pub(crate) fn record(&self, entry: LoggedRequest) {
        *lock(&self.counts)
            .entry((entry.action.clone(), entry.status))
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

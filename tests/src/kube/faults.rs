//! Faults a test injects into the emulator at run time, and the request counters it asserts on.
//! A fault rule answers the next N requests that match a (verb, resource) with an error
//! instead of serving them (500 InternalError, or 409 Conflict for a "conflict storm"); a fixed
//! latency delays every request; `drop_watches` cuts every open watch connection mid-stream
//! (no terminating chunk, as a dying API server or load balancer would). Nothing here touches
//! the store.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use tokio::sync::watch;

/// The verb of a request, as the API server's audit log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// A discovery document (`/api`, `/apis/...`, `/version`); its resource is the path.
    Discovery,
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
            Self::Discovery => "discovery",
        };
        f.write_str(name)
    }
}

/// What an injected fault answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 500 InternalError.
    Internal,
    /// 409 Conflict ("the object has been modified"), whatever the resourceVersion.
    Conflict,
    /// 403 Forbidden, as an API server answers a service account that lacks the permission.
    Forbidden,
}

#[derive(Debug)]
struct Rule {
    verb: Option<Verb>,
    resource: String,
    remaining: u32,
    answer: Answer,
    /// Percentage of matching requests the rule answers (100: every one).
    percent: u32,
}

/// Run-time fault injection, shared by the test and the server thread.
#[derive(Debug)]
pub struct Faults {
    rules: Mutex<Vec<Rule>>,
    latency: Mutex<Duration>,
    drops: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            rules: Mutex::default(),
            latency: Mutex::default(),
            drops: watch::Sender::new(0),
        }
    }
}

impl Faults {
    /// Answer the next `count` requests of `verb` (any verb if `None`) on `resource` with
    /// `answer`. `resource` is a plural (`ciliumnodes`), a subresource (`ciliumnodes/status`), or
    /// `*` for any.
    pub fn inject(&self, verb: Option<Verb>, resource: &str, count: u32, answer: Answer) {
        lock(&self.rules).push(Rule {
            verb,
            resource: resource.to_owned(),
            remaining: count,
            answer,
            percent: 100,
        });
    }

    /// Answer a random `percent` of the requests of `verb` (any if `None`) on `resource` with
    /// `answer`, until [`Faults::clear`].
    pub fn inject_ratio(&self, verb: Option<Verb>, resource: &str, percent: u32, answer: Answer) {
        lock(&self.rules).push(Rule {
            verb,
            resource: resource.to_owned(),
            remaining: u32::MAX,
            answer,
            percent: percent.min(100),
        });
    }

    /// The next `count` requests of `verb` on `resource` answer 500 InternalError.
    pub fn fail_next(&self, verb: Verb, resource: &str, count: u32) {
        self.inject(Some(verb), resource, count, Answer::Internal);
    }

    /// A conflict storm: the next `count` updates (PUT) of `resource` answer 409 Conflict,
    /// whatever resourceVersion they carry.
    pub fn conflict_next(&self, resource: &str, count: u32) {
        self.inject(Some(Verb::Update), resource, count, Answer::Conflict);
    }

    /// Delay every request by `latency` before it is served (zero: none).
    pub fn set_latency(&self, latency: Duration) {
        *lock(&self.latency) = latency;
    }

    /// Cut every open watch connection now.
    pub fn drop_watches(&self) {
        self.drops.send_modify(|n| *n += 1);
    }

    /// Remove every rule and the latency.
    pub fn clear(&self) {
        lock(&self.rules).clear();
        self.set_latency(Duration::ZERO);
    }

    /// The latency to apply now.
    pub(crate) fn latency(&self) -> Duration {
        *lock(&self.latency)
    }

    /// A receiver that changes whenever `drop_watches` is called.
    pub(crate) fn drop_signal(&self) -> watch::Receiver<u64> {
        self.drops.subscribe()
    }

    /// Consume one matching rule, if any, and say what to answer.
    pub(crate) fn take(&self, verb: Verb, resource: &str) -> Option<Answer> {
        let mut rules = lock(&self.rules);
        let rule = rules.iter_mut().find(|r| {
            r.remaining > 0
                && r.verb.is_none_or(|v| v == verb)
                && (r.resource == "*" || r.resource == resource)
                && (r.percent >= 100 || fastrand::u32(0..100) < r.percent)
        })?;
        rule.remaining -= 1;
        let answer = rule.answer;
        rules.retain(|r| r.remaining > 0);
        Some(answer)
    }
}

/// One counter's key: what was asked and what was answered.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// The verb.
    pub verb: Verb,
    /// The plural, `plural/status`, or the path of a discovery document.
    pub resource: String,
    /// The HTTP status code; a watch answered with an Expired ERROR event counts as 410.
    pub code: u16,
}

/// Counts of served requests by (verb, resource, code).
#[derive(Debug, Default)]
pub struct Requests {
    counts: Mutex<BTreeMap<RequestKey, u64>>,
}

impl Requests {
    /// Requests of `verb` on `resource`, whatever they answered.
    #[must_use]
    pub fn count(&self, verb: Verb, resource: &str) -> u64 {
        lock(&self.counts)
            .iter()
            .filter(|(k, _)| k.verb == verb && k.resource == resource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests of `verb` on `resource` that answered `code`.
    #[must_use]
    pub fn count_code(&self, verb: Verb, resource: &str, code: u16) -> u64 {
        let key = RequestKey {
            verb,
            resource: resource.to_owned(),
            code,
        };
        lock(&self.counts).get(&key).copied().unwrap_or(0)
    }

    /// Every counter.
    #[must_use]
    pub fn snapshot(&self) -> BTreeMap<RequestKey, u64> {
        lock(&self.counts).clone()
    }

    /// Forget every count.
    pub fn reset(&self) {
        lock(&self.counts).clear();
    }

    pub(crate) fn record(&self, verb: Verb, resource: &str, code: u16) {
        let key = RequestKey {
            verb,
            resource: resource.to_owned(),
            code,
        };
        *lock(&self.counts).entry(key).or_default() += 1;
    }
}

/// Lock, ignoring poisoning (a panicking test thread must not wedge the server).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

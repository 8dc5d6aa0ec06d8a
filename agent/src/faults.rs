//! Test-only fault points. `WEFT_TEST_FAULTS` (read once, by `weft-agent run` at start) can
//! delay named points of the agent's work or make them fail at random, so a reliability test
//! can land a SIGKILL inside a step or exercise its rollback. Unset (production), every point
//! is a no-op that costs one atomic load. This module owns the parsing and the decision only;
//! each caller turns [`Injected`] into its own error type.
//!
//! Syntax: comma-separated `point=action`, where action is `delay:<ms>` (sleep that long every
//! time the point is passed), `fail:<percent>` (fail that share of passes) or `skip` (the
//! step is left out, for a test showing what goes wrong without it). A point may be named
//! twice to get both, the delay first. Example:
//! `WEFT_TEST_FAULTS=veth=fail:7,routes=fail:7,map-update=fail:7,status-write=delay:300`.

use std::{sync::OnceLock, time::Duration};

/// The environment variable.
pub const ENV: &str = "WEFT_TEST_FAULTS";

/// A place where a test can inject a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// ADD's datapath step, right after the veth pair was created.
    Veth,
    /// ADD's datapath step, after the pod's addresses and routes, before any map is written.
    Routes,
    /// ADD's datapath step, between an address's endpoint entry and its IPCache entry.
    MapUpdate,
    /// The CiliumNode writer, right before it sends `status.ipam.used`.
    StatusWrite,
    /// The background half of a DEL (answered already), before it deletes the veth.
    Finish,
    /// The daemon loop, woken by a change, a request or the tick, before it syncs.
    Loop,
    /// The daemon's sync, holding the state lock, right after it installed the store's
    /// snapshot.
    Sync,
    /// ADD's cloud source routing (eni, azure, alibabacloud): the pod's rules and table.
    PodRules,
}

impl Point {
    const ALL: [Self; 8] = [
        Self::Veth,
        Self::Routes,
        Self::MapUpdate,
        Self::StatusWrite,
        Self::Finish,
        Self::Loop,
        Self::Sync,
        Self::PodRules,
    ];

    /// The name used in `WEFT_TEST_FAULTS`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Veth => "veth",
            Self::Routes => "routes",
            Self::MapUpdate => "map-update",
            Self::StatusWrite => "status-write",
            Self::Finish => "finish",
            Self::Loop => "loop",
            Self::Sync => "sync",
            Self::PodRules => "pod-rules",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// What happens at one point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// Sleep this long each time.
    pub delay: Duration,
    /// Fail this percentage of passes (0–100).
    pub fail_percent: u32,
    /// Leave the step out.
    pub skip: bool,
}

/// The rules of every point, by [`Point`].
pub type Rules = [Rule; Point::ALL.len()];

/// A fault was injected at a point.
#[derive(Debug, thiserror::Error)]
#[error("fault injected at {point} ({ENV} is set: this is a test run)")]
pub struct Injected {
    /// The point's name.
    pub point: &'static str,
}

/// `WEFT_TEST_FAULTS` does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{ENV}: {item:?}: {reason}")]
pub struct SpecError {
    /// The offending `point=action`.
    pub item: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

static RULES: OnceLock<Option<Rules>> = OnceLock::new();

/// Parse a `WEFT_TEST_FAULTS` value.
///
/// # Errors
/// An unknown point or action, or a number that does not parse.
pub fn parse(spec: &str) -> Result<Rules, SpecError> {
    let mut rules = Rules::default();
    for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let err = |reason| SpecError {
            item: item.to_owned(),
            reason,
        };
        let (name, action) = item
            .split_once('=')
            .ok_or_else(|| err("expected point=action"))?;
        let point = Point::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                err(
                    "unknown point (veth, routes, map-update, status-write, finish, loop, sync, \
                     pod-rules)",
                )
            })?;
        let rule = &mut rules[point.index()];
        match action.split_once(':') {
            None if action == "skip" => rule.skip = true,
            Some(("delay", ms)) => {
                let ms = ms.parse().map_err(|_| err("delay needs milliseconds"))?;
                rule.delay = Duration::from_millis(ms);
            }
            Some(("fail", pct)) => match pct.parse() {
                Ok(pct @ 0..=100) => rule.fail_percent = pct,
                _ => return Err(err("fail needs a percentage 0-100")),
            },
            _ => return Err(err("action must be delay:<ms>, fail:<percent> or skip")),
        }
    }
    Ok(rules)
}

/// Read `WEFT_TEST_FAULTS` once; returns the rules when it is set. Later calls change nothing.
///
/// # Errors
/// The variable is set but does not parse.
pub fn init() -> Result<Option<Rules>, SpecError> {
    let parsed = match std::env::var(ENV) {
        Ok(spec) => Some(parse(&spec)?),
        Err(_) => None,
    };
    Ok(*RULES.get_or_init(|| parsed))
}

fn rule(point: Point) -> Option<Rule> {
    RULES
        .get()
        .copied()
        .flatten()
        .map(|rules| rules[point.index()])
}

/// Log a hold (tests wait for this line to kill the agent inside it).
fn holding(rule: Rule, point: Point) -> bool {
    if rule.delay.is_zero() {
        return false;
    }
    tracing::warn!("holding at {} for {:?} ({ENV})", point.name(), rule.delay);
    true
}

fn fails(rule: Rule, point: Point) -> Result<(), Injected> {
    if rule.fail_percent > 0 && fastrand::u32(0..100) < rule.fail_percent {
        tracing::warn!("injecting a failure at {} ({ENV})", point.name());
        return Err(Injected {
            point: point.name(),
        });
    }
    Ok(())
}

/// Whether a test asked to leave the step at `point` out (`skip`).
#[must_use]
pub fn skipped(point: Point) -> bool {
    rule(point).is_some_and(|rule| {
        if rule.skip {
            tracing::warn!("skipping {} ({ENV})", point.name());
        }
        rule.skip
    })
}

/// Pass `point` in synchronous code (a delay blocks the thread).
///
/// # Errors
/// The point's rule chose to fail this pass.
pub fn hit(point: Point) -> Result<(), Injected> {
    let Some(rule) = rule(point) else {
        return Ok(());
    };
    if holding(rule, point) {
        std::thread::sleep(rule.delay);
    }
    fails(rule, point)
}

/// Pass `point` in async code.
///
/// # Errors
/// The point's rule chose to fail this pass.
pub async fn hit_async(point: Point) -> Result<(), Injected> {
    let Some(rule) = rule(point) else {
        return Ok(());
    };
    if holding(rule, point) {
        tokio::time::sleep(rule.delay).await;
    }
    fails(rule, point)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_delays_and_failures_and_refuses_the_rest() {
        let rules = parse("veth=fail:7, status-write=delay:300,veth=delay:5").expect("parses");
        assert_eq!(
            rules[Point::Veth.index()],
            Rule {
                delay: Duration::from_millis(5),
                fail_percent: 7,
                skip: false,
            }
        );
        assert!(parse("pod-rules=skip").expect("parses")[Point::PodRules.index()].skip);
        assert_eq!(
            rules[Point::StatusWrite.index()].delay,
            Duration::from_millis(300)
        );
        assert_eq!(rules[Point::Routes.index()], Rule::default());
        for bad in [
            "veth",
            "nope=fail:1",
            "veth=fail:101",
            "veth=delay:x",
            "veth=boom:1",
        ] {
            assert!(parse(bad).is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn unset_points_never_fail() {
        // RULES is never initialised in unit tests: every point passes.
        for point in Point::ALL {
            assert!(hit(point).is_ok());
        }
    }
}

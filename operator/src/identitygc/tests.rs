//! The collector's pure decisions over a clock the tests move.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use super::{
    heartbeat::Heartbeats,
    sweep::{Action, IdentityRecord, sweep},
};

const TIMEOUT: Duration = Duration::from_mins(1);

fn identity(name: &str, marked: bool) -> IdentityRecord {
    IdentityRecord {
        name: name.to_owned(),
        uid: Some(format!("uid-{name}")),
        resource_version: Some("7".to_owned()),
        marked,
    }
}

fn used(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn an_unused_identity_is_marked_after_the_timeout_then_deleted() {
    let start = Instant::now();
    let mut heartbeats = Heartbeats::new(start, TIMEOUT);
    let unused = [identity("300", false)];
    // A fresh operator gives every identity a full timeout.
    assert_eq!(
        sweep(&unused, &used(&[]), &mut heartbeats, start + TIMEOUT / 2),
        []
    );
    assert_eq!(
        sweep(&unused, &used(&[]), &mut heartbeats, start + TIMEOUT),
        [Action::Mark(identity("300", false))]
    );
    // The mark is a change, so a sign of life: the delete comes a timeout later.
    heartbeats.mark_alive("300", start + TIMEOUT);
    let marked = [identity("300", true)];
    assert_eq!(
        sweep(
            &marked,
            &used(&[]),
            &mut heartbeats,
            start + TIMEOUT * 3 / 2
        ),
        []
    );
    assert_eq!(
        sweep(&marked, &used(&[]), &mut heartbeats, start + TIMEOUT * 2),
        [Action::Delete(identity("300", true))]
    );
}

#[test]
fn an_identity_in_use_stays_and_its_last_use_counts() {
    let start = Instant::now();
    let mut heartbeats = Heartbeats::new(start, TIMEOUT);
    let ids = [identity("300", false), identity("301", true)];
    for step in 1..10 {
        let now = start + TIMEOUT * step;
        assert_eq!(
            sweep(&ids, &used(&["300", "301"]), &mut heartbeats, now),
            []
        );
    }
    // Unused from now on: kept for one more timeout after the last use.
    let last_use = start + TIMEOUT * 9;
    assert_eq!(
        sweep(&ids, &used(&[]), &mut heartbeats, last_use + TIMEOUT / 2),
        []
    );
    assert_eq!(
        sweep(&ids, &used(&[]), &mut heartbeats, last_use + TIMEOUT),
        [
            Action::Mark(identity("300", false)),
            Action::Delete(identity("301", true))
        ]
    );
}

#[test]
fn stale_heartbeats_are_dropped_and_forgotten_ones_restart_from_the_table() {
    let start = Instant::now();
    let mut heartbeats = Heartbeats::new(start, TIMEOUT);
    heartbeats.mark_alive("300", start);
    heartbeats.mark_alive("301", start + TIMEOUT * 5);
    heartbeats.gc(start + TIMEOUT * 11);
    assert_eq!(
        heartbeats.len(),
        1,
        "only 301 was refreshed within ten timeouts"
    );
    heartbeats.forget("301");
    assert!(heartbeats.is_empty());
    assert!(!heartbeats.is_alive("301", start + TIMEOUT * 11));
}

#[tokio::test(start_paused = true)]
async fn a_rate_interval_past_the_clock_s_range_waits_without_overflowing() {
    let mut limit = super::RateLimit {
        interval: Duration::MAX,
        limit: 1,
        window: None,
    };
    limit.wait().await;
    // The second delete of the window waits for the (endless) interval: it must not panic.
    let second = tokio::time::timeout(Duration::from_secs(1), limit.wait()).await;
    assert!(second.is_err(), "the second delete waits");
}

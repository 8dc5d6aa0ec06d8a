//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` with a
//! `LeaseLock` does it (and so Cilium's operator): GET the Lease; create it when missing; take
//! it over only when its record has not changed for `lease_duration` by this replica's own
//! clock (never by comparing the holder's timestamps, so clock skew does not matter); write
//! with the `resourceVersion` it read, so of two candidates only one wins (409 for the other).
//!
//! The leader renews every `retry_period`. When it has not managed to renew for
//! `renew_deadline` (shorter than `lease_duration`), [`Leadership::lost`] resolves and the
//! caller stops mutating (the operator exits, as Cilium's does) before another replica can
//! observe the lease as expired. On a clean shutdown the leader releases the lease (empty
//! holder, 1 s duration), so the next replica takes over at once.

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, Client, api::PostParams};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::config::LeaderTiming;

/// How long releasing the lease at shutdown may take.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// A failed attempt (the caller retries after `retry_period`).
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another replica holds a lease that is still valid.
    #[error("the lease is held by {holder}")]
    HeldBy {
        /// Its holder identity.
        holder: String,
    },
    /// The API call failed (409: another replica wrote first).
    #[error("{verb} lease {namespace}/{name}")]
    Api {
        /// `get`, `create` or `update`.
        verb: &'static str,
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// One replica's side of the election.
#[derive(Debug)]
pub struct Elector {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    timing: LeaderTiming,
    /// The last record seen and when it was first seen (by our clock).
    observed: Option<(LeaseSpec, Instant)>,
}

/// Held leadership: resolves [`Leadership::lost`] when renewal failed for `renew_deadline`.
#[derive(Debug)]
pub struct Leadership {
    lost: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Elector>,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl Elector {
    /// A candidate `identity` for the Lease `namespace/name`.
    #[must_use]
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timing: LeaderTiming,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timing,
            observed: None,
        }
    }

    fn api_error(&self, verb: &'static str) -> impl FnOnce(kube::Error) -> LeaseError + '_ {
        move |source| LeaseError::Api {
            verb,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }

    /// One attempt to acquire or renew (client-go `tryAcquireOrRenew`).
    ///
    /// # Errors
    /// [`LeaseError::HeldBy`] while another replica's lease is valid; [`LeaseError::Api`] when
    /// a call fails, including a lost race (409).
    pub async fn try_acquire_or_renew(&mut self) -> Result<(), LeaseError> {
        let (identity, duration) = (self.identity.clone(), seconds(self.timing.lease_duration));
        let ours = |acquire: MicroTime, transitions: i32| LeaseSpec {
            holder_identity: Some(identity.clone()),
            lease_duration_seconds: Some(duration),
            acquire_time: Some(acquire),
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let existing = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(self.api_error("get"))?;
        let Some(current) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(ours(now(), 0)),
            };
            let created = self
                .api
                .create(&PostParams::default(), &lease)
                .await
                .map_err(self.api_error("create"))?;
            self.observe(created.spec.unwrap_or_default());
            return Ok(());
        };
        let record = current.spec.clone().unwrap_or_default();
        self.observe(record.clone());
        let holder = record.holder_identity.clone().unwrap_or_default();
        let held_by_us = holder == self.identity;
        if !held_by_us && !holder.is_empty() {
            let duration = record
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.timing.lease_duration, Duration::from_secs);
            let since = self
                .observed
                .as_ref()
                .map_or_else(Instant::now, |(_, at)| *at);
            if since.elapsed() < duration {
                return Err(LeaseError::HeldBy { holder });
            }
        }
        let transitions = record.lease_transitions.unwrap_or(0);
        let spec = if held_by_us {
            ours(record.acquire_time.clone().unwrap_or_else(now), transitions)
        } else {
            ours(now(), transitions + 1)
        };
        let mut lease = current;
        lease.spec = Some(spec);
        let written = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(self.api_error("update"))?;
        self.observe(written.spec.unwrap_or_default());
        Ok(())
    }

    fn observe(&mut self, record: LeaseSpec) {
        if self
            .observed
            .as_ref()
            .is_none_or(|(seen, _)| *seen != record)
        {
            self.observed = Some((record, Instant::now()));
        }
    }

    /// Block until this replica holds the lease.
    pub async fn acquire(mut self) -> Leadership {
        info!(lease = %format!("{}/{}", self.namespace, self.name), identity = %self.identity, "waiting to acquire the leader-election lease");
        loop {
            match self.try_acquire_or_renew().await {
                Ok(()) => break,
                Err(LeaseError::HeldBy { holder }) => {
                    debug!(%holder, "lease held by another replica");
                }
                // A rejected credential, a missing permission or an unreachable server is
                // logged once by the client's ApiReach (and turns /healthz to 503).
                Err(error) => {
                    debug!(error = %weft_k8s::error::chain(&error), "acquiring the lease failed");
                }
            }
            tokio::time::sleep(jitter(self.timing.retry_period)).await;
        }
        info!(identity = %self.identity, "acquired the leader-election lease; this replica leads");
        let (lost_tx, lost) = watch::channel(false);
        let (stop, mut stop_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut last_renew = Instant::now();
            loop {
                tokio::select! {
                    () = tokio::time::sleep(self.timing.retry_period) => {}
                    _ = stop_rx.changed() => return self,
                }
                let deadline = self
                    .timing
                    .renew_deadline
                    .saturating_sub(last_renew.elapsed());
                match tokio::time::timeout(deadline, self.try_acquire_or_renew()).await {
                    Ok(Ok(())) => last_renew = Instant::now(),
                    Ok(Err(error)) => {
                        warn!(error = %weft_k8s::error::chain(&error), "renewing the leader-election lease failed");
                    }
                    Err(_) => {}
                }
                if last_renew.elapsed() >= self.timing.renew_deadline {
                    warn!(
                        renew_deadline = ?self.timing.renew_deadline,
                        "could not renew the leader-election lease in time: leadership lost"
                    );
                    let _ = lost_tx.send(true);
                    return self;
                }
            }
        });
        Leadership { lost, stop, task }
    }

    /// Give the lease up (client-go `ReleaseOnCancel`): empty holder, 1 s duration.
    async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => info!("released the leader-election lease"),
            Err(error) => warn!(%error, "releasing the leader-election lease failed"),
        }
    }
}

impl Leadership {
    /// Resolves when leadership is lost (renewal failed for the renew deadline).
    pub async fn lost(&mut self) {
        while !*self.lost.borrow_and_update() {
            if self.lost.changed().await.is_err() {
                return;
            }
        }
    }

    /// Stop renewing and release the lease (shutdown), giving up after [`RELEASE_TIMEOUT`]
    /// (an unreachable API server must not hold the exit up; the lease then expires).
    pub async fn release(self) {
        let _ = self.stop.send(true);
        if let Ok(mut elector) = self.task.await
            && !*self.lost.borrow()
            && tokio::time::timeout(RELEASE_TIMEOUT, elector.release())
                .await
                .is_err()
        {
            warn!("releasing the leader-election lease timed out; it will expire instead");
        }
    }
}

/// client-go's `wait.Jitter(d, 1.2)`: between d and 2.2 d, saturating at [`Duration::MAX`]
/// (validation bounds the periods; a timer must not panic when that is bypassed).
fn jitter(d: Duration) -> Duration {
    let extra = Duration::try_from_secs_f64(d.as_secs_f64() * 1.2 * fastrand::f64())
        .unwrap_or(Duration::MAX);
    d.saturating_add(extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_between_d_and_2_2_d_and_saturates() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(2));
            assert!(
                d >= Duration::from_secs(2) && d <= Duration::from_millis(4400),
                "{d:?}"
            );
        }
        assert_eq!(jitter(Duration::MAX), Duration::MAX);
        assert!(jitter(Duration::MAX / 2) >= Duration::MAX / 2);
    }
}

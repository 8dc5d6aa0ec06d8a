//! Recorded addresses that can never be restored under the present configuration and
//! CiliumNode (crd: the address left `spec.ipam.pool`; cluster-pool: the podCIDR changed;
//! multi-pool: the pool was deleted), told apart from those whose pool or CIDR has simply not
//! arrived yet. A lost address is logged with its pod and the reason, its endpoint record is
//! marked, and `status` lists it; new pods do not wait for it (Cilium logs the failed restore
//! and moves on). Must not touch the datapath.

use std::{net::IpAddr, time::Instant};

use tracing::warn;

use super::{Records, State};
use crate::ipam::{manager::IpamError, mode::IpamMode};

/// What became of one recorded address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Held again.
    Restored,
    /// Held although `spec.ipam.pool` no longer lists it (`bypass-ip-availability-upon-restore`).
    Bypassed,
    /// What it needs has not arrived yet (pod CIDR, CiliumNode, the pool's CIDRs): retried.
    Wait(String),
    /// It can never be held under this configuration and CiliumNode: the reason.
    Lost(String),
}

/// Take `ip` (of `owner`, in `pool`) again, and say whether a failure is final.
pub(super) fn try_restore(
    state: &mut State,
    ip: IpAddr,
    owner: &str,
    pool: &str,
    now: Instant,
) -> Outcome {
    match state.ipam.restore_endpoint(ip, owner, pool, now) {
        Ok(false) => Outcome::Restored,
        Ok(true) => Outcome::Bypassed,
        Err(error @ IpamError::NotReady { .. }) => {
            let snapshot = &state.snapshot;
            let pool_gone = state.ipam.config().mode == IpamMode::MultiPool
                && snapshot.synced
                && !snapshot.pools.contains_key(pool);
            if pool_gone {
                Outcome::Lost(format!("CiliumPodIPPool {pool:?} does not exist"))
            } else {
                Outcome::Wait(super::chain(&error))
            }
        }
        // While the node is not ready its pool may still grow (crd) or its CIDRs arrive.
        Err(error) if state.ipam.ready().is_err() => Outcome::Wait(super::chain(&error)),
        Err(error) => Outcome::Lost(super::chain(&error)),
    }
}

/// Mark (or unmark) the endpoint records of the addresses decided in one pass:
/// `decided` holds `(address, IPAM owner, Some(reason) when lost)`. Records none of these
/// addresses belong to are left alone.
pub(super) fn mark_records(records: &Records, decided: &[(IpAddr, String, Option<String>)]) {
    if decided.is_empty() {
        return;
    }
    let all = match records.all() {
        Ok((all, _)) => all,
        Err(error) => {
            warn!(error = %super::chain(&error), "marking endpoint records whose address was not restored");
            return;
        }
    };
    for mut record in all {
        let owner = restored_owner(&record.owner);
        let mine: Vec<&(IpAddr, String, Option<String>)> = decided
            .iter()
            .filter(|(ip, o, _)| *o == owner && record.addrs.iter().any(|a| a.ip == *ip))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let reasons: Vec<String> = mine
            .iter()
            .filter_map(|(ip, _, reason)| reason.as_ref().map(|r| format!("{ip}: {r}")))
            .collect();
        let mark = (!reasons.is_empty()).then(|| reasons.join("; "));
        if record.not_restored != mark {
            record.not_restored = mark;
            if let Err(error) = records.put(&record) {
                warn!(error = %super::chain(&error), container = %record.container_id, "marking an endpoint record");
            }
        }
    }
}

/// The IPAM owner of a restored record's addresses (Cilium's `HumanString() + " [restored]"`).
#[must_use]
pub(super) fn restored_owner(owner: &str) -> String {
    format!("{owner} [restored]")
}

/// One `status` problem per endpoint record whose addresses were not restored.
pub(super) fn problems(records: &Records) -> Vec<String> {
    let Ok((all, _)) = records.all() else {
        return Vec::new();
    };
    all.into_iter()
        .filter_map(|record| {
            let reason = record.not_restored?;
            Some(format!(
                "address not restored for pod {} (container {}): {reason}; new pods are served, \
                 this one keeps its address until it is deleted",
                record.owner, record.container_id
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::{EndpointRecord, RecordAddr};

    fn record(id: &str, owner: &str, ip: &str) -> EndpointRecord {
        EndpointRecord {
            container_id: id.to_owned(),
            ifname: "eth0".to_owned(),
            netns: "/var/run/netns/x".into(),
            owner: owner.to_owned(),
            host_ifname: format!("wft{id}"),
            addrs: vec![RecordAddr {
                ip: ip.parse().expect("ip"),
                pool: "default".to_owned(),
                skip_masquerade: false,
            }],
            result: None,
            not_restored: None,
            deleting: false,
            routing: Vec::new(),
            routing_problem: None,
        }
    }

    #[test]
    fn lost_addresses_mark_their_record_and_a_later_restore_unmarks_it() {
        let dir = std::env::temp_dir().join(format!("weft-restore-{}", std::process::id()));
        let records = Records::open(&dir).expect("records");
        records
            .put(&record("a", "ns/web", "10.0.0.5"))
            .expect("put");
        records.put(&record("b", "ns/db", "10.0.0.6")).expect("put");
        let ip: IpAddr = "10.0.0.5".parse().expect("ip");
        let lost = vec![(
            ip,
            restored_owner("ns/web"),
            Some("IP 10.0.0.5 is not available".to_owned()),
        )];
        mark_records(&records, &lost);
        let listed = problems(&records);
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert!(
            listed[0].contains("ns/web")
                && listed[0].contains("10.0.0.5: IP 10.0.0.5 is not available"),
            "{listed:?}"
        );
        let untouched = records.get("b", "eth0").expect("get").expect("b");
        assert_eq!(untouched.not_restored, None);
        mark_records(&records, &[(ip, restored_owner("ns/web"), None)]);
        assert!(problems(&records).is_empty(), "restored at a later start");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}

//! The CNI operations other than ADD (`add.rs`) and DEL (`del.rs`) as the agent performs
//! them: CHECK, STATUS, GC. Each takes its attachment's lock; the state lock only for the IPAM
//! and eBPF map steps, never across netlink.

use std::{net::IpAddr, time::Instant};

use super::{Daemon, EndpointRecord, NodeStore, RecordAddr, State, chain};
use crate::{
    cni::{
        proto::{PodRequest, Response},
        types::{Attachment, CniError, code},
    },
    datapath::{Datapath, DatapathError, ipcache::host_prefix},
    ipam::{
        Family,
        input::PoolInput,
        manager::{Allocated, IpamError},
    },
    metrics::Outcome,
    store::{Snapshot, Store as _},
};

pub(super) fn error(
    version: &str,
    code: u32,
    msg: impl Into<String>,
    details: impl Into<String>,
) -> Response {
    Response::Error(CniError::new(version, code, msg, details))
}

/// The answer to an ADD whose allocation failed: "try again later" while the node waits for
/// addresses, otherwise an IPAM failure naming the pod and the node.
pub(super) fn allocation_failed(version: &str, owner: &str, node: &str, e: &IpamError) -> Response {
    match e {
        IpamError::NotReady { .. } => error(
            version,
            code::TRY_AGAIN_LATER,
            "IPAM pool not ready yet",
            chain(e),
        ),
        e => error(
            version,
            code::IPAM_FAILED,
            format!("unable to allocate an address for {owner} on node {node}"),
            chain(e),
        ),
    }
}

impl Daemon {
    pub(super) async fn check(&self, pod: &PodRequest) -> Response {
        let v = pod.cni_version.as_str();
        let _attachment = self.attachments.lock(&pod.container_id, &pod.ifname).await;
        let Ok(Some(record)) = self.records.get(&pod.container_id, &pod.ifname) else {
            return error(
                v,
                code::UNKNOWN_CONTAINER,
                format!(
                    "no attachment {}/{} is known to weft",
                    pod.container_id, pod.ifname
                ),
                "ADD it first",
            );
        };
        let link = crate::datapath::netlink::link_index(&record.host_ifname)
            .await
            .ok()
            .flatten();
        let mut missing: Vec<String> = Vec::new();
        {
            let mut state = self.state.lock().await;
            for a in &record.addrs {
                match state.datapath.endpoint(a.ip) {
                    Ok(Some(info)) if Some(info.ifindex) == link => {}
                    Ok(_) => missing.push(a.ip.to_string()),
                    Err(e) => {
                        return error(
                            v,
                            code::IO_FAILURE,
                            "cannot read the endpoints map",
                            chain(&e),
                        );
                    }
                }
            }
        }
        if link.is_none() || !missing.is_empty() {
            return error(
                v,
                code::DATAPATH_FAILED,
                "the attachment is not as ADD left it",
                format!(
                    "host interface {} present: {}; endpoints missing: {missing:?}",
                    record.host_ifname,
                    link.is_some()
                ),
            );
        }
        Response::Done
    }

    pub(super) async fn status(&self, v: &str) -> Response {
        let state = self.state.lock().await;
        match state.ipam.ready() {
            Ok(()) if state.unrestored.is_empty() && !state.router.is_empty() => Response::Done,
            Ok(()) => error(
                v,
                code::NOT_AVAILABLE,
                "weft-agent is restoring endpoints",
                "",
            ),
            Err(e) => error(v, code::NOT_AVAILABLE, "IPAM is not ready", chain(&e)),
        }
    }

    pub(super) async fn gc(&self, v: &str, valid: &[Attachment]) -> Response {
        let records = match self.records.all() {
            Ok((records, _)) => records,
            Err(e) => {
                return error(
                    v,
                    code::IO_FAILURE,
                    "cannot list endpoint records",
                    chain(&e),
                );
            }
        };
        for record in records {
            if valid
                .iter()
                .any(|a| a.container_id == record.container_id && a.ifname == record.ifname)
            {
                continue;
            }
            let pod = PodRequest {
                cni_version: v.to_owned(),
                container_id: record.container_id,
                ifname: record.ifname,
                ..PodRequest::default()
            };
            if let Response::Error(e) = self.del(&pod, super::del::Finish::InBackground).await {
                return Response::Error(e);
            }
        }
        Response::Done
    }

    /// With Kubernetes, kubelet creates the Pod before it calls CNI, but this node's watch may
    /// not have delivered it yet: wait for it a little (as Cilium waits for its pod informer),
    /// so multi-pool selection sees its annotations and labels. Without it after the wait,
    /// selection answers as it would (the pod is not found).
    pub(super) async fn wait_for_pod(&self, pod: &PodRequest) {
        const POD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
        // Only multi-pool selection reads the pod (Cilium's other modes ignore it).
        let selects = self.config.ipam == crate::ipam::mode::IpamMode::MultiPool;
        if !selects || !matches!(self.store, NodeStore::Kube(_)) || pod.pod_name.is_empty() {
            return;
        }
        let key = (pod.pod_namespace.clone(), pod.pod_name.clone());
        if self.state.lock().await.snapshot.pods.contains_key(&key) {
            return;
        }
        let mut snapshots = self.store.snapshots();
        let found = tokio::time::timeout(POD_WAIT, async {
            loop {
                if snapshots.borrow_and_update().pods.contains_key(&key) {
                    return true;
                }
                if snapshots.changed().await.is_err() {
                    return false;
                }
            }
        })
        .await
        .unwrap_or(false);
        if found {
            self.sync().await;
        }
    }

    /// Allocate for `owner` and count the allocation (duration, addresses per pool).
    pub(super) fn allocate(
        &self,
        state: &mut State,
        owner: &str,
        snapshot: &Snapshot,
        pools: &[PoolInput],
    ) -> Result<Vec<Allocated>, IpamError> {
        let started = Instant::now();
        let allocation =
            state
                .ipam
                .allocate(owner, snapshot, pools, &mut state.rng, Instant::now());
        let took = started.elapsed();
        let outcome = if allocation.is_ok() {
            Outcome::Success
        } else {
            Outcome::Failure
        };
        let counted: Vec<_> = allocation
            .iter()
            .flatten()
            .map(|a| (a.pool.clone(), Family::of(&a.ip)))
            .collect();
        self.metrics.ipam.allocated(outcome, took, &counted);
        allocation
    }

    /// Release `addrs` (address, pool) and count the release.
    pub(super) fn release(&self, state: &mut State, addrs: &[(IpAddr, String)]) {
        let started = Instant::now();
        for (ip, pool) in addrs {
            state.ipam.release(*ip, pool);
        }
        let counted: Vec<_> = addrs
            .iter()
            .map(|(ip, pool)| (pool.clone(), Family::of(ip)))
            .collect();
        self.metrics.ipam.released(started.elapsed(), &counted);
    }
}

/// The (address, pool) pairs of a record.
pub(super) fn record_addrs(record: &EndpointRecord) -> Vec<(IpAddr, String)> {
    record
        .addrs
        .iter()
        .map(|a| (a.ip, a.pool.clone()))
        .collect()
}

/// Remove the endpoint entries of `addrs`, the interface entries they point at, and their
/// IPCache host entries, that `remove_pod` left behind. When the sandbox died before the DEL its
/// veth died with it, and `remove_pod` cannot tell which entries were its; containerd deletes
/// the task, and with it the network namespace, before it calls DEL, so that is its normal case
/// (and a pod that vanished while the agent was down is the same at start-up).
pub(super) fn purge_endpoints(
    datapath: &mut Datapath,
    addrs: &[RecordAddr],
) -> Result<(), DatapathError> {
    let (ours, others): (Vec<_>, Vec<_>) = datapath
        .list_endpoints()?
        .into_iter()
        .partition(|row| addrs.iter().any(|a| a.ip == row.ip));
    for row in &ours {
        datapath.remove_endpoint(row.ip)?;
    }
    for row in &ours {
        if !others.iter().any(|other| other.ifindex == row.ifindex) {
            datapath.remove_iface(row.ifindex)?;
        }
    }
    // The addresses are this attachment's until released: no one else's entry is removed.
    for a in addrs {
        datapath.remove_ipcache(host_prefix(a.ip))?;
    }
    Ok(())
}

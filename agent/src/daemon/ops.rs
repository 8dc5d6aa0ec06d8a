//! The CNI operations as the agent performs them. ADD: a repeated ADD gets the recorded
//! answer once its datapath is repaired (unless its sandbox is gone: then the stale attachment
//! is undone first; an ADD of it in another sandbox while the first lives is refused); otherwise
//! allocate (IPAM), wire (datapath), record, answer — and on any failure undo every step
//! already made. DEL: unwire, release, forget; idempotent, also after the sandbox is gone.
//! CHECK, STATUS, GC.

use std::{net::IpAddr, sync::Arc, time::Instant};

use agent_common::identity;
use tracing::{info, warn};

use super::{
    Daemon, EndpointRecord, NodeStore, RecordAddr, State,
    result::{build_result, no_snat_flags, owner_of, pool_id},
};
use crate::{
    cni::{
        proto::{PodRequest, Response},
        types::{Attachment, CniError, CniResult, code},
    },
    crd::pool::CiliumPodIPPool,
    datapath::{
        Datapath, DatapathError, PodSpec, host_ifname,
        ipcache::host_prefix,
        netns::{self, NetNsError},
    },
    ipam::{
        Family,
        manager::{Allocated, IpamError},
        sanity::address_clash,
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
fn allocation_failed(version: &str, owner: &str, node: &str, e: &IpamError) -> Response {
    match e {
        IpamError::NotReady { .. } => error(
            version,
            code::TRY_AGAIN_LATER,
            "IPAM pool not ready yet",
            super::chain(e),
        ),
        e => error(
            version,
            code::IPAM_FAILED,
            format!("unable to allocate an address for {owner} on node {node}"),
            super::chain(e),
        ),
    }
}

impl Daemon {
    pub(super) async fn add(&self, pod: &PodRequest) -> Response {
        let v = pod.cni_version.as_str();
        if let Some(answer) = self.earlier_attachment(pod).await {
            return answer;
        }
        match netns::check_pod_netns(&pod.netns) {
            Ok(()) => {}
            Err(NetNsError::NotFound { .. }) => {
                return error(
                    v,
                    code::UNKNOWN_CONTAINER,
                    format!("network namespace {} does not exist", pod.netns.display()),
                    "the sandbox is gone; the runtime should retry with a live one",
                );
            }
            Err(e) => return error(v, code::INVALID_ENV, "CNI_NETNS refused", e.to_string()),
        }
        self.wait_for_pod(pod).await;
        let mut state = self.state.lock().await;
        if !state.unrestored.is_empty() || state.router.is_empty() {
            let why = state.ipam.ready().err().map_or_else(
                || "restoring the addresses of existing endpoints".to_owned(),
                |e| e.to_string(),
            );
            return error(v, code::TRY_AGAIN_LATER, "IPAM pool not ready yet", why);
        }
        let snapshot = Arc::clone(&state.snapshot);
        let pools: Vec<_> = snapshot.pools.values().cloned().collect();
        let owner = match owner_of(pod, &snapshot) {
            Ok(owner) => owner,
            Err(e) => return Response::Error(e),
        };
        let allocated = match self.allocate(&mut state, &owner, &snapshot, &pools) {
            Ok(a) => a,
            Err(e) => {
                // The failed attempt left a pending allocation (multi-pool): write the demand
                // now, or a quiet node never asks for the block the pod waits for (Cilium
                // triggers the CiliumNode update on every attempt, failed or not).
                drop(state);
                self.request_write().await;
                return allocation_failed(v, &owner, &self.opts.node_name, &e);
            }
        };
        if let Some(refused) = self.refuse_clashes(&mut state, v, &owner, &allocated) {
            return refused;
        }
        match self.wire(&mut state, pod, &owner, &allocated).await {
            Ok(result) => {
                drop(state);
                self.request_write().await;
                info!(container = %pod.container_id, %owner, ips = ?allocated.iter().map(|a| a.ip).collect::<Vec<_>>(), "ADD");
                Response::Added(result)
            }
            Err(response) => {
                let addrs: Vec<_> = allocated.iter().map(|a| (a.ip, a.pool.clone())).collect();
                self.release(&mut state, &addrs);
                response
            }
        }
    }

    /// An address inside one of the node's own networks (a pod range that overlaps them,
    /// found after start-up) is never handed out: release the allocation and refuse the ADD.
    fn refuse_clashes(
        &self,
        state: &mut State,
        v: &str,
        owner: &str,
        allocated: &[Allocated],
    ) -> Option<Response> {
        let (ip, network) = allocated.iter().find_map(|a| {
            address_clash(self.config.ipam, a.ip, &state.node_networks).map(|n| (a.ip, n.clone()))
        })?;
        for a in allocated {
            state.ipam.release(a.ip, &a.pool);
        }
        Some(error(
            v,
            code::IPAM_FAILED,
            format!("refusing address {ip} for {owner}: it overlaps {network}"),
            "a pod range overlaps the node's own networks; pick pod CIDRs outside them (see the \
             agent's log for the range and the fix)",
        ))
    }

    /// Wire the pod and record it; on failure everything made here is undone.
    async fn wire(
        &self,
        state: &mut State,
        pod: &PodRequest,
        owner: &str,
        allocated: &[Allocated],
    ) -> Result<CniResult, Response> {
        let v = pod.cni_version.as_str();
        let addrs: Vec<IpAddr> = allocated.iter().map(|a| a.ip).collect();
        let gateway_v4 = state.router.iter().find_map(|ip| match ip {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        });
        let gateway_v6 = state.router.iter().find_map(|ip| match ip {
            IpAddr::V6(v6) => Some(*v6),
            IpAddr::V4(_) => None,
        });
        let flags = no_snat_flags(allocated.iter().map(|a| (a.ip, a.skip_masquerade)));
        let first_pool = allocated
            .first()
            .map_or(self.config.default_pool.as_str(), |a| a.pool.as_str());
        let spec = PodSpec {
            container_id: &pod.container_id,
            netns: &pod.netns,
            ifname: &pod.ifname,
            addrs: &addrs,
            gateway_v4,
            gateway_v6,
            identity: identity::INIT,
            pool_id: pool_id(first_pool, &self.config.default_pool),
            flags,
            mtu: pod.mtu,
        };
        let mut record = EndpointRecord {
            container_id: pod.container_id.clone(),
            ifname: pod.ifname.clone(),
            netns: pod.netns.clone(),
            owner: owner.to_owned(),
            host_ifname: host_ifname(&pod.container_id, &pod.ifname),
            addrs: allocated
                .iter()
                .map(|a| RecordAddr {
                    ip: a.ip,
                    pool: a.pool.clone(),
                    skip_masquerade: a.skip_masquerade,
                })
                .collect(),
            result: None,
            not_restored: None,
        };
        if let Err(e) = self.records.put(&record) {
            return Err(error(
                v,
                code::IO_FAILURE,
                "cannot write the endpoint record",
                e.to_string(),
            ));
        }
        // A veth left by an earlier, interrupted attempt (no record of it survived) goes first.
        if let Err(e) = state
            .datapath
            .remove_pod(&pod.container_id, &pod.ifname)
            .await
        {
            warn!(error = %crate::daemon::chain(&e), "removing a stale interface");
        }
        let wired = state.datapath.add_pod(&spec).await;
        let iface = wired.map_err(|e| {
            let _ = self.records.remove(&pod.container_id, &pod.ifname);
            error(
                v,
                code::DATAPATH_FAILED,
                format!("wiring {} into the datapath failed", pod.ifname),
                crate::daemon::chain(&e),
            )
        })?;
        let result = build_result(v, pod, &iface, allocated, &state.router);
        record.result = Some(result.clone());
        if let Err(e) = self.records.put(&record) {
            if let Err(undo) = state
                .datapath
                .remove_pod(&pod.container_id, &pod.ifname)
                .await
            {
                warn!(error = %undo, "undo: unwiring after a failed record write");
            }
            return Err(error(
                v,
                code::IO_FAILURE,
                "cannot write the endpoint record",
                e.to_string(),
            ));
        }
        Ok(result)
    }

    /// Unwire an attachment, release its addresses and drop its record.
    pub(super) async fn forget(
        &self,
        state: &mut State,
        record: &EndpointRecord,
    ) -> Result<(), String> {
        state
            .datapath
            .remove_pod(&record.container_id, &record.ifname)
            .await
            .map_err(|e| crate::daemon::chain(&e))?;
        purge_endpoints(&mut state.datapath, &record.addrs)
            .map_err(|e| crate::daemon::chain(&e))?;
        self.release(state, &record_addrs(record));
        self.records
            .remove(&record.container_id, &record.ifname)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    pub(super) async fn del(&self, pod: &PodRequest) -> Response {
        let v = pod.cni_version.as_str();
        let record = match self.records.get(&pod.container_id, &pod.ifname) {
            Ok(r) => r,
            Err(e) => {
                return error(
                    v,
                    code::IO_FAILURE,
                    "cannot read the endpoint record",
                    e.to_string(),
                );
            }
        };
        let mut state = self.state.lock().await;
        if let Err(e) = state
            .datapath
            .remove_pod(&pod.container_id, &pod.ifname)
            .await
        {
            return error(
                v,
                code::DATAPATH_FAILED,
                "removing the pod's interface failed",
                crate::daemon::chain(&e),
            );
        }
        if let Some(record) = record {
            if let Err(e) = purge_endpoints(&mut state.datapath, &record.addrs) {
                return error(
                    v,
                    code::DATAPATH_FAILED,
                    "removing the pod's endpoints failed",
                    crate::daemon::chain(&e),
                );
            }
            self.release(&mut state, &record_addrs(&record));
            if let Err(e) = self.records.remove(&pod.container_id, &pod.ifname) {
                return error(
                    v,
                    code::IO_FAILURE,
                    "cannot remove the endpoint record",
                    e.to_string(),
                );
            }
            info!(container = %pod.container_id, owner = %record.owner, "DEL");
        }
        drop(state);
        self.request_write().await;
        Response::Done
    }

    pub(super) async fn check(&self, pod: &PodRequest) -> Response {
        let v = pod.cni_version.as_str();
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
        let mut state = self.state.lock().await;
        let endpoints = match state.datapath.list_endpoints() {
            Ok(e) => e,
            Err(e) => {
                return error(
                    v,
                    code::IO_FAILURE,
                    "cannot read the endpoints map",
                    crate::daemon::chain(&e),
                );
            }
        };
        let link = crate::datapath::netlink::link_index(&record.host_ifname)
            .await
            .ok()
            .flatten();
        let missing: Vec<String> = record
            .addrs
            .iter()
            .filter(|a| {
                !endpoints
                    .iter()
                    .any(|e| e.ip == a.ip && Some(e.ifindex) == link)
            })
            .map(|a| a.ip.to_string())
            .collect();
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
            Err(e) => error(v, code::NOT_AVAILABLE, "IPAM is not ready", e.to_string()),
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
                    e.to_string(),
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
            if let Response::Error(e) = self.del(&pod).await {
                return Response::Error(e);
            }
        }
        Response::Done
    }

    /// With Kubernetes, kubelet creates the Pod before it calls CNI, but this node's watch may
    /// not have delivered it yet: wait for it a little (as Cilium waits for its pod informer),
    /// so multi-pool selection sees its annotations and labels. Without it after the wait,
    /// selection answers as it would (the pod is not found).
    async fn wait_for_pod(&self, pod: &PodRequest) {
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
            let latest = Arc::clone(&snapshots.borrow());
            self.sync(latest).await;
        }
    }

    /// Allocate for `owner` and count the allocation (duration, addresses per pool).
    fn allocate(
        &self,
        state: &mut State,
        owner: &str,
        snapshot: &Snapshot,
        pools: &[CiliumPodIPPool],
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
    fn release(&self, state: &mut State, addrs: &[(IpAddr, String)]) {
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

    async fn request_write(&self) {
        let snapshot = Arc::clone(&self.state.lock().await.snapshot);
        self.sync(snapshot).await;
    }
}

/// The (address, pool) pairs of a record.
fn record_addrs(record: &EndpointRecord) -> Vec<(IpAddr, String)> {
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

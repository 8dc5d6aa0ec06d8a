//! CNI ADD as the agent performs it, one attachment at a time but many side by side. Under
//! the attachment's own lock: a repeated ADD gets the recorded answer (`repeat.rs`); otherwise
//! reserve the addresses (a short section of the state lock) and record the intent, wire the
//! veth pair over netlink with no agent lock held, program the eBPF maps and attachment (a
//! short section again), record the result and answer. The CiliumNode write-back is only
//! requested: the daemon loop coalesces it. A failed step undoes the ones before it; an agent
//! killed at any point finds the intent record at start-up and undoes the attachment.

use std::{
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use agent_common::identity;
use tracing::{info, info_span, warn};

use super::{
    Daemon, EndpointRecord, RecordAddr, State, chain,
    ops::{allocation_failed, error},
    result::{build_result, no_snat_flags, owner_of},
};
use crate::{
    cni::{
        proto::{PodRequest, Response},
        types::{CniResult, code},
    },
    datapath::{
        Datapath, DatapathError, PodSpec, PoolIdPerFamily, delete_veth_quietly, host_ifname,
        netlink::{NetlinkError, PodIface},
        netns::{self, NetNsError},
    },
    ipam::{cloud::PodRouting, input::PoolInput, manager::Allocated, sanity::address_clash},
    metrics::cni::Phase,
};

/// What an ADD reserved under the state lock: the addresses, their pools' ids and the
/// gateways to wire.
struct Reserved {
    owner: String,
    allocated: Vec<Allocated>,
    pool_id: PoolIdPerFamily,
    router: Vec<IpAddr>,
    /// Where each address's traffic leaves the node (cloud modes).
    routing: Vec<PodRouting>,
    /// Why an address has no routing metadata.
    routing_problem: Option<String>,
}

/// How long each step of one ADD took (logged with it, and observed per phase).
#[derive(Debug, Default)]
struct Phases(Vec<(Phase, Duration)>);

impl Phases {
    /// Run `step` as `phase`, timed and in its own span.
    async fn time<T>(&mut self, phase: Phase, step: impl Future<Output = T>) -> T {
        let span = info_span!("cni", phase = phase.as_str());
        let started = Instant::now();
        let out = tracing::Instrument::instrument(step, span).await;
        self.0.push((phase, started.elapsed()));
        out
    }

    fn summary(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(phase, took)| format!("{}={:.2}ms", phase.as_str(), took.as_secs_f64() * 1e3))
            .collect();
        parts.join(" ")
    }
}

impl Daemon {
    pub(super) async fn add(&self, pod: &PodRequest) -> Response {
        let _attachment = self.attachments.lock(&pod.container_id, &pod.ifname).await;
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
            Err(e) => return error(v, code::INVALID_ENV, "CNI_NETNS refused", chain(&e)),
        }
        // The DEL of the interface this one replaces in the same sandbox may still be deleting
        // its veth: wait for it.
        let _pod_iface = self
            .pod_ifaces
            .lock_pod_iface(&pod.netns, &pod.ifname)
            .await;
        self.wait_for_pod(pod).await;
        let mut phases = Phases::default();
        let reserved = match phases.time(Phase::Allocate, self.reserve(pod)).await {
            Ok(reserved) => reserved,
            Err(refused) => return refused,
        };
        match self.wire(pod, &reserved, &mut phases).await {
            Ok(result) => {
                self.sync_wanted.notify_one();
                self.endpoints_changed.notify_one();
                let ips: Vec<IpAddr> = reserved.allocated.iter().map(|a| a.ip).collect();
                info!(container = %pod.container_id, owner = %reserved.owner, ?ips, phases = %phases.summary(), "ADD");
                for (phase, took) in &phases.0 {
                    self.metrics.cni.phase(*phase, *took);
                }
                Response::Added(result)
            }
            Err(response) => {
                let addrs: Vec<_> = reserved
                    .allocated
                    .iter()
                    .map(|a| (a.ip, a.pool.clone()))
                    .collect();
                self.release(&mut *self.state.lock().await, &addrs);
                self.sync_wanted.notify_one();
                response
            }
        }
    }

    /// The short section of the state lock: refuse while IPAM or the restore is not ready,
    /// allocate, and refuse addresses inside the node's own networks.
    async fn reserve(&self, pod: &PodRequest) -> Result<Reserved, Response> {
        let v = pod.cni_version.as_str();
        let mut state = self.state.lock().await;
        if !state.unrestored.is_empty() || state.router.is_empty() {
            let why = state.ipam.ready().err().map_or_else(
                || "restoring the addresses of existing endpoints".to_owned(),
                |e| chain(&e),
            );
            return Err(error(
                v,
                code::TRY_AGAIN_LATER,
                "IPAM pool not ready yet",
                why,
            ));
        }
        let snapshot = Arc::clone(&state.snapshot);
        let pools = PoolInput::all(snapshot.pools.values());
        let owner = owner_of(pod, &snapshot).map_err(Response::Error)?;
        let allocated = match self.allocate(&mut state, &owner, &snapshot, &pools) {
            Ok(a) => a,
            Err(e) => {
                // The failed attempt left a pending allocation (multi-pool): write the demand
                // now, or a quiet node never asks for the block the pod waits for (Cilium
                // triggers the CiliumNode update on every attempt, failed or not).
                self.sync_wanted.notify_one();
                return Err(allocation_failed(v, &owner, &self.opts.node_name, &e));
            }
        };
        if let Some(refused) = self.refuse_clashes(&mut state, v, &owner, &allocated) {
            return Err(refused);
        }
        let (routing, routing_problem) = self.routing_of(&state, &owner, &allocated);
        let pool_id = state.pool_ids.for_addrs(
            allocated.iter().map(|a| (a.ip, a.pool.as_str())),
            &self.config.default_pool,
        );
        let pool_id = match pool_id {
            Ok(id) => id,
            Err(e) => {
                let addrs: Vec<_> = allocated.iter().map(|a| (a.ip, a.pool.clone())).collect();
                self.release(&mut state, &addrs);
                return Err(error(
                    v,
                    code::IO_FAILURE,
                    "cannot save the pool ids",
                    chain(&e),
                ));
            }
        };
        Ok(Reserved {
            owner,
            allocated,
            pool_id,
            router: state.router.clone(),
            routing,
            routing_problem,
        })
    }

    /// The routing metadata of each allocated address (cloud modes; empty otherwise), and why
    /// an address has none. A pod without it still gets its address (its traffic then leaves
    /// by the main table): the problem is logged and `weft-agent status` lists it.
    fn routing_of(
        &self,
        state: &State,
        owner: &str,
        allocated: &[Allocated],
    ) -> (Vec<PodRouting>, Option<String>) {
        let extra = super::cloud::extra_cidrs(&self.config);
        let mut out = Vec::new();
        let mut problem = None;
        for a in allocated {
            match state.ipam.pod_routing(a.ip, &extra) {
                Ok(routing) => out.extend(routing),
                Err(e) => {
                    warn!(pod = %owner, ip = %a.ip, error = %e, "the pod's traffic is not routed through its cloud interface");
                    problem = Some(e.to_string());
                }
            }
        }
        (out, problem)
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

    /// Record the intent, wire, program and record the result; on failure everything made
    /// here is undone (the caller releases the addresses).
    async fn wire(
        &self,
        pod: &PodRequest,
        reserved: &Reserved,
        phases: &mut Phases,
    ) -> Result<CniResult, Response> {
        let v = pod.cni_version.as_str();
        let allocated = &reserved.allocated;
        let addrs: Vec<IpAddr> = allocated.iter().map(|a| a.ip).collect();
        let spec = PodSpec {
            container_id: &pod.container_id,
            netns: &pod.netns,
            ifname: &pod.ifname,
            addrs: &addrs,
            gateway_v4: reserved.router.iter().find_map(|ip| match ip {
                IpAddr::V4(v4) => Some(*v4),
                IpAddr::V6(_) => None,
            }),
            gateway_v6: reserved.router.iter().find_map(|ip| match ip {
                IpAddr::V6(v6) => Some(*v6),
                IpAddr::V4(_) => None,
            }),
            identity: identity::INIT,
            pool_id: reserved.pool_id,
            flags: no_snat_flags(allocated.iter().map(|a| (a.ip, a.skip_masquerade))),
            mtu: self.pod_mtu(pod.mtu),
        };
        let mut record = EndpointRecord {
            container_id: pod.container_id.clone(),
            ifname: pod.ifname.clone(),
            netns: pod.netns.clone(),
            owner: reserved.owner.clone(),
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
            deleting: false,
            routing: reserved.routing.clone(),
            routing_problem: reserved.routing_problem.clone(),
        };
        let put = phases.time(Phase::Record, async { self.records.put(&record) });
        if let Err(e) = put.await {
            return Err(record_failed(v, &e));
        }
        let wired = phases.time(Phase::Wire, self.create_iface(&spec)).await;
        let iface = wired.map_err(|e| {
            let _ = self.records.remove(&pod.container_id, &pod.ifname);
            error(
                v,
                code::DATAPATH_FAILED,
                format!("wiring {} into the datapath failed", pod.ifname),
                chain(&e),
            )
        })?;
        let programmed = phases
            .time(Phase::Program, async {
                self.state.lock().await.datapath.program_pod(&spec, &iface)
            })
            .await;
        if let Err(e) = programmed {
            delete_veth_quietly(&record.host_ifname).await;
            let _ = self.records.remove(&pod.container_id, &pod.ifname);
            return Err(error(
                v,
                code::DATAPATH_FAILED,
                format!("wiring {} into the datapath failed", pod.ifname),
                chain(&e),
            ));
        }
        let routed = phases
            .time(
                Phase::Program,
                super::cloud::install(&self.config, &reserved.routing),
            )
            .await;
        if let Err(e) = routed {
            // As without metadata: the pod keeps its address, the problem is reported.
            self.unroute(&addrs).await;
            warn!(pod = %reserved.owner, error = %chain(&e), "the pod's traffic is not routed through its cloud interface");
            record.routing_problem = Some(chain(&e));
        }
        let result = build_result(v, pod, &iface, allocated, &reserved.router);
        record.result = Some(result.clone());
        let put = phases.time(Phase::Record, async { self.records.put(&record) });
        if let Err(e) = put.await {
            self.unroute(&addrs).await;
            self.unwire(&record.host_ifname, &addrs).await;
            // The intent must not outlive the release: a start-up would purge the addresses'
            // entries, by then perhaps another pod's.
            let _ = self.records.remove(&pod.container_id, &pod.ifname);
            return Err(record_failed(v, &e));
        }
        Ok(result)
    }

    /// The veth pair; a veth of the same name left by an earlier, interrupted attempt (no
    /// record of it survived) is removed first and the pair made again.
    async fn create_iface(&self, spec: &PodSpec<'_>) -> Result<PodIface, DatapathError> {
        match Datapath::create_pod_iface(spec).await {
            Err(DatapathError::Netlink { source, .. })
                if matches!(*source, NetlinkError::AlreadyExists { .. }) =>
            {
                let removed = self
                    .state
                    .lock()
                    .await
                    .datapath
                    .remove_pod(spec.container_id, spec.ifname)
                    .await;
                if let Err(e) = removed {
                    warn!(error = %chain(&e), "removing a stale interface");
                }
                Datapath::create_pod_iface(spec).await
            }
            other => other,
        }
    }

    /// Undo the source routing of a failed ADD (cloud modes).
    async fn unroute(&self, addrs: &[IpAddr]) {
        if super::cloud::routes_pods(self.config.ipam)
            && let Err(undo) = super::cloud::remove(addrs).await
        {
            warn!(error = %chain(&undo), "undo: removing the pod's source routing");
        }
    }

    /// Undo a programmed attachment whose result could not be recorded.
    async fn unwire(&self, host: &str, addrs: &[IpAddr]) {
        let unprogrammed = self.state.lock().await.datapath.unprogram_pod(host, addrs);
        if let Err(undo) = unprogrammed {
            warn!(error = %chain(&undo), "undo: unprogramming after a failed record write");
        }
        delete_veth_quietly(host).await;
    }
}

/// The answer when an endpoint record cannot be written (the cause, ENOSPC say, included).
fn record_failed(v: &str, e: &super::RecordError) -> Response {
    error(
        v,
        code::IO_FAILURE,
        "cannot write the endpoint record",
        chain(e),
    )
}

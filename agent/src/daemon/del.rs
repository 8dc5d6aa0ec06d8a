//! CNI DEL as the agent performs it: idempotent, also after the sandbox is gone. Under the
//! attachment's lock it removes the pod's map entries and attachment (a short section of the
//! state lock) and marks the record `deleting`. When the sandbox is already gone (containerd
//! deletes it before DEL), its veth went with it and DEL finishes before it answers, as a
//! replayed queued DEL does. Otherwise it answers, and the rest, most of such a DEL's time
//! (the kernel deleting the veth pair), finishes in the background with the attachment's lock
//! still held: the veth, then the record, then the addresses go back to IPAM. In that order an
//! agent stopped half-way never hands out an address twice: a marked record is finished at the
//! next start (its addresses are not restored), and a finish that failed is retried on the tick.

use std::{net::IpAddr, time::Instant};

use tokio::{
    sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel},
    task::JoinSet,
};
use tracing::{info, warn};

use super::{
    Daemon, EndpointRecord, RecordError,
    attachment_lock::AttachmentGuard,
    chain,
    ops::{error, record_addrs},
};
use crate::{
    cni::{
        proto::{PodRequest, Response},
        types::code,
    },
    datapath::{Datapath, DatapathError},
    faults,
};

/// Why an attachment could not be undone.
#[derive(Debug, thiserror::Error)]
pub(super) enum ForgetError {
    /// A map, the attachment or the veth could not be removed.
    #[error("removing the pod's interface and datapath entries failed")]
    Datapath(#[from] DatapathError),
    /// The endpoint record could not be written or removed.
    #[error("cannot update the endpoint record")]
    Record(#[from] RecordError),
    /// A test injected a failure (`WEFT_TEST_FAULTS`).
    #[error("finishing the DEL")]
    Injected(#[source] faults::Injected),
    /// The pod's source-routing rules (cloud modes) could not be removed.
    #[error("removing the pod's source routing failed")]
    Routing(#[source] crate::datapath::netlink::NetlinkError),
}

/// A DEL answered and not yet finished: its record (marked), its attachment's lock and the
/// lock of its pod interface (none when its namespace is gone).
#[derive(Debug)]
pub(super) struct Unfinished {
    record: EndpointRecord,
    _attachment: AttachmentGuard,
    _pod_iface: Option<AttachmentGuard>,
}

/// The hand-over from the DELs to the task that finishes them.
#[derive(Debug)]
pub(crate) struct Finisher {
    tx: UnboundedSender<Unfinished>,
    rx: std::sync::Mutex<Option<UnboundedReceiver<Unfinished>>>,
}

impl Default for Finisher {
    fn default() -> Self {
        let (tx, rx) = unbounded_channel();
        Self {
            tx,
            rx: std::sync::Mutex::new(Some(rx)),
        }
    }
}

/// Finish the DELs handed over, side by side, for as long as the daemon runs. (At shutdown the
/// unfinished ones stay marked; the next start finishes them.)
pub(super) async fn finish_deletes(daemon: std::sync::Arc<Daemon>) {
    let taken = daemon
        .finisher
        .rx
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let Some(mut rx) = taken else {
        return;
    };
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            next = rx.recv() => {
                let Some(unfinished) = next else { break };
                let daemon = std::sync::Arc::clone(&daemon);
                running.spawn(async move { daemon.finish(unfinished).await });
            }
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
}

/// When a DEL of a live sandbox finishes deleting its veth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Finish {
    /// After it answered (a runtime's DEL: its latency is the pod's teardown).
    InBackground,
    /// Before it answers (a replayed queued DEL: done before the agent is ready).
    BeforeAnswer,
}

impl Daemon {
    pub(super) async fn del(&self, pod: &PodRequest, when: Finish) -> Response {
        let attachment = self.attachments.lock(&pod.container_id, &pod.ifname).await;
        let v = pod.cni_version.as_str();
        let record = match self.records.get(&pod.container_id, &pod.ifname) {
            Ok(r) => r,
            Err(e) => {
                return error(
                    v,
                    code::IO_FAILURE,
                    "cannot read the endpoint record",
                    chain(&e),
                );
            }
        };
        let Some(mut record) = record else {
            // Unknown to weft: a veth of that name may still be left by an ADD whose record
            // never got written; otherwise nothing to do.
            let removed = self
                .state
                .lock()
                .await
                .datapath
                .remove_pod(&pod.container_id, &pod.ifname)
                .await;
            return match removed {
                Ok(_) => Response::Done,
                Err(e) => error(
                    v,
                    code::DATAPATH_FAILED,
                    "removing the pod's interface failed",
                    chain(&e),
                ),
            };
        };
        match self.unwire_and_mark(&mut record).await {
            Ok(()) => {}
            Err(
                e @ (ForgetError::Datapath(_) | ForgetError::Injected(_) | ForgetError::Routing(_)),
            ) => {
                return error(v, code::DATAPATH_FAILED, e.to_string(), chain(&e));
            }
            Err(e @ ForgetError::Record(_)) => {
                return error(v, code::IO_FAILURE, e.to_string(), chain(&e));
            }
        }
        info!(container = %pod.container_id, owner = %record.owner, "DEL");
        self.endpoints_changed.notify_one();
        let pod_iface = self
            .pod_ifaces
            .lock_pod_iface(&record.netns, &record.ifname)
            .await;
        let live = pod_iface.is_some();
        let unfinished = Unfinished {
            record,
            _attachment: attachment,
            _pod_iface: pod_iface,
        };
        if live && when == Finish::InBackground {
            self.hand_over(unfinished).await;
        } else {
            // The sandbox went first (containerd's order), and its veth with it: nothing slow
            // is left. Or a replayed DEL, which no runtime waits for.
            self.finish(unfinished).await;
        }
        Response::Done
    }

    /// Undo an attachment completely before returning (a repeated ADD replacing one of another
    /// sandbox): unwire, then finish.
    pub(super) async fn forget(&self, record: &EndpointRecord) -> Result<(), ForgetError> {
        let mut record = record.clone();
        self.unwire_and_mark(&mut record).await?;
        self.finish_record(&record).await
    }

    /// The answered half of a DEL: the pod's map entries and attachment by key under the
    /// state lock, then the record marked `deleting` (a pod no longer: no result to replay,
    /// no CiliumEndpoint, nothing to restore).
    async fn unwire_and_mark(&self, record: &mut EndpointRecord) -> Result<(), ForgetError> {
        let addrs: Vec<_> = record.addrs.iter().map(|a| a.ip).collect();
        self.state
            .lock()
            .await
            .datapath
            .unprogram_pod(&record.host_ifname, &addrs)?;
        if !record.deleting {
            record.deleting = true;
            record.result = None;
            self.records.put(record)?;
        }
        Ok(())
    }

    /// Pass an answered DEL to the finishing task (or finish it here if that task is gone).
    async fn hand_over(&self, unfinished: Unfinished) {
        if let Err(returned) = self.finisher.tx.send(unfinished) {
            self.finish(returned.0).await;
        }
    }

    async fn finish(&self, unfinished: Unfinished) {
        let started = Instant::now();
        let record = &unfinished.record;
        let finished = match faults::hit_async(faults::Point::Finish).await {
            Ok(()) => self.finish_record(record).await,
            Err(injected) => Err(ForgetError::Injected(injected)),
        };
        match finished {
            Ok(()) => {
                info!(container = %record.container_id, took_ms = started.elapsed().as_millis(), "DEL finished");
            }
            Err(e) => {
                warn!(container = %record.container_id, error = %chain(&e), "finishing a DEL failed; its record stays marked and is retried on the next tick");
            }
        }
    }

    /// The background half of a DEL: the veth, the record, the addresses, in that order (an
    /// address goes back to IPAM only once no record names it).
    async fn finish_record(&self, record: &EndpointRecord) -> Result<(), ForgetError> {
        if super::cloud::routes_pods(self.config.ipam) {
            let ips: Vec<IpAddr> = record.addrs.iter().map(|a| a.ip).collect();
            super::cloud::remove(&ips)
                .await
                .map_err(ForgetError::Routing)?;
        }
        Datapath::delete_pod_iface(&record.host_ifname).await?;
        self.records.remove(&record.container_id, &record.ifname)?;
        self.release(&mut *self.state.lock().await, &record_addrs(record));
        self.sync_wanted.notify_one();
        Ok(())
    }

    /// Finish the DELs whose records are still marked (a finish that failed); run on the tick.
    pub(super) async fn retry_finishes(&self) {
        let Ok((records, _)) = self.records.all() else {
            return;
        };
        for marked in records.into_iter().filter(|r| r.deleting) {
            let attachment = self
                .attachments
                .lock(&marked.container_id, &marked.ifname)
                .await;
            // Finished meanwhile, or taken over by a DEL: read it again under the lock.
            if let Ok(Some(record)) = self.records.get(&marked.container_id, &marked.ifname)
                && record.deleting
            {
                let pod_iface = self
                    .pod_ifaces
                    .lock_pod_iface(&record.netns, &record.ifname)
                    .await;
                self.finish(Unfinished {
                    record,
                    _attachment: attachment,
                    _pod_iface: pod_iface,
                })
                .await;
            }
        }
    }
}

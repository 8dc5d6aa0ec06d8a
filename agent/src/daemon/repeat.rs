//! What a record of the same attachment means for an ADD: a repeat of a wired attachment gets
//! its recorded answer once its datapath is as ADD left it (bpffs may have lost its link or map
//! entries since: the record rebuilds them); an ADD of it in another sandbox while the first
//! lives is refused, naming both; an interrupted ADD, an unfinished DEL, or an attachment whose
//! sandbox is gone, is undone so the ADD starts afresh.

use std::{os::unix::fs::MetadataExt as _, path::Path};

use super::{Daemon, EndpointRecord, ops::error};
use crate::{
    cni::{
        proto::{PodRequest, Response},
        types::code,
    },
    datapath::netns,
};

impl Daemon {
    /// What a record of the same attachment means for an ADD: `Some` answer ends it (a repeat
    /// of a wired attachment, or a refusal); `None` goes on with a fresh ADD (an interrupted or
    /// stale attachment has then been undone).
    pub(super) async fn earlier_attachment(&self, pod: &PodRequest) -> Option<Response> {
        let v = pod.cni_version.as_str();
        match self.records.get(&pod.container_id, &pod.ifname) {
            Ok(Some(EndpointRecord {
                result: Some(mut result),
                netns,
                host_ifname,
                ..
            })) if netns == pod.netns && link_alive(&host_ifname).await => {
                // Idempotent: the same attachment gets the same answer, once its datapath is
                // as ADD left it (bpffs may have lost its link or its map entries since).
                if let Some(refused) = self.repair(v, &pod.container_id, &pod.ifname).await {
                    return Some(refused);
                }
                v.clone_into(&mut result.cni_version);
                return Some(Response::Added(result));
            }
            Ok(Some(earlier))
                if !earlier.deleting && another_live_sandbox(&earlier.netns, &pod.netns) =>
            {
                // Another sandbox still holds this attachment: replacing it would tear down a
                // live pod's network. Only a gone sandbox may be replaced.
                return Some(error(
                    v,
                    code::INVALID_ENV,
                    format!(
                        "{}/{} is wired in network namespace {}, which still exists; refusing \
                         to wire it again in {}",
                        pod.container_id,
                        pod.ifname,
                        earlier.netns.display(),
                        pod.netns.display()
                    ),
                    "DEL the attachment from its first sandbox, or use another container id",
                ));
            }
            Ok(Some(earlier)) => {
                // An earlier ADD died half-way (agent killed), or the sandbox it wired is gone
                // without a DEL (containerd's `ctr run -d` never sends one) and the same
                // container id comes back in a new one: undo it, then start afresh.
                if let Err(e) = self.forget(&earlier).await {
                    return Some(error(
                        v,
                        code::DATAPATH_FAILED,
                        "cleaning up an interrupted or stale ADD failed",
                        crate::daemon::chain(&e),
                    ));
                }
            }
            Ok(None) => {}
            Err(e) => {
                return Some(error(
                    v,
                    code::IO_FAILURE,
                    "cannot read the endpoint record",
                    e.to_string(),
                ));
            }
        }
        None
    }

    /// Rebuild the datapath of a recorded attachment (a repeated ADD); `Some` refusal when the
    /// record cannot be read again or the datapath refuses.
    async fn repair(&self, v: &str, container_id: &str, ifname: &str) -> Option<Response> {
        let mut state = self.state.lock().await;
        // Read under the lock: a DEL may have removed the record since.
        let record = match self.records.get(container_id, ifname) {
            Ok(Some(record)) => record,
            Ok(None) => {
                return Some(error(
                    v,
                    code::TRY_AGAIN_LATER,
                    format!("{container_id}/{ifname} was deleted while it was added again"),
                    "ADD it again",
                ));
            }
            Err(e) => {
                return Some(error(
                    v,
                    code::IO_FAILURE,
                    "cannot read the endpoint record",
                    crate::daemon::chain(&e),
                ));
            }
        };
        let state = &mut *state;
        let rewired = super::rewire::rewire(
            &mut state.datapath,
            &mut state.pool_ids,
            &record,
            &self.config.default_pool,
        )
        .await;
        match rewired {
            Ok(_) => None,
            Err(e) => Some(error(
                v,
                code::DATAPATH_FAILED,
                "repairing the attachment's datapath failed",
                crate::daemon::chain(&e),
            )),
        }
    }
}

/// Whether `recorded` is a live network namespace other than `requested` (a sandbox that still
/// exists; two paths of one namespace are one sandbox).
fn another_live_sandbox(recorded: &Path, requested: &Path) -> bool {
    let id = |path: &Path| std::fs::metadata(path).map(|m| (m.dev(), m.ino())).ok();
    recorded != requested
        && netns::check_pod_netns(recorded).is_ok()
        && id(recorded) != id(requested)
}

/// Whether host interface `name` exists; only a definite "no such link" counts as gone.
async fn link_alive(name: &str) -> bool {
    !matches!(crate::datapath::netlink::link_index(name).await, Ok(None))
}

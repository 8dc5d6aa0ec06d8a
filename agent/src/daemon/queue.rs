//! The DELs `weft-cni` queued on disk while the agent was down: replayed at start-up. Must not
//! touch anything but the queue directory and the daemon's DEL operation.

use tracing::{info, warn};

use super::Daemon;
use crate::cni::proto::Request;

/// Replay DELs `weft-cni` queued while the agent was down, then remove them.
pub(super) async fn replay_deletes(daemon: &Daemon) {
    let Ok(entries) = std::fs::read_dir(&daemon.opts.delete_queue) else {
        return;
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files {
        let request = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Request>(&b).ok());
        if let Some(Request::Del(pod)) = request {
            info!(container = %pod.container_id, "replaying queued DEL");
            let _ = daemon.del(&pod).await;
        } else {
            warn!(path = %path.display(), "ignoring an unreadable queued DEL");
        }
        if let Err(error) = std::fs::remove_file(&path) {
            warn!(%error, path = %path.display(), "removing a replayed DEL");
        }
    }
}

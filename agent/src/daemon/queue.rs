//! The DELs `weft-cni` queued on disk while the agent was down: replayed at start-up and on
//! every tick of the sync loop. A DEL whose replay fails stays queued and is tried again; one
//! that cannot be read is set aside (`.unreadable`) with a warning. Must not touch anything but
//! the queue directory and the daemon's DEL operation.

use tracing::{info, warn};

use super::Daemon;
use crate::cni::proto::{Request, Response};

/// Replay every queued DEL; remove those that succeeded.
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
        let Some(Request::Del(pod)) = request else {
            let aside = path.with_extension("json.unreadable");
            warn!(path = %path.display(), aside = %aside.display(), "setting aside an unreadable queued DEL; DEL that pod by hand if it still holds an address");
            if let Err(error) = std::fs::rename(&path, &aside) {
                warn!(%error, path = %path.display(), "setting aside an unreadable queued DEL");
            }
            continue;
        };
        info!(container = %pod.container_id, "replaying queued DEL");
        if let Response::Error(error) = daemon.del(&pod, super::del::Finish::BeforeAnswer).await {
            warn!(container = %pod.container_id, path = %path.display(), error = %error.msg, details = %error.details, "replaying a queued DEL failed; it stays queued and is retried");
            continue;
        }
        if let Err(error) = std::fs::remove_file(&path) {
            warn!(%error, path = %path.display(), "removing a replayed DEL");
        }
    }
}

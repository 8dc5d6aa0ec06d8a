//! Notice edits of the ip-masq-agent file: inotify on its directory (a mounted ConfigMap
//! replaces files by swapping a `..data` symlink, so the file itself cannot be watched).

use std::{path::Path, sync::Arc, time::Duration};

use futures::StreamExt as _;
use inotify::{Inotify, WatchMask};
use tokio::sync::Notify;
use tracing::warn;

use super::MasqError;

/// Watch the directory holding `file`; the returned `Notify` fires (coalesced) after changes.
/// Must be called inside a tokio runtime.
///
/// # Errors
/// The directory does not exist or inotify cannot watch it.
pub fn watch_file(file: &Path) -> Result<Arc<Notify>, MasqError> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let watch_error = |source| MasqError::Watch {
        path: dir.clone(),
        source,
    };
    let inotify = Inotify::init().map_err(watch_error)?;
    let mask = WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::MOVED_TO
        | WatchMask::MOVED_FROM;
    inotify.watches().add(&dir, mask).map_err(watch_error)?;
    let mut stream = inotify
        .into_event_stream(vec![0u8; 4096])
        .map_err(watch_error)?;
    let notify = Arc::new(Notify::new());
    let tx = Arc::clone(&notify);
    tokio::spawn(async move {
        while stream.next().await.is_some() {
            // Let a burst (write + rename, symlink swap) settle, then report once.
            tokio::time::sleep(Duration::from_millis(50)).await;
            while let Some(Some(_)) = futures::FutureExt::now_or_never(stream.next()) {}
            tx.notify_one();
        }
        warn!(dir = %dir.display(), "stopped watching the ip-masq-agent configuration");
    });
    Ok(notify)
}

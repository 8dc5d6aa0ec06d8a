//! One lock per CNI attachment (container id, ifname): a repeated, concurrent or overlapping
//! ADD, DEL or CHECK of the same attachment runs one at a time, while different attachments
//! run side by side (they share only the short IPAM and datapath sections of the state lock).
//! The same table type, keyed by (network namespace, ifname), makes an ADD of an interface wait
//! for the unfinished DEL of the one it replaces in that namespace (`del.rs`). An entry lives
//! while someone holds or waits for it, so the table stays as small as the number of
//! operations in flight.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use tokio::sync::OwnedMutexGuard;

type Key = (String, String);

/// The table of attachment locks.
#[derive(Debug, Default)]
pub(crate) struct AttachmentLocks {
    table: Arc<Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>>,
}

/// Held while one operation works on an attachment; dropping it lets the next one in.
#[derive(Debug)]
pub(crate) struct AttachmentGuard {
    key: Key,
    table: Arc<Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl AttachmentLocks {
    /// Wait until no other operation works on (`container_id`, `ifname`), then hold it.
    pub(crate) async fn lock(&self, container_id: &str, ifname: &str) -> AttachmentGuard {
        let key = (container_id.to_owned(), ifname.to_owned());
        let entry = {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(table.entry(key.clone()).or_default())
        };
        let guard = entry.lock_owned().await;
        AttachmentGuard {
            key,
            table: Arc::clone(&self.table),
            guard: Some(guard),
        }
    }

    /// Attachments locked or waited for right now.
    /// The lock of interface `ifname` in the network namespace at `netns` (by its identity, so
    /// two paths to one namespace are one key); `None` when `netns` cannot be read.
    pub(crate) async fn lock_pod_iface(
        &self,
        netns: &std::path::Path,
        ifname: &str,
    ) -> Option<AttachmentGuard> {
        use std::os::unix::fs::MetadataExt as _;
        let id = std::fs::metadata(netns).ok()?;
        Some(
            self.lock(&format!("{}:{}", id.dev(), id.ino()), ifname)
                .await,
        )
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for AttachmentGuard {
    fn drop(&mut self) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        self.guard = None;
        // Every holder and waiter took its clone under the table lock: the table's own is the
        // last one left exactly when no one else holds or waits.
        if table
            .get(&self.key)
            .is_some_and(|entry| Arc::strong_count(entry) == 1)
        {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::AttachmentLocks;

    #[tokio::test]
    async fn one_operation_per_attachment_and_others_run_beside_it() {
        let locks = Arc::new(AttachmentLocks::default());
        let held = locks.lock("c1", "eth0").await;
        // Another attachment of the same container, and the same ifname of another one, are
        // free.
        drop(locks.lock("c1", "net1").await);
        drop(locks.lock("c2", "eth0").await);
        let waiter = tokio::spawn({
            let locks = Arc::clone(&locks);
            async move { drop(locks.lock("c1", "eth0").await) }
        });
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "a second lock of c1/eth0 went through"
        );
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter got the lock once it was released")
            .expect("waiter task");
        assert_eq!(locks.len(), 0, "entries outlive their operations");
    }
}

//! 4. Debounce and only-when-changed.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;

// ---------------------------------------------------------------------------------------------
// 4. Debounce and only-when-changed.

/// Counts the store's atomic replacements (renames onto `name`) in `dir`.
pub(crate) struct RenameCounter {
    pub(crate) inotify: Inotify,
    pub(crate) name: String,
    pub(crate) count: usize,
}

impl RenameCounter {
    pub(crate) fn new(dir: &Path, name: &str) -> Self {
        let inotify = Inotify::init().unwrap_or_else(|e| panic!("inotify: {e}"));
        inotify
            .watches()
            .add(dir, WatchMask::MOVED_TO)
            .unwrap_or_else(|e| panic!("watch {}: {e}", dir.display()));
        Self {
            inotify,
            name: name.to_owned(),
            count: 0,
        }
    }

    /// Renames onto the file so far.
    pub(crate) fn count(&mut self) -> usize {
        let mut buffer = [0u8; 4096];
        loop {
            match self.inotify.read_events(&mut buffer) {
                Ok(events) => {
                    self.count += events
                        .filter(|e| e.name.is_some_and(|n| n == self.name.as_str()))
                        .count();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return self.count,
                Err(e) => panic!("reading inotify events: {e}"),
            }
        }
    }

    /// Wait until `n` renames happened.
    pub(crate) async fn wait_for(&mut self, n: usize, what: &str) {
        eventually(what, || (self.count() >= n).then_some(())).await;
    }
}

/// What identifies one version of a file on disk.
pub(crate) fn stamp(path: &Path) -> (SystemTime, u64, Vec<u8>) {
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    let modified = meta.modified().expect("mtime is supported");
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    (modified, meta.ino(), bytes)
}

pub(crate) fn used_in(path: &Path) -> Value {
    read(path)["status"]["ipam"]["used"].clone()
}

#[test]
pub(crate) fn writes_are_debounced_coalesced_and_only_when_changed() {
    let scratch = Scratch::new();
    let path = scratch.put("ciliumnodes/node1.yaml", CRD_MODE_NODE);
    let mut renames = RenameCounter::new(&scratch.path("ciliumnodes"), "node1.yaml");
    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(DEBOUNCE);
        let asked = Instant::now();
        store.write_node(used_write(&[("10.0.0.5", "default/a")]), "");
        renames.wait_for(1, "the first write").await;
        assert_eq!(
            used_in(&path),
            json!({"10.0.0.5": {"owner": "default/a", "resource": "eni-1"}}),
            "the first write"
        );

        // Three rapid writes inside the debounce interval: one more file write, merged.
        store.write_node(used_write(&[("10.0.0.6", "default/b")]), "");
        store.write_node(release_write("10.0.0.7", ReleaseState::DoNotRelease), "");
        store.write_node(used_write(&[("10.0.0.6", "default/d")]), "");
        renames.wait_for(2, "the debounced second write").await;
        let waited = asked.elapsed();
        assert!(
            waited >= DEBOUNCE,
            "the second write came {waited:?} after the first was asked for, before the \
             {DEBOUNCE:?} debounce"
        );
        let doc = read(&path);
        assert_eq!(
            doc["status"]["ipam"]["used"],
            json!({"10.0.0.6": {"owner": "default/d", "resource": "eni-1"}}),
            "the last of the rapid writes wins"
        );
        assert_eq!(
            doc["status"]["ipam"]["release-ips"],
            json!({"10.0.0.7": "do-not-release"}),
            "the rapid writes merge"
        );
        // The next write to land is a later, different one: the rapid writes made one.
        store.write_node(used_write(&[("10.0.0.8", "default/e")]), "");
        renames.wait_for(3, "the write after the rapid ones").await;
        assert_eq!(
            used_in(&path)["10.0.0.8"]["owner"],
            "default/e",
            "a write of its own came between the rapid writes and the next one"
        );
        assert_eq!(renames.count(), 3, "three rapid writes make one file write");

        // The same content again does not touch the file, neither flushed...
        let before = stamp(&path);
        store.write_node(used_write(&[("10.0.0.8", "default/e")]), "");
        store.write_node(release_write("10.0.0.7", ReleaseState::DoNotRelease), "");
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {}", report(&e)));
        assert_eq!(renames.count(), 3, "an unchanged write replaced the file");
        assert!(
            stamp(&path) == before,
            "an unchanged write touched the file (mtime, inode or bytes changed)"
        );
        // ...nor debounced: a change sent two debounce intervals after an unchanged write is
        // the next file write (an unchanged write of its own would have landed before it).
        let unchanged = store.stats().unchanged.load(Ordering::Relaxed);
        store.write_node(used_write(&[("10.0.0.8", "default/e")]), "");
        eventually("the writer to take the unchanged write", || {
            (store.stats().unchanged.load(Ordering::Relaxed) > unchanged).then_some(())
        })
        .await;
        store.write_node(used_write(&[("10.0.0.9", "default/f")]), "");
        renames.wait_for(4, "the next change").await;
        assert_eq!(used_in(&path)["10.0.0.9"]["owner"], "default/f");
        assert_eq!(renames.count(), 4, "an unchanged write replaced the file");
    });
}

#[test]
pub(crate) fn first_write_is_prompt_and_flush_bypasses_the_debounce() {
    // A debounce the test waits out: the held write must land by itself, and not before it.
    const HELD: Duration = Duration::from_secs(1);
    let scratch = Scratch::new();
    let path = scratch.put("ciliumnodes/node1.yaml", CRD_MODE_NODE);
    let mut renames = RenameCounter::new(&scratch.path("ciliumnodes"), "node1.yaml");
    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(HELD);
        let asked = Instant::now();
        store.write_node(used_write(&[("10.0.0.5", "default/a")]), "");
        renames.wait_for(1, "the first write").await;
        let waited = asked.elapsed();
        assert!(
            waited < HELD / 2,
            "the first write waited {waited:?}, as if for the {HELD:?} debounce"
        );
        assert_eq!(used_in(&path)["10.0.0.5"]["owner"], "default/a");
        let first = stamp(&path).0;

        store.write_node(used_write(&[("10.0.0.5", "default/b")]), "");
        renames
            .wait_for(2, "the held second write, once the debounce passed")
            .await;
        let gap = stamp(&path).0.duration_since(first).unwrap_or_default();
        assert!(
            gap >= HELD / 2,
            "a second write went out {gap:?} after the first, within the {HELD:?} debounce"
        );
        assert_eq!(used_in(&path)["10.0.0.5"]["owner"], "default/b");

        // Just written, so inside the debounce again: flush writes at once.
        store.write_node(used_write(&[("10.0.0.5", "default/c")]), "");
        let flushing = Instant::now();
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {}", report(&e)));
        assert_eq!(renames.count(), 3, "flush wrote");
        let took = flushing.elapsed();
        assert!(took < HELD / 2, "flush waited {took:?} for the debounce");
        assert_eq!(used_in(&path)["10.0.0.5"]["owner"], "default/c");
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush with nothing pending: {}", report(&e)));
        assert_eq!(renames.count(), 3, "a flush with nothing pending wrote");
    });
}

//! 5. Corrupt documents.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;

// ---------------------------------------------------------------------------------------------
// 5. Corrupt documents.

pub(crate) const BAD_CIDR_FIELD: &str = "spec.ipam.pools.allocated[0].cidrs[0]";

pub(crate) fn multi_pool_with_cidr(cidr: &str) -> String {
    MULTI_POOL_NODE.replacen("10.200.0.0/27", cidr, 1)
}

/// A flush must refuse the unparsable own node and leave its bytes alone, and so must the
/// writer task (woken by the write just sent): its refusal is counted as a failure.
pub(crate) async fn assert_flush_refused(store: &EmbeddedStore, path: &Path, bytes: &[u8]) {
    let failures = || store.stats().failures.load(Ordering::Relaxed);
    let before = failures();
    match store.flush().await {
        Err(StoreError::Parse { path: at, source }) => {
            assert_eq!(at, path, "the refused document");
            let reason = source.to_string();
            assert!(
                reason.contains(BAD_CIDR_FIELD),
                "the reason {reason:?} does not name {BAD_CIDR_FIELD}"
            );
        }
        Err(other) => panic!("flush of a corrupt node failed, but not as Parse: {other}"),
        Ok(()) => panic!("flush of a corrupt node succeeded"),
    }
    eventually("the writer task refusing the corrupt node too", || {
        (failures() >= before + 2).then_some(())
    })
    .await;
    let now = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(now == bytes, "the corrupt document was overwritten");
}

#[test]
pub(crate) fn corrupt_node_is_reported_never_written_and_picked_up_when_fixed() {
    let scratch = Scratch::new();
    let path = scratch.put(
        "ciliumnodes/node1.yaml",
        &multi_pool_with_cidr("not-a-cidr"),
    );
    let bytes = fs::read(&path).expect("read node1.yaml");
    let pools = multi_pool_pools();
    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(DEBOUNCE);
        let mut rx = store.snapshots();
        let snap = rx.borrow_and_update().clone();
        let reason = snap
            .problems
            .get(&path)
            .unwrap_or_else(|| panic!("node1.yaml is not a problem: {}", summary(&snap)));
        assert!(
            reason.contains(BAD_CIDR_FIELD),
            "the problem {reason:?} does not name {BAD_CIDR_FIELD}"
        );
        assert!(
            snap.own_node().is_none(),
            "a never-good node is in the snapshot"
        );

        store.write_node(pools_write(&pools), "");
        assert_flush_refused(&store, &path, &bytes).await;

        // Fixed by hand: the watcher picks it up, and the kept write goes out on flush.
        scratch.put(
            "ciliumnodes/node1.yaml",
            &multi_pool_with_cidr("10.200.0.64/27"),
        );
        let snap = wait_snapshot(&mut rx, "the fixed node1.yaml", |s| {
            s.problems.is_empty() && s.own_node().is_some()
        })
        .await;
        let own = snap.own_node().expect("own node");
        assert_eq!(
            own.ipam_spec().pools().allocated[0].cidrs[0].to_string(),
            "10.200.0.64/27"
        );
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush after the fix: {}", report(&e)));
        assert_eq!(
            read(&path)["spec"]["ipam"]["pools"],
            pools,
            "the write kept while the node was corrupt"
        );
    });
}

#[test]
pub(crate) fn broken_document_keeps_its_last_good_version() {
    let scratch = Scratch::new();
    let node = scratch.put("ciliumnodes/node1.yaml", MULTI_POOL_NODE);
    let pod = scratch.put("pods/default/web.yaml", &pod_yaml("default", "web", "web"));
    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(DEBOUNCE);
        let mut rx = store.snapshots();
        let good = rx.borrow_and_update().clone();
        assert!(good.problems.is_empty(), "{}", summary(&good));
        let good_node = good.own_node().expect("own node").clone();

        scratch.put(
            "ciliumnodes/node1.yaml",
            &multi_pool_with_cidr("not-a-cidr"),
        );
        scratch.put("pods/default/web.yaml", "metadata: [unclosed\n");
        let snap = wait_snapshot(&mut rx, "both documents broken", |s| {
            s.problems.contains_key(&node) && s.problems.contains_key(&pod)
        })
        .await;
        assert!(
            snap.problems[&node].contains(BAD_CIDR_FIELD),
            "the problem {:?} does not name {BAD_CIDR_FIELD}",
            snap.problems[&node]
        );
        assert_eq!(
            snap.own_node(),
            Some(&good_node),
            "the broken own node keeps its last good version"
        );
        let web = snap
            .pods
            .get(&nsname("default", "web"))
            .unwrap_or_else(|| panic!("the broken pod was dropped: {}", summary(&snap)));
        assert_eq!(web.metadata.labels["app"], "web", "last good pod");

        // Still never overwritten.
        let bytes = fs::read(&node).expect("read node1.yaml");
        store.write_node(pools_write(&multi_pool_pools()), "");
        assert_flush_refused(&store, &node, &bytes).await;

        // Deleted: the last good version goes too.
        fs::remove_file(&pod).expect("remove the broken pod");
        wait_snapshot(&mut rx, "the deleted broken pod gone", |s| {
            !s.problems.contains_key(&pod) && !s.pods.contains_key(&nsname("default", "web"))
        })
        .await;
    });
}

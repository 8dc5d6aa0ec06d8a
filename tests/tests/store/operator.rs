//! 8. The in-process operator.
//!
//! On the store it answers `requested` at once; the agent's `spec.ipam.pools` computed from an
//! older read is held back instead of taking the operator's block away; a write from the newest
//! read goes through, and the two settle.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;
use weft_agent::store::embedded::operator::{InProcessOperator, OperatorConfig};

// ---------------------------------------------------------------------------------------------
// 8. The in-process operator.

pub(crate) const SMALL_POOL: &str = "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  \
                                     name: small\nspec:\n  ipv4:\n    cidrs: [10.220.0.0/24]\n    \
                                     maskSize: 28\n";

/// node1 asking for 20 addresses of pool `small`, holding nothing yet, with fields the
/// operator does not own.
pub(crate) const ASKING_NODE: &str = "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  \
                                      name: node1\n  labels: {team: blue}\nspec:\n  futureSpec: 1\n  \
                                      ipam:\n    pools:\n      requested:\n      - pool: small\n        \
                                      needed:\n          ipv4-addrs: 20\n";

pub(crate) fn allocated_in(path: &Path) -> Value {
    read(path)["spec"]["ipam"]["pools"]["allocated"].clone()
}

pub(crate) fn small(cidrs: &[&str]) -> Value {
    json!([{"pool": "small", "cidrs": cidrs}])
}

/// Whether a read shows the own node holding `blocks` blocks of its first pool.
pub(crate) fn holds_blocks(blocks: usize) -> impl Fn(&Snapshot) -> bool {
    move |s| {
        s.own_node().is_some_and(|n| {
            n.ipam_spec()
                .pools()
                .allocated
                .first()
                .is_some_and(|a| a.cidrs.len() == blocks)
        })
    }
}

/// Wait (within [`PATIENCE`]) until the in-process operator has acted on a read that shows
/// `what`, its write (if any) done.
pub(crate) async fn wait_operated(
    store: &EmbeddedStore,
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    what: &str,
    want: impl Fn(&Snapshot) -> bool,
) {
    let read = wait_snapshot(rx, what, want).await;
    let mut operated = store.operated();
    tokio::time::timeout(PATIENCE, operated.wait_for(|r| *r >= read.revision))
        .await
        .unwrap_or_else(|_| panic!("the operator did not act on {what} in {PATIENCE:?}"))
        .unwrap_or_else(|_| panic!("the store stopped"));
}

#[test]
pub(crate) fn the_operator_and_the_agent_never_take_each_others_part_of_spec_ipam_pools() {
    let scratch = Scratch::new();
    let path = scratch.put("ciliumnodes/node1.yaml", ASKING_NODE);
    scratch.put("ciliumpodippools/small.yaml", SMALL_POOL);
    let mut renames = RenameCounter::new(&scratch.path("ciliumnodes"), "node1.yaml");
    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(Duration::ZERO);
        let mut rx = store.snapshots();
        let first = rx.borrow_and_update().clone();
        let operator = OperatorConfig::MultiPool {
            ipv4: true,
            ipv6: false,
        };
        store.start_operator(
            InProcessOperator::new(&operator, "node1")
                .unwrap_or_else(|e| panic!("operator: {}", report(&e))),
        );
        let two = small(&["10.220.0.0/28", "10.220.0.16/28"]);
        assert_eq!(
            allocated_in(&path),
            two,
            "20 addresses at 14 per block: two blocks, at once"
        );
        let doc = read(&path);
        assert_eq!(doc["metadata"]["labels"]["team"], "blue");
        assert_eq!(doc["spec"]["futureSpec"], 1);

        // The agent, still on the first read, writes `requested` and the nothing it held then.
        let stale =
            pools_write(&json!({"requested": [{"pool": "small", "needed": {"ipv4-addrs": 21}}]}));
        store.write_node(stale, &first.write_base());
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {}", report(&e)));
        assert_eq!(
            allocated_in(&path),
            two,
            "a pools part computed before the operator's blocks must not remove them"
        );
        assert_eq!(
            read(&path)["spec"]["ipam"]["pools"]["requested"][0]["needed"]["ipv4-addrs"],
            20,
            "the stale part is held back whole; the agent recomputes from the newer read"
        );

        // From the read that shows both blocks, the agent releases the second one.
        let seen = wait_snapshot(&mut rx, "both blocks", holds_blocks(2)).await;
        let release = pools_write(&json!({
            "requested": [{"pool": "small", "needed": {"ipv4-addrs": 5}}],
            "allocated": [{"pool": "small", "cidrs": ["10.220.0.0/28"]}],
        }));
        store.write_node(release, &seen.write_base());
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {}", report(&e)));
        let one = small(&["10.220.0.0/28"]);
        assert_eq!(allocated_in(&path), one, "the agent's release went through");

        // The operator reads it, takes the block back and has nothing to add: no more writes.
        let settled = renames.count();
        wait_operated(&store, &mut rx, "the release", holds_blocks(1)).await;
        assert_eq!(
            renames.count(),
            settled,
            "the two writers keep rewriting the node"
        );
        assert_eq!(allocated_in(&path), one);
        let doc = read(&path);
        assert!(
            doc["status"]["ipam"]["operator-status"]["error"].is_null(),
            "no error: {doc}"
        );

        // Asked for more again: the operator carves the released block again.
        let latest = rx.borrow_and_update().clone();
        let grow = pools_write(&json!({
            "requested": [{"pool": "small", "needed": {"ipv4-addrs": 15}}],
            "allocated": [{"pool": "small", "cidrs": ["10.220.0.0/28"]}],
        }));
        store.write_node(grow, &latest.write_base());
        store
            .flush()
            .await
            .unwrap_or_else(|e| panic!("flush: {}", report(&e)));
        eventually("a second block again", || {
            let allocated = allocated_in(&path);
            (allocated[0]["cidrs"].as_array().map(Vec::len) == Some(2)).then_some(())
        })
        .await;
    });
}

//! CiliumIdentity garbage collection (Cilium's CRD identity GC) with shortened intervals: pods
//! come and go as CiliumEndpoints; an identity no endpoint uses is marked
//! (`io.cilium.heartbeat`) and then deleted; one in use stays; one whose endpoint comes back
//! before the heartbeat timeout stays. "Stays" is checked after the collector has observably
//! run many times more (its `identity_gc_runs` gauge), long enough for an unused one to go.

use std::time::Duration;

use serde_json::{Value, json};
use weft_tests::operator::Operator;

use super::{Cluster, wait_for};

/// The run counter the collector publishes.
const RUNS: &str = "weft_operator_identity_gc_runs{outcome=\"success\"}";
/// Long enough for many runs of one second.
const DEADLINE: Duration = Duration::from_mins(1);

fn identity(cluster: &Cluster, id: u32, app: &str) {
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumIdentity",
        "metadata": {"name": id.to_string(), "labels": {"app": app}},
        "security-labels": {"k8s:app": app, "k8s:io.kubernetes.pod.namespace": "web"},
    }));
}

/// A pod's CiliumEndpoint using identity `id`, as an agent publishes it.
fn endpoint(cluster: &Cluster, pod: &str, id: u32) {
    cluster.emu.put(json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumEndpoint",
        "metadata": {"name": pod, "namespace": "web"},
        "status": {"id": 1, "identity": {"id": id, "labels": []}, "state": "ready",
                   "networking": {"addressing": [{"ipv4": "10.1.0.5"}], "node": "192.0.2.1"}},
    }));
}

fn pod_gone(cluster: &Cluster, pod: &str) {
    cluster
        .emu
        .remove("ciliumendpoints", Some("web"), pod)
        .expect("the endpoint was there");
}

fn get(cluster: &Cluster, id: u32) -> Option<Value> {
    cluster.emu.get("ciliumidentities", None, &id.to_string())
}

fn runs(op: &Operator) -> u64 {
    // A gauge of whole runs.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a small whole count"
    )]
    op.metric(RUNS).map_or(0, |v| v as u64)
}

/// Wait until the collector has run `more` times after now.
fn wait_runs(op: &Operator, more: u64) {
    let from = runs(op);
    wait_for(&format!("{more} more identity GC runs"), DEADLINE, || {
        let now = runs(op);
        (now >= from + more)
            .then_some(())
            .ok_or_else(|| format!("{now} runs"))
    });
}

fn wait_gone(cluster: &Cluster, id: u32) {
    wait_for(&format!("identity {id} deleted"), DEADLINE, || {
        get(cluster, id).map_or(Ok(()), |i| Err(i.to_string()))
    });
}

#[test]
fn unused_identities_are_marked_then_deleted_and_used_ones_stay() {
    let cluster = Cluster::start();
    cluster
        .emu
        .put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}));
    identity(&cluster, 1001, "kept");
    identity(&cluster, 1002, "unused");
    identity(&cluster, 1003, "back");
    endpoint(&cluster, "kept-1", 1001);
    endpoint(&cluster, "back-1", 1003);
    let mut op = cluster.operator(&[
        "--leader-election=false",
        "--ipam",
        "multi-pool",
        "--identity-gc-interval",
        "1s",
        "--identity-heartbeat-timeout",
        "10s",
    ]);

    // No endpoint ever used 1002: marked, then deleted.
    wait_for("identity 1002 marked", DEADLINE, || {
        match get(&cluster, 1002) {
            Some(i) if i["metadata"]["annotations"]["io.cilium.heartbeat"].is_string() => Ok(()),
            Some(i) => Err(i.to_string()),
            None => Ok(()),
        }
    });
    wait_gone(&cluster, 1002);
    op.wait_log("Garbage collected identity", DEADLINE);

    // The pod of 1003 goes and a new one with the same labels comes back within the timeout
    // (one run of one second against a timeout of ten: room for a busy machine).
    pod_gone(&cluster, "back-1");
    wait_runs(&op, 1);
    endpoint(&cluster, "back-2", 1003);

    // Twenty-two more runs: more than twice the timeout, after which an unused identity is gone.
    wait_runs(&op, 22);
    for id in [1001, 1003] {
        let kept = get(&cluster, id).unwrap_or_else(|| panic!("identity {id} was deleted"));
        assert!(
            kept["metadata"]["annotations"]["io.cilium.heartbeat"].is_null(),
            "identity {id} in use was marked: {kept}"
        );
    }

    // The last pod of 1001 goes: its identity follows.
    pod_gone(&cluster, "kept-1");
    wait_gone(&cluster, 1001);
    assert!(get(&cluster, 1003).is_some(), "1003 is still in use");
    assert_eq!(op.exited(), None, "the operator keeps running");
}

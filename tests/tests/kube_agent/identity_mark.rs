//! An identity the operator's garbage collection marked for deletion (`io.cilium.heartbeat`)
//! that a pod uses again is unmarked by the agent, as cilium-agent does, so the operator's
//! delete (which carries the resourceVersion it marked) cannot take it from under the pod.

use std::time::Duration;

use serde_json::{Value, json};
use weft_tests::{ThreadNetNs, require_root};

use super::{Cluster, add, wait_for};

/// The identity of pod `name`'s CiliumEndpoint in namespace `web`.
fn endpoint_identity(cluster: &Cluster, name: &str) -> Option<u64> {
    cluster.emu.get("ciliumendpoints", Some("web"), name)?["status"]["identity"]["id"].as_u64()
}

fn identity(cluster: &Cluster, id: u64) -> Value {
    cluster
        .emu
        .get("ciliumidentities", None, &id.to_string())
        .unwrap_or_else(|| panic!("identity {id}"))
}

#[test]
fn a_marked_identity_a_pod_uses_again_is_unmarked() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-1", "", Some("10.1.0.0/24"));
    for pod in ["a", "b"] {
        cluster.add_pod_labelled("web", pod, "node-1", &json!({"app": "web"}));
    }
    let mut agent = cluster.agent("node-1", &["--ipam", "kubernetes"]);
    agent.start();
    let _a = add(&agent, "web", "a");
    let id = wait_for("a's CiliumEndpoint", Duration::from_secs(20), || {
        endpoint_identity(&cluster, "a").ok_or_else(|| "none yet".to_owned())
    });

    // The operator marks it (as if a had gone unseen for the heartbeat timeout).
    let mut marked = identity(&cluster, id);
    marked["metadata"]["annotations"] = json!({"io.cilium.heartbeat": "2026-01-01T00:00:00Z"});
    cluster.emu.put(marked);

    // A second pod with the same labels: the agent uses the identity again and unmarks it.
    let _b = add(&agent, "web", "b");
    wait_for("the mark removed", Duration::from_secs(20), || {
        let now = identity(&cluster, id);
        let b = endpoint_identity(&cluster, "b");
        (now["metadata"]["annotations"]["io.cilium.heartbeat"].is_null() && b == Some(id))
            .then_some(())
            .ok_or_else(|| format!("b uses {b:?}; identity {now}"))
    });
    agent.wait_log("unmarked it", Duration::from_secs(10));
}

#[test]
fn an_identity_deleted_by_the_collection_is_not_handed_out_again() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-2", "", Some("10.2.0.0/24"));
    for pod in ["a", "b"] {
        cluster.add_pod_labelled("web", pod, "node-2", &json!({"app": "api"}));
    }
    let mut agent = cluster.agent("node-2", &["--ipam", "kubernetes"]);
    agent.start();
    let _a = add(&agent, "web", "a");
    let id = wait_for("a's CiliumEndpoint", Duration::from_secs(20), || {
        endpoint_identity(&cluster, "a").ok_or_else(|| "none yet".to_owned())
    });
    // The operator's garbage collection deletes it (as once a was gone for long enough).
    cluster
        .emu
        .remove("ciliumidentities", None, &id.to_string())
        .expect("the identity exists");

    // A new pod with the same labels must get an identity that exists.
    let _b = add(&agent, "web", "b");
    wait_for(
        "b's identity to exist as a CiliumIdentity",
        Duration::from_secs(20),
        || {
            let b = endpoint_identity(&cluster, "b");
            let exists = b.is_some_and(|b| {
                cluster
                    .emu
                    .get("ciliumidentities", None, &b.to_string())
                    .is_some()
            });
            exists
                .then_some(())
                .ok_or_else(|| format!("b uses {b:?}, deleted was {id}"))
        },
    );
}

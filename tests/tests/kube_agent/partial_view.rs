//! An identity pass that cannot read every endpoint record deletes no CiliumEndpoint: a record
//! that fails to read (a corrupt file, EMFILE during an ADD burst) is not a pod that is gone,
//! and other nodes drop the IPCache entries of every CiliumEndpoint this node deletes.

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;
use weft_tests::{ThreadNetNs, require_root};

use super::{Cluster, add, del, wait_for};

/// The names of the CiliumEndpoints in namespace `web`.
fn endpoints(cluster: &Cluster) -> BTreeSet<String> {
    cluster
        .emu
        .list("ciliumendpoints")
        .iter()
        .filter(|c| c["metadata"]["namespace"] == "web")
        .filter_map(|c| Some(c["metadata"]["name"].as_str()?.to_owned()))
        .collect()
}

#[test]
fn an_unreadable_endpoint_record_prunes_no_ciliumendpoint() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-1", "", Some("10.1.0.0/24"));
    for pod in ["a", "b", "c"] {
        cluster.add_pod_labelled("web", pod, "node-1", &json!({"app": pod}));
    }
    let mut agent = cluster.agent("node-1", &["--ipam", "kubernetes"]);
    agent.start();
    let a = add(&agent, "web", "a");
    let _b = add(&agent, "web", "b");
    let both: BTreeSet<String> = ["a", "b"].map(String::from).into();
    wait_for(
        "a's and b's CiliumEndpoints",
        Duration::from_secs(20),
        || {
            let now = endpoints(&cluster);
            (now == both).then_some(()).ok_or(format!("{now:?}"))
        },
    );

    // a's record stops parsing (what a failed read looks like to the pass); then a pass runs.
    let record = agent
        .state
        .join("endpoints")
        .join(format!("{}_eth0.json", a.id));
    let intact = std::fs::read(&record).expect("a's record");
    std::fs::write(&record, b"{\"container_id\": ").expect("truncate a's record");
    let c = add(&agent, "web", "c");
    wait_for(
        "the pass to publish c and to say it pruned nothing",
        Duration::from_secs(20),
        || {
            let now = endpoints(&cluster);
            assert!(
                now.contains("a"),
                "a's CiliumEndpoint was deleted while a runs: {now:?}\n{}",
                agent.log()
            );
            let said = agent.log().contains("not removing any CiliumEndpoint");
            (now.contains("c") && said)
                .then_some(())
                .ok_or(format!("{now:?}, said so: {said}"))
        },
    );

    // Readable again: c's DEL is pruned as usual, and a is kept.
    std::fs::write(&record, intact).expect("mend a's record");
    del(&agent, &c);
    wait_for("c's CiliumEndpoint to go", Duration::from_secs(20), || {
        let now = endpoints(&cluster);
        (now == both).then_some(()).ok_or(format!("{now:?}"))
    });
}

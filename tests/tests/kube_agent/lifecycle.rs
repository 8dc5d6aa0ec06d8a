//! Node discovery, the operator handshakes (crd, multi-pool), missing permissions and a
//! CiliumNode another writer made invalid.

use std::time::Duration;

use serde_json::{Value, json};
use weft_agent::faults::ENV;
use weft_tests::{ThreadNetNs, agent::Agent, kube::Verb, require_root};

use super::{Cluster, DEBOUNCE, add, crd_pool, grow_demand_to_24, used, wait_for, wait_requested};

#[test]
fn a_node_appears_and_its_ciliumnode_is_created_and_seeded() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let mut agent = cluster.agent("node-a", &["--ipam", "kubernetes"]);
    // Every crate at trace level: the bearer token must still appear nowhere in the log.
    agent.env.push(("RUST_LOG".into(), "trace".into()));
    agent.spawn();
    // No v1.Node yet: the agent waits (and says so) instead of failing.
    wait_for(
        "the agent to say it waits for its Node",
        Duration::from_secs(20),
        || {
            let log = agent.log();
            log.contains("waiting for v1.Node node-a")
                .then_some(())
                .ok_or(log)
        },
    );
    assert!(
        agent.running(),
        "the agent must wait for its Node:\n{}",
        agent.log()
    );
    assert!(cluster.cilium_node("node-a").is_none());
    assert_eq!(agent.probe("/healthz"), 200, "alive while waiting");
    assert_eq!(agent.probe("/readyz"), 503, "not ready while waiting");

    let node = cluster.add_node(
        "node-a",
        "aws:///eu-west-1a/i-0abc123",
        Some("10.77.0.0/24"),
    );
    agent.wait_ready(Duration::from_secs(30));
    wait_for(
        "/readyz to answer 200 once CNI is served",
        Duration::from_secs(5),
        || {
            let code = agent.probe("/readyz");
            (code == 200).then_some(()).ok_or_else(|| code.to_string())
        },
    );
    assert_eq!(agent.probe("/nope"), 404);
    let cn = cluster.cilium_node("node-a").expect("CiliumNode created");
    assert_eq!(
        cn["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": node["metadata"]["uid"]}])
    );
    assert_eq!(
        cn["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "z1"
    );
    assert_eq!(cn["spec"]["instance-id"], "i-0abc123");
    // Seeded from the Node's addresses; the agent adds its router (`CiliumInternalIP`).
    assert_eq!(
        cn["spec"]["addresses"][0],
        json!({"type": "InternalIP", "ip": "192.0.2.10"})
    );
    assert_eq!(cn["spec"]["ipam"]["podCIDRs"], json!(["10.77.0.0/24"]));

    // kubernetes mode allocates from the Node's pod CIDR.
    cluster.add_pod("default", "web-0", "node-a");
    let pod = add(&agent, "default", "web-0");
    let cidr: ipnet::IpNet = "10.77.0.0/24".parse().expect("cidr");
    assert!(pod.ips.iter().all(|ip| cidr.contains(ip)), "{:?}", pod.ips);
    wait_for(
        "the router written back as CiliumInternalIP",
        Duration::from_secs(10),
        || {
            let cn = cluster.cilium_node("node-a").expect("CiliumNode");
            let internal: Vec<Value> = cn["spec"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["type"] == "CiliumInternalIP")
                .cloned()
                .collect();
            let in_cidr = |a: &Value| {
                a["ip"]
                    .as_str()
                    .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
                    .is_some_and(|ip| cidr.contains(&ip) && !pod.ips.contains(&ip))
            };
            (internal.len() == 1 && in_cidr(&internal[0]))
                .then_some(())
                .ok_or_else(|| cn["spec"]["addresses"].to_string())
        },
    );
    let log = agent.log();
    assert!(
        log.contains("TRACE") && log.contains("ciliumnodes"),
        "the log is at trace level and shows API requests"
    );
    assert!(
        !log.contains(cluster.emu.token().expect("the emulator requires a token")),
        "the bearer token leaked into the log"
    );
}

#[test]
fn crd_mode_operator_fills_the_pool_and_status_used_converges() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node(
        "node-b",
        "azure:///subscriptions/S/virtualMachines/VM-B",
        None,
    );
    let mut agent = cluster.agent(
        "node-b",
        &["--ipam", "crd", "--enable-health-checking", "false"],
    );
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node("node-b")
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    let cn = cluster.cilium_node("node-b").expect("exists");
    assert_eq!(
        cn["spec"]["instance-id"], "/subscriptions/s/virtualmachines/vm-b",
        "Azure resource ids become lower-cased instance ids, as Cilium does"
    );
    // The operator's part: hand the node addresses.
    cluster.operator_edit("node-b", |n| n["spec"]["ipam"]["pool"] = crd_pool(8));
    agent.wait_ready(Duration::from_secs(30));
    for i in 0..3 {
        cluster.add_pod("web", &format!("w{i}"), "node-b");
    }
    let pods: Vec<_> = (0..3)
        .map(|i| add(&agent, "web", &format!("w{i}")))
        .collect();
    let mut expected: Vec<(String, String)> = pods
        .iter()
        .map(|p| (p.ips[0].to_string(), format!("web/{}", p.name)))
        .collect();
    expected.sort();
    wait_for(
        "status.ipam.used to list the three pods and the router",
        DEBOUNCE * 3,
        || {
            let node = cluster.cilium_node("node-b").expect("exists");
            let used = used(&node);
            let pods: Vec<(String, String)> = used
                .iter()
                .filter(|(_, owner)| *owner != "router")
                .map(|(ip, owner)| (ip.clone(), owner.clone()))
                .collect();
            let routers = used.values().filter(|o| *o == "router").count();
            (pods == expected && routers == 1)
                .then_some(())
                .ok_or_else(|| format!("{used:?}"))
        },
    );
    // The operator's fields are untouched.
    let node = cluster.cilium_node("node-b").expect("exists");
    assert_eq!(node["spec"]["ipam"]["pool"], crd_pool(8));
}

#[test]
fn multi_pool_requested_is_written_and_allocated_cidrs_are_used() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-c", "", None);
    cluster.add_pool("default", "10.99.0.0/16", 27);
    let mut agent = cluster.agent(
        "node-c",
        &[
            "--ipam",
            "multi-pool",
            "--ipam-multi-pool-pre-allocation",
            "default=8",
        ],
    );
    agent.spawn();
    wait_for("spec.ipam.pools.requested", DEBOUNCE * 20, || {
        let node = cluster.cilium_node("node-c").ok_or("no CiliumNode")?;
        let requested = &node["spec"]["ipam"]["pools"]["requested"];
        (requested[0]["pool"] == "default"
            && requested[0]["needed"]["ipv4-addrs"].as_u64() >= Some(8))
        .then_some(())
        .ok_or_else(|| requested.to_string())
    });
    cluster.operator_edit("node-c", |n| {
        n["spec"]["ipam"]["pools"]["allocated"] =
            json!([{"pool": "default", "cidrs": ["10.99.0.0/27"]}]);
    });
    agent.wait_ready(Duration::from_secs(30));
    cluster.add_pod("default", "a", "node-c");
    let pod = add(&agent, "default", "a");
    let cidr: ipnet::IpNet = "10.99.0.0/27".parse().expect("cidr");
    assert!(cidr.contains(&pod.ips[0]), "{:?}", pod.ips);
    // The agent keeps what the operator allocated while it uses it: its write of the demand
    // the pods grew leaves `allocated` as the operator wrote it.
    let _more = grow_demand_to_24(&cluster, &agent, "node-c", 1);
    wait_requested(&cluster, "node-c", "default", 24);
    let node = cluster.cilium_node("node-c").expect("exists");
    assert_eq!(
        node["spec"]["ipam"]["pools"]["allocated"],
        json!([{"pool": "default", "cidrs": ["10.99.0.0/27"]}])
    );
}

#[test]
fn missing_permissions_stop_start_up_naming_the_verb_and_resource() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-d", "", None);
    cluster.emu.faults().inject(
        Some(Verb::Create),
        "ciliumnodes",
        u32::MAX,
        weft_tests::kube::Answer::Forbidden,
    );
    let mut agent = cluster.agent("node-d", &["--ipam", "multi-pool"]);
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    assert!(
        matches!(code, Some(c) if c != 0),
        "exit {code:?}:\n{}",
        agent.log()
    );
    let log = agent.log();
    assert!(
        log.contains("refused to create ciliumnodes (403 Forbidden)")
            && log.contains(
                "apiGroups: [\"cilium.io\"], resources: [\"ciliumnodes\"], verbs: [\"create\"]"
            )
            && log.contains("deploy/agent/rbac.yaml"),
        "{log}"
    );

    // A watch the role does not allow is as fatal, once the CiliumNode exists.
    cluster.emu.faults().clear();
    cluster.emu.faults().inject(
        Some(Verb::List),
        "pods",
        u32::MAX,
        weft_tests::kube::Answer::Forbidden,
    );
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(30));
    assert!(
        matches!(code, Some(c) if c != 0),
        "exit {code:?}:\n{}",
        agent.log()
    );
    assert!(
        agent.log().contains("refused to list pods (403 Forbidden)"),
        "{}",
        agent.log()
    );
}

#[test]
fn a_rejected_token_stops_start_up_naming_the_kubeconfig_not_a_permission() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-t", "", None);
    let bad = std::env::temp_dir().join(weft_tests::unique("weft-bad-kubeconfig-"));
    let token = cluster.emu.token().expect("the emulator wants a token");
    let text = cluster
        .emu
        .kubeconfig(&cluster.emu.url())
        .replace(token, "an-expired-token");
    std::fs::write(&bad, text).expect("kubeconfig");
    let mut agent = Agent::kube(&bad, "node-t", &["--ipam", "multi-pool"]);
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    let log = agent.log();
    let _ = std::fs::remove_file(&bad);
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}:\n{log}");
    let rejected = format!(
        "the API server rejected the credential (user \"emulator\" of kubeconfig {}) with 401 \
         Unauthorized",
        bad.display()
    );
    assert!(log.contains(&rejected), "{log}");
    assert!(
        !log.contains("refused to get"),
        "a 401 is no missing permission:\n{log}"
    );
    assert_eq!(
        log.matches("401 Unauthorized").count(),
        1,
        "said once:\n{log}"
    );
}

#[test]
fn an_invalid_field_from_another_writer_is_reported_and_never_rewritten() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-e", "", None);
    cluster.add_pool("default", "10.99.0.0/16", 27);
    let mut agent = cluster.agent(
        "node-e",
        &[
            "--ipam",
            "multi-pool",
            "--ipam-multi-pool-pre-allocation",
            "default=8",
        ],
    );
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node("node-e")
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    cluster.operator_edit("node-e", |n| {
        n["spec"]["ipam"]["pools"]["allocated"] =
            json!([{"pool": "default", "cidrs": ["10.99.0.0/27"]}]);
    });
    agent.wait_ready(Duration::from_secs(30));
    cluster.add_pod("default", "a", "node-e");
    let first = add(&agent, "default", "a");

    // Another writer breaks a CIDR.
    let broken = json!([{"pool": "default", "cidrs": ["10.99.0.0/27", "10.99.0.300/27"]}]);
    cluster.operator_edit("node-e", |n| {
        n["spec"]["ipam"]["pools"]["allocated"] = broken.clone();
    });
    wait_for("an Event naming the field", Duration::from_secs(10), || {
        let events = cluster.emu.list("events");
        events
            .iter()
            .any(|e| {
                e["reason"] == "InvalidField"
                    && e["involvedObject"]["name"] == "node-e"
                    && e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("spec.ipam.pools.allocated[0].cidrs[1]"))
            })
            .then_some(())
            .ok_or_else(|| Value::from(events).to_string())
    });
    agent.wait_log(
        "spec.ipam.pools.allocated[0].cidrs[1]",
        Duration::from_secs(10),
    );
    // The agent keeps serving from the last valid version...
    cluster.add_pod("default", "b", "node-e");
    let second = add(&agent, "default", "b");
    assert_ne!(first.ips, second.ips);
    // ...and never rewrites the broken field: when the pods grow its demand, it says it does
    // not write the part another writer broke, and leaves it as it is.
    let refusals = |log: &str| {
        log.matches("not writing a part of CiliumNode that another writer made invalid")
            .count()
    };
    let before = refusals(&agent.log());
    let _more = grow_demand_to_24(&cluster, &agent, "node-e", 2);
    wait_for("the agent to refuse its write", DEBOUNCE * 10, || {
        let now = refusals(&agent.log());
        (now > before)
            .then_some(())
            .ok_or(format!("{now} refusals"))
    });
    let node = cluster.cilium_node("node-e").expect("exists");
    assert_eq!(node["spec"]["ipam"]["pools"]["allocated"], broken);
    assert!(agent.running(), "{}", agent.log());
}

/// An ADD that finds no block of its pool leaves a pending demand, and the agent writes it to
/// `requested` at once (Cilium triggers the CiliumNode update on every allocation attempt),
/// not at some later, unrelated write: otherwise the pod waits for ever on a quiet node.
#[test]
fn a_pod_waiting_for_a_block_of_its_pool_is_requested_at_once() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_pool("blue", "10.98.0.0/16", 27);
    let agent = multi_pool_agent(&cluster, "node-g", Vec::new());
    // The start-up's write (the demand with the router's address) has landed: the node is
    // quiet.
    wait_requested(&cluster, "node-g", "default", 16);

    cluster.emu.put(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "b", "namespace": "default",
            "annotations": {"ipam.cilium.io/ip-pool": "blue"}},
        "spec": {"nodeName": "node-g", "containers": [{"name": "c", "image": "busybox"}]},
    }));
    let netns = weft_tests::NamedNetNs::new();
    let call = agent.cni(
        "ADD",
        "ctr-b",
        &netns.path().display().to_string(),
        ("default", "b"),
    );
    assert_eq!(
        call.stdout["code"], 11,
        "no block of blue yet: {}",
        call.stdout
    );
    wait_for("requested to ask for blue", DEBOUNCE * 5, || {
        let node = cluster.cilium_node("node-g").ok_or("no CiliumNode")?;
        let requested = &node["spec"]["ipam"]["pools"]["requested"];
        requested
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["pool"] == "blue" && r["needed"]["ipv4-addrs"].as_u64() >= Some(1))
            .then_some(())
            .ok_or_else(|| requested.to_string())
    });
}

/// A pod ADDed the moment it is created is found while the daemon loop's sync runs beside the
/// one the ADD waits for. A sync used to install a snapshot read before it waited for the
/// state lock, so the loop's, read just before the pod arrived, could land between the ADD's
/// sync and its allocation: `resource Pod … not found`. The fault points hold the loop between
/// waking and syncing, and every sync inside the lock, so the two overlap that way each time.
#[test]
fn a_pod_added_as_it_is_created_is_found_while_syncs_overlap() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let faults = vec![(ENV.to_owned(), "loop=delay:100,sync=delay:100".to_owned())];
    let agent = multi_pool_agent(&cluster, "node-h", faults);
    let mut pods = Vec::new();
    for i in 0..8 {
        // The loop wakes 50 ms after an ADD asks it to sync: the next pod arrives once it has.
        std::thread::sleep(Duration::from_millis(75));
        let name = format!("q{i}");
        cluster.add_pod("default", &name, "node-h");
        let netns = weft_tests::NamedNetNs::new();
        let call = agent.cni(
            "ADD",
            &format!("ctr-q{i}"),
            &netns.path().display().to_string(),
            ("default", &name),
        );
        assert_eq!(call.code, 0, "ADD {name}: {}\n{}", call.stdout, agent.log());
        pods.push(netns);
    }
    let log = agent.log();
    assert!(
        log.contains("holding at loop") && log.contains("holding at sync"),
        "{log}"
    );
}

/// A ready multi-pool agent on a new node `name` (pre-allocation `default=8`, environment
/// `env`), given block 10.99.0.0/27 of pool `default` as the operator would once its
/// CiliumNode exists.
fn multi_pool_agent(cluster: &Cluster, name: &str, env: Vec<(String, String)>) -> Agent {
    cluster.add_node(name, "", None);
    cluster.add_pool("default", "10.99.0.0/16", 27);
    let mut agent = cluster.agent(
        name,
        &[
            "--ipam",
            "multi-pool",
            "--ipam-multi-pool-pre-allocation",
            "default=8",
        ],
    );
    agent.env = env;
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node(name)
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    cluster.operator_edit(name, |n| {
        n["spec"]["ipam"]["pools"]["allocated"] =
            json!([{"pool": "default", "cidrs": ["10.99.0.0/27"]}]);
    });
    agent.wait_ready(Duration::from_secs(30));
    agent
}

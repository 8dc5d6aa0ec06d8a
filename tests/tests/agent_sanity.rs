//! The real agent's start-up checks, each in a private node namespace: a pool that overlaps an
//! address of the node stops start-up with both ranges and the fix; the same overlap appearing
//! while the agent runs refuses the addresses, not the agent; an IPAM mode change under live
//! pods is refused with the migration path; cluster-pool → multi-pool is allowed and keeps the
//! pods' addresses.

use std::{net::IpAddr, process::Command, time::Duration};

use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, CniCall, example_store},
    require_root,
};

/// `ip` in the calling thread's (node) namespace.
fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// A device `name` carrying `cidr` (an address of the node): one end of a veth pair (the
/// `dummy` module is not always there; veth is, the datapath needs it).
fn node_address(name: &str, cidr: &str) {
    let peer = format!("{name}p");
    ip(&["link", "add", name, "type", "veth", "peer", "name", &peer]);
    ip(&["addr", "add", cidr, "dev", name]);
    ip(&["link", "set", &peer, "up"]);
    ip(&["link", "set", name, "up"]);
}

fn multi_pool_agent() -> Agent {
    Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--ipam-cilium-node-update-rate",
            "1s",
        ],
    )
}

fn pod_doc(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  nodeName: node1\n"
    )
}

fn add(agent: &Agent, netns: &NamedNetNs, name: &str) -> CniCall {
    agent.cni(
        "ADD",
        &format!("ctr-{name}"),
        &netns.path().display().to_string(),
        ("default", name),
    )
}

fn v4_of(call: &CniCall) -> IpAddr {
    call.stdout["ips"]
        .as_array()
        .unwrap_or_else(|| panic!("no ips in {}", call.stdout))
        .iter()
        .filter_map(|i| i["address"].as_str()?.split('/').next()?.parse().ok())
        .find(IpAddr::is_ipv4)
        .expect("an IPv4 address")
}

/// Start the agent, expect it to exit non-zero on its own, and return its log.
fn refused_start(agent: &mut Agent) -> String {
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(30));
    let log = agent.log();
    assert!(
        matches!(code, Some(c) if c != 0),
        "the agent should have refused to start (exit {code:?}):\n{log}"
    );
    log
}

#[test]
fn a_pool_overlapping_a_node_address_stops_start_up_with_both_ranges_and_the_fix() {
    require_root();
    let _node = ThreadNetNs::new();
    // The example store's pool default is 10.200.0.0/27; the node sits on 10.200.0.0/24.
    node_address("eth9", "10.200.0.9/24");
    let mut agent = multi_pool_agent();
    let log = refused_start(&mut agent);
    assert!(
        log.contains(
            "pool default CIDR 10.200.0.0/27 overlaps 10.200.0.0/24 on eth9 (node address 10.200.0.9): pick a pod CIDR outside the node's networks"
        ),
        "{log}"
    );
    assert!(log.contains("CiliumPodIPPool default"), "{log}");
    assert!(
        !agent.socket.exists(),
        "no socket served after a refused start"
    );
}

#[test]
fn an_overlap_appearing_later_refuses_the_addresses_not_the_agent() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = multi_pool_agent();
    agent.put_doc("pods/default/a.yaml", &pod_doc("a"));
    agent.start();
    let before = NamedNetNs::new();
    assert_eq!(add(&agent, &before, "a").code, 0);

    // The node gets a network covering the whole default pool; any store change re-reads it.
    node_address("eth9", "10.200.0.1/24");
    agent.put_doc("pods/default/b.yaml", &pod_doc("b"));
    let after = NamedNetNs::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let call = add(&agent, &after, "b");
        let refusal = call.stdout["msg"]
            .as_str()
            .is_some_and(|m| m.starts_with("refusing address"));
        if refusal || std::time::Instant::now() > deadline {
            break call;
        }
        // The pod or the new network is not seen yet: undo and retry.
        if call.code == 0 {
            let _ = agent.cni(
                "DEL",
                "ctr-b",
                &after.path().display().to_string(),
                ("default", "b"),
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert_eq!(refused.stdout["code"], 100, "{}", refused.stdout);
    let msg = refused.stdout["msg"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("refusing address 10.200.0.")
            && msg.contains("on eth9 (node address 10.200.0.1)"),
        "{}",
        refused.stdout
    );
    assert!(agent.running(), "the agent keeps running");
    assert!(
        agent
            .log()
            .contains("pool default CIDR 10.200.0.0/27 overlaps 10.200.0.0/24 on eth9"),
        "the overlap is reported in the log"
    );
}

#[test]
fn an_ipam_mode_change_under_live_pods_is_refused_with_the_migration_path() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = multi_pool_agent();
    agent.put_doc("pods/default/a.yaml", &pod_doc("a"));
    agent.start();
    let pod = NamedNetNs::new();
    assert_eq!(add(&agent, &pod, "a").code, 0);
    agent.stop();
    assert_eq!(
        std::fs::read_to_string(agent.state.join("ipam-mode")).expect("mode file"),
        "multi-pool\n"
    );

    agent.flags = vec!["--ipam".into(), "cluster-pool".into()];
    let log = refused_start(&mut agent);
    assert!(
        log.contains(
            "the IPAM mode changed from multi-pool to cluster-pool, but 1 pod(s) on this node still hold multi-pool addresses"
        ),
        "{log}"
    );
    assert!(
        log.contains("only cluster-pool → multi-pool can be changed in place"),
        "{log}"
    );
    assert!(log.contains("Drain the node's pods first"), "{log}");

    // Back to the recorded mode, the pod is still there.
    agent.flags = vec!["--ipam".into(), "multi-pool".into()];
    agent.start();
    assert_eq!(
        add(&agent, &pod, "a").code,
        0,
        "the repeated ADD still answers"
    );
}

#[test]
fn cluster_pool_to_multi_pool_is_allowed_and_keeps_the_pods() {
    require_root();
    let _node = ThreadNetNs::new();
    // What the operator leaves during the migration: the cluster-pool CIDR, and the same block
    // as the node's allocation of the default pool.
    let node = "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  ipam:\n    podCIDRs:\n    - 10.200.0.0/27\n    pools:\n      allocated:\n      - pool: default\n        cidrs:\n        - 10.200.0.0/27\n";
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "cluster-pool",
            "--ipam-cilium-node-update-rate",
            "1s",
        ],
    );
    agent.put_doc("ciliumnodes/node1.yaml", node);
    agent.put_doc("pods/default/a.yaml", &pod_doc("a"));
    agent.put_doc("pods/default/b.yaml", &pod_doc("b"));
    agent.start();
    let a = NamedNetNs::new();
    let first = add(&agent, &a, "a");
    assert_eq!(first.code, 0, "{}", first.stdout);
    let a_ip = v4_of(&first);
    agent.stop();

    agent.flags = vec![
        "--ipam".into(),
        "multi-pool".into(),
        "--ipam-cilium-node-update-rate".into(),
        "1s".into(),
    ];
    agent.start();
    assert_eq!(
        std::fs::read_to_string(agent.state.join("ipam-mode")).expect("mode file"),
        "multi-pool\n"
    );
    let again = add(&agent, &a, "a");
    assert_eq!(v4_of(&again), a_ip, "the pod keeps its address");
    let b = NamedNetNs::new();
    let second = add(&agent, &b, "b");
    assert_eq!(second.code, 0, "{}", second.stdout);
    assert_ne!(
        v4_of(&second),
        a_ip,
        "a restored address is not handed out again"
    );
}

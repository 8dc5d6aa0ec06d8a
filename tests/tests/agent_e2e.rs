//! The real agent (`weft-agent run`, a child process in a private node namespace) driven by
//! the real plugin (`weft-cni`, environment + stdin): 20 pods in two multi-pool pools with a
//! ping matrix and an agent SIGKILLed half-way; CRD mode where `status.ipam.used` must equal
//! the live pods after a restart; and the CNI contract against a live agent (CHECK, idempotent
//! ADD and DEL, exhausted and not-ready pools, conflicting pools, failed ADD leaves nothing,
//! DEL queued while the agent is down).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use ipnet::IpNet;
use serde_json::Value;
use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, Pod, add, cni_call_as, example_store, ips_of, ping},
    require_root, wait_until,
};

fn pod_doc(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  nodeName: node1\n"
    )
}

#[test]
fn twenty_pods_in_two_pools_survive_an_agent_sigkill() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--enable-ipv6",
            "true",
            "--ipam-multi-pool-pre-allocation",
            "default=8,mars=8",
            "--ipam-cilium-node-update-rate",
            "1s",
        ],
    );
    let names: Vec<(&str, String)> = (0..10)
        .flat_map(|i| [("default", format!("p{i}")), ("mars", format!("m{i}"))])
        .collect();
    for (ns, name) in &names {
        agent.put_doc(&format!("pods/{ns}/{name}.yaml"), &pod_doc(ns, name));
    }
    agent.start();
    let mut pods: Vec<Pod> = names[..10]
        .iter()
        .map(|(ns, name)| add(&agent, ns, name))
        .collect();

    // Kill the agent without warning, start it again, and finish the job.
    agent.kill();
    agent.start();
    pods.extend(names[10..].iter().map(|(ns, name)| add(&agent, ns, name)));

    let default: IpNet = "10.200.0.0/27".parse().expect("cidr");
    let mars: IpNet = "10.201.0.0/28".parse().expect("cidr");
    let mut seen = BTreeSet::new();
    for pod in &pods {
        assert_eq!(
            pod.ips.len(),
            2,
            "{}/{}: one address per family",
            pod.ns,
            pod.name
        );
        for ip in &pod.ips {
            assert!(seen.insert(*ip), "{ip} handed out twice");
        }
        let v4 = pod.ips.iter().find(|ip| ip.is_ipv4()).expect("v4");
        let pool = if pod.ns == "mars" { mars } else { default };
        assert!(
            pool.contains(v4),
            "{}/{} got {v4}, outside its pool {pool}",
            pod.ns,
            pod.name
        );
    }
    // A repeated ADD after the restart answers with the same addresses.
    let again = agent.cni(
        "ADD",
        &pods[0].id,
        &pods[0].netns.path().display().to_string(),
        (&pods[0].ns, &pods[0].name),
    );
    assert_eq!(ips_of(&again), pods[0].ips);

    // IPv4 ping matrix (every pod to every other) and an IPv6 ring.
    let mut failures = Vec::new();
    for (i, a) in pods.iter().enumerate() {
        for (j, b) in pods.iter().enumerate() {
            let v4 = b.ips.iter().find(|ip| ip.is_ipv4()).copied().expect("v4");
            if i != j && !ping(a, v4) {
                failures.push(format!("{} -> {}", a.name, b.name));
            }
        }
        let next = &pods[(i + 1) % pods.len()];
        let v6 = next
            .ips
            .iter()
            .find(|ip| ip.is_ipv6())
            .copied()
            .expect("v6");
        if !ping(a, v6) {
            failures.push(format!("{} -> {} (IPv6)", a.name, next.name));
        }
    }
    assert!(failures.is_empty(), "unreachable: {failures:?}");

    // After one debounce the demand written back counts exactly the live pods (+ router).
    wait_until(
        "requested to reflect 10 pods per pool",
        Duration::from_secs(10),
        || {
            let doc = agent.node_doc();
            let requested = &doc["spec"]["ipam"]["pools"]["requested"];
            let needed = |pool: &str| {
                requested
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["pool"] == pool)
                    .map(|r| r["needed"]["ipv4-addrs"].clone())
            };
            // default: 10 pods + router = 11 in use, pre-allocation 8 → ceil((11+8)/8)*8 = 24;
            // mars: 10 in use → ceil((10+8)/8)*8 = 24.
            needed("default") == Some(Value::from(24)) && needed("mars") == Some(Value::from(24))
        },
    );
}

fn crd_store_agent(addresses: u8) -> Agent {
    let mut pool = String::new();
    for i in 0..addresses {
        use std::fmt::Write as _;
        let _ = write!(
            pool,
            "      10.210.0.{}:\n        resource: eni-1\n",
            10 + i
        );
    }
    let node = format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\n  labels: {{team: blue}}\nspec:\n  ipam:\n    pool:\n{pool}    min-allocate: 1\nstatus:\n  operator-notes: kept\n"
    );
    let agent = Agent::new(
        &example_store(),
        &["--ipam", "crd", "--ipam-cilium-node-update-rate", "500ms"],
    );
    agent.put_doc("ciliumnodes/node1.yaml", &node);
    agent
}

fn used(agent: &Agent) -> BTreeMap<String, String> {
    agent.node_doc()["status"]["ipam"]["used"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(ip, v)| {
                    (
                        ip.clone(),
                        v["owner"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn crd_mode_status_used_equals_the_live_pods_after_a_restart() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = crd_store_agent(12);
    agent.start();
    let mut pods: Vec<Pod> = (0..6)
        .map(|i| add(&agent, "default", &format!("c{i}")))
        .collect();
    agent.kill();
    agent.start();
    pods.extend((6..8).map(|i| add(&agent, "default", &format!("c{i}"))));
    for pod in pods.drain(..3) {
        let call = agent.cni(
            "DEL",
            &pod.id,
            &pod.netns.path().display().to_string(),
            (&pod.ns, &pod.name),
        );
        assert_eq!(call.code, 0, "DEL: {}", call.stdout);
    }
    let expected: BTreeSet<String> = pods
        .iter()
        .flat_map(|p| p.ips.iter().map(ToString::to_string))
        .collect();
    wait_until(
        "status.ipam.used to equal the live pods plus the router",
        Duration::from_secs(10),
        || {
            let used = used(&agent);
            let pods_used: BTreeSet<String> = used
                .iter()
                .filter(|(_, owner)| *owner != "router")
                .map(|(ip, _)| ip.clone())
                .collect();
            pods_used == expected && used.values().filter(|o| *o == "router").count() == 1
        },
    );
    let used = used(&agent);
    for pod in &pods {
        let owner = &used[&pod.ips[0].to_string()];
        assert!(
            owner.starts_with(&format!("{}/{}", pod.ns, pod.name)),
            "owner {owner}"
        );
    }
    let doc = agent.node_doc();
    assert_eq!(
        doc["status"]["operator-notes"], "kept",
        "fields the agent does not own survive"
    );
    assert_eq!(
        doc["status"]["ipam"]["used"][pods[0].ips[0].to_string()]["resource"],
        "eni-1"
    );
}

#[test]
#[expect(
    clippy::many_single_char_names,
    reason = "pods a, b, c, d of the scenario"
)]
fn cni_contract_against_a_live_agent() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = crd_store_agent(3); // router + 2 pods
    agent.start();
    let a = add(&agent, "default", "a");
    let netns_a = a.netns.path().display().to_string();

    // The result has what the spec requires.
    let again = agent.cni("ADD", &a.id, &netns_a, ("default", "a"));
    let r = &again.stdout;
    assert_eq!(r["cniVersion"], "1.0.0");
    assert_eq!(r["interfaces"][1]["name"], "eth0");
    assert_eq!(r["interfaces"][1]["sandbox"], netns_a.as_str());
    assert_eq!(r["ips"][0]["interface"], 1);
    assert!(r["ips"][0]["gateway"].is_string() && r["routes"][0]["dst"] == "0.0.0.0/0");
    assert_eq!(ips_of(&again), a.ips, "ADD is idempotent");
    assert_eq!(
        agent.cni("CHECK", &a.id, &netns_a, ("default", "a")).code,
        0
    );

    // Exhaustion names the node, the pool and its size; nothing is left behind.
    let b = add(&agent, "default", "b");
    let c_ns = NamedNetNs::new();
    let full = agent.cni(
        "ADD",
        "ctr-c",
        &c_ns.path().display().to_string(),
        ("default", "c"),
    );
    assert_eq!(
        (full.code, full.stdout["code"].as_u64()),
        (1, Some(100)),
        "{}",
        full.stdout
    );
    let text = format!("{} {}", full.stdout["msg"], full.stdout["details"]);
    assert!(
        text.contains("node1")
            && text.contains("3 addresses")
            && text.contains("no IPs currently available"),
        "{text}"
    );

    // A failed ADD (sandbox gone) allocates nothing: after DEL of b, exactly one address is free.
    let gone = agent.cni(
        "ADD",
        "ctr-gone",
        "/var/run/netns/does-not-exist",
        ("default", "gone"),
    );
    assert_eq!(gone.stdout["code"], 3, "{}", gone.stdout);
    refuses_namespaces_and_users_that_are_not_pods(&agent, &netns_a);
    let del_b = agent.cni(
        "DEL",
        &b.id,
        &b.netns.path().display().to_string(),
        ("default", "b"),
    );
    assert_eq!(del_b.code, 0);
    assert_eq!(
        agent.cni("DEL", &b.id, "", ("default", "b")).code,
        0,
        "DEL is idempotent"
    );
    assert_eq!(
        agent
            .cni(
                "CHECK",
                &b.id,
                &b.netns.path().display().to_string(),
                ("default", "b")
            )
            .stdout["code"],
        3
    );
    let c = add(&agent, "default", "c");
    assert!(!c.ips.contains(&a.ips[0]));

    // DEL while the agent is down is queued and replayed: the address comes back.
    agent.stop();
    let queued = agent.cni("DEL", &c.id, "", ("default", "c"));
    assert_eq!(queued.code, 0, "queued: {}", queued.stdout);
    agent.start();
    let d = add(&agent, "default", "d");
    assert_eq!(
        d.ips, c.ips,
        "the replayed DEL freed c's address, the only free one"
    );
    assert!(
        std::fs::read_dir(&agent.delete_queue).map_or(0, Iterator::count) == 0,
        "queue drained"
    );
}

/// The agent refuses a namespace path that is its own (host) network namespace or not a
/// namespace at all, before allocating anything (the caller checks that nothing was taken),
/// and serves only its own user even when the socket file is opened up.
fn refuses_namespaces_and_users_that_are_not_pods(agent: &Agent, netns_a: &str) {
    let own = format!(
        "/proc/{}/task/{}/ns/net",
        std::process::id(),
        nix::unistd::gettid()
    );
    let fake = std::path::Path::new("/var/run/netns").join(weft_tests::unique("weft-fake-"));
    std::fs::write(&fake, "").expect("fake netns file");
    for (netns, says) in [
        (own.as_str(), "agent's own network namespace"),
        (&*fake.to_string_lossy(), "is not a namespace file"),
    ] {
        let refused = agent.cni("ADD", "ctr-evil", netns, ("default", "evil"));
        assert_eq!(refused.stdout["code"], 4, "{netns}: {}", refused.stdout);
        assert!(
            refused.stdout["details"]
                .as_str()
                .is_some_and(|d| d.contains(says)),
            "{netns}: {}",
            refused.stdout
        );
    }
    std::fs::remove_file(&fake).expect("remove fake netns file");

    // Only the agent's user is served, even when the socket file is opened up.
    std::fs::set_permissions(
        &agent.socket,
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .expect("chmod socket");
    // The state directory holding the socket is root's only (0700): open it for passing through,
    // so that the agent's own check is what answers.
    let dir = agent.socket.parent().expect("the socket's directory");
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o711))
        .expect("chmod state dir");
    let env = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "ctr-nobody"),
        ("CNI_NETNS", netns_a),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=nobody"),
    ];
    let nobody = cni_call_as(65534, &env, &agent.netconf("1.0.0"));
    assert_eq!(
        nobody.stdout["msg"], "the agent only serves its own user",
        "{}",
        nobody.stdout
    );
}

#[test]
fn multi_pool_errors_are_ciliums() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--ipam-multi-pool-pre-allocation",
            "default=8",
        ],
    );
    // mars gets no CIDR kept (no demand), so a pod selected into it waits: try again later.
    agent.put_doc("pods/mars/late.yaml", &pod_doc("mars", "late"));
    // Two pools selecting the same pod: Cilium's error.
    agent.put_doc(
        "ciliumpodippools/venus.yaml",
        "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  name: venus\nspec:\n  ipv4:\n    cidrs: [10.202.0.0/16]\n    maskSize: 28\n  podSelector:\n    matchLabels:\n      app: both\n",
    );
    agent.put_doc(
        "ciliumpodippools/earth.yaml",
        "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  name: earth\nspec:\n  ipv4:\n    cidrs: [10.203.0.0/16]\n    maskSize: 28\n  podSelector:\n    matchLabels:\n      app: both\n",
    );
    agent.put_doc("pods/default/twin.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: twin\n  namespace: default\n  labels: {app: both}\n");
    agent.start();
    let ns = NamedNetNs::new();
    let path = ns.path().display().to_string();
    let late = agent.cni("ADD", "ctr-late", &path, ("mars", "late"));
    assert_eq!(late.stdout["code"], 11, "{}", late.stdout);
    assert!(
        late.stdout["details"]
            .as_str()
            .unwrap_or_default()
            .contains("pool not (yet) available"),
        "{}",
        late.stdout
    );
    let twin = agent.cni("ADD", "ctr-twin", &path, ("default", "twin"));
    assert_eq!(twin.stdout["code"], 100, "{}", twin.stdout);
    let details = twin.stdout["details"].as_str().unwrap_or_default();
    assert!(
        details.contains(
            "multiple CiliumPodIPPools match pod default/twin (family=ipv4): [earth venus]"
        ),
        "{details}"
    );
    // Neither failure left an address behind: a normal pod still gets one and DELs cleanly.
    agent.put_doc("pods/default/ok.yaml", &pod_doc("default", "ok"));
    wait_until(
        "the store to see pod default/ok",
        Duration::from_secs(10),
        || agent.cni("ADD", "ctr-ok", &path, ("default", "ok")).code == 0,
    );
}

#[test]
fn an_add_interrupted_by_a_crash_is_undone_and_can_be_retried() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = crd_store_agent(2); // router + 1 pod: a leaked address would exhaust it
    // What a SIGKILL between "addresses recorded" and "ADD answered" leaves: an unfinished record.
    let ns = NamedNetNs::new();
    let path = ns.path().display().to_string();
    let unfinished = serde_json::json!({
        "container_id": "ctr-x", "ifname": "eth0", "netns": path, "owner": "default/x",
        "host_ifname": "wft000000000000", "addrs": [{"ip": "10.210.0.10", "pool": "default"}, {"ip": "10.210.0.11", "pool": "default"}],
        "result": null
    });
    std::fs::create_dir_all(agent.state.join("endpoints")).expect("state dir");
    std::fs::write(
        agent.state.join("endpoints/ctr-x_eth0.json"),
        unfinished.to_string(),
    )
    .expect("record");
    agent.start();
    let retry = agent.cni("ADD", "ctr-x", &path, ("default", "x"));
    assert_eq!(
        retry.code, 0,
        "the runtime's retry succeeds: {}",
        retry.stdout
    );
    let records = std::fs::read_dir(agent.state.join("endpoints"))
        .expect("records")
        .count();
    assert_eq!(records, 1, "one finished record");
}

//! Reliability, measured (issue 7 §3): SIGKILLs landed inside an ADD, a map update and a
//! status write; a thousand ADD/DEL cycles with failures injected into the datapath step (the
//! rolling restarts under a ping are in `restarts.rs`). Faults are placed with the
//! agent's test-only knob (`WEFT_TEST_FAULTS`, `agent/src/faults.rs`): a hold at a named point
//! (the test waits for the agent to log it, then kills it at a random moment) or a failure at
//! random. Every test prints its numbers.

use std::{
    collections::BTreeSet,
    net::IpAddr,
    process::{Command, Stdio},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use serde_json::Value;
use weft_agent::{cni::types::code, datapath::host_ifname, faults::ENV};
use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, CniCall, cni_call},
    require_root, run, unique,
};

use super::{
    Cluster, DEBOUNCE, Pod, add, crd_pool, del, faults::converged, ips_of, ping,
    two_nodes::bpf_list, wait_for,
};

/// How long a hold keeps the agent inside a step.
const HOLD_MS: u64 = 300;
/// ADD/DEL cycles of the churn test.
const CYCLES: usize = 1000;

/// Host-side veths (`wft…`) in the calling thread's network namespace.
fn veths() -> BTreeSet<String> {
    let out = run(Command::new("ip").args(["-j", "link", "show"]));
    let links: Value = serde_json::from_slice(&out.stdout).expect("ip -j link");
    links
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["ifname"].as_str())
        .filter(|n| n.starts_with("wft"))
        .map(str::to_owned)
        .collect()
}

/// The addresses in the endpoints map.
fn endpoint_ips(agent: &Agent) -> BTreeSet<String> {
    bpf_list(agent, "endpoint")
        .iter()
        .map(|r| r["ip"].as_str().expect("ip").to_owned())
        .collect()
}

/// The IPCache's prefixes.
fn ipcache_prefixes(agent: &Agent) -> BTreeSet<String> {
    bpf_list(agent, "ipcache")
        .iter()
        .map(|r| r["prefix"].as_str().expect("prefix").to_owned())
        .collect()
}

/// Endpoint records on disk.
fn records(agent: &Agent) -> usize {
    std::fs::read_dir(agent.state.join("endpoints")).map_or(0, Iterator::count)
}

/// A CRD-mode agent on its own node, ready, with `addresses` in its pool.
fn crd_agent(cluster: &Cluster, node: &str, addresses: u8, faults: Option<&str>) -> Agent {
    cluster.add_node(node, "", None);
    let mut agent = cluster.agent(
        node,
        &["--ipam", "crd", "--enable-health-checking", "false"],
    );
    agent.env = faults
        .map(|f| vec![(ENV.to_owned(), f.to_owned())])
        .unwrap_or_default();
    agent.spawn();
    wait_for("the CiliumNode", Duration::from_secs(20), || {
        cluster
            .cilium_node(node)
            .map(|_| ())
            .ok_or_else(|| "absent".into())
    });
    cluster.operator_edit(node, |n| n["spec"]["ipam"]["pool"] = crd_pool(addresses));
    agent.wait_ready(Duration::from_secs(30));
    agent
}

/// ADD `web/<name>` for container `id` in `netns` on another thread (so the agent can be
/// killed while it answers).
fn add_in_background(
    agent: &Agent,
    id: &str,
    netns: &NamedNetNs,
    name: &str,
) -> JoinHandle<CniCall> {
    let netconf = agent.netconf("1.0.0");
    let env: Vec<(&str, String)> = vec![
        ("CNI_COMMAND", "ADD".to_owned()),
        ("CNI_CONTAINERID", id.to_owned()),
        ("CNI_NETNS", netns.path().display().to_string()),
        ("CNI_IFNAME", "eth0".to_owned()),
        (
            "CNI_ARGS",
            format!("IgnoreUnknown=1;K8S_POD_NAMESPACE=web;K8S_POD_NAME={name}"),
        ),
        ("CNI_PATH", "/opt/cni/bin".to_owned()),
    ];
    std::thread::spawn(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        cni_call(&env, &netconf)
    })
}

/// How often the agent has logged a hold at `point` so far.
fn holds(agent: &Agent, point: &str) -> usize {
    agent.log().matches(&format!("holding at {point} ")).count()
}

/// Wait until the agent holds at `point` for the `n`th time.
fn wait_hold(agent: &Agent, point: &str, n: usize) {
    wait_for(
        &format!("a hold at {point}"),
        Duration::from_secs(15),
        || {
            let seen = holds(agent, point);
            (seen >= n)
                .then_some(())
                .ok_or_else(|| format!("{seen} holds"))
        },
    );
}

/// Where a round's SIGKILL lands.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// ADD's datapath step, after the veth pair exists.
    Add,
    /// Between a pod's endpoint entry and its IPCache entry.
    MapUpdate,
    /// Right before `status.ipam.used` goes to the API server.
    StatusWrite,
}

impl Step {
    const ALL: [Self; 3] = [Self::Add, Self::MapUpdate, Self::StatusWrite];

    fn point(self) -> &'static str {
        match self {
            Self::Add => "veth",
            Self::MapUpdate => "map-update",
            Self::StatusWrite => "status-write",
        }
    }
}

/// No address owned twice; every live pod has its endpoint and IPCache entries, veth, record,
/// passes CHECK and answers a ping; nothing else is left.
fn assert_consistent(cluster: &Cluster, agent: &Agent, live: &[Pod]) {
    // No address is owned twice, by the pods that survived or by the ones added after.
    let ips: Vec<IpAddr> = live.iter().flat_map(|p| p.ips.clone()).collect();
    let distinct: BTreeSet<IpAddr> = ips.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        ips.len(),
        "an address is owned twice: {ips:?}"
    );
    // Every live pod has its address, endpoint entry and veth, and nothing else is left.
    let want: BTreeSet<String> = distinct.iter().map(ToString::to_string).collect();
    assert_eq!(endpoint_ips(agent), want, "endpoints map vs the live pods");
    // The IPCache holds a host entry for each live pod and the router, none for a gone pod.
    let router: BTreeSet<String> = super::used(&cluster.cilium_node("node-k").expect("node"))
        .into_iter()
        .filter(|(_, owner)| owner == "router")
        .map(|(ip, _)| format!("{ip}/32"))
        .collect();
    let pod_range: ipnet::IpNet = "10.88.0.0/24".parse().expect("cidr");
    let in_ipcache: BTreeSet<String> = ipcache_prefixes(agent)
        .into_iter()
        .filter(|p| {
            p.parse::<ipnet::IpNet>()
                .is_ok_and(|p| p.prefix_len() == 32 && pod_range.contains(&p))
        })
        .filter(|p| !router.contains(p))
        .collect();
    let want_ipcache: BTreeSet<String> = want.iter().map(|ip| format!("{ip}/32")).collect();
    assert_eq!(
        in_ipcache, want_ipcache,
        "IPCache host entries vs the live pods"
    );
    let want_veths: BTreeSet<String> = live.iter().map(|p| host_ifname(&p.id, "eth0")).collect();
    assert_eq!(veths(), want_veths, "veths vs the live pods");
    assert_eq!(
        records(agent),
        live.len(),
        "one endpoint record per live pod"
    );
    for pod in live {
        let check = agent.cni(
            "CHECK",
            &pod.id,
            &pod.netns.path().display().to_string(),
            (&pod.ns, &pod.name),
        );
        assert_eq!(check.code, 0, "CHECK {}: {}", pod.name, check.stdout);
    }
    for pod in &live[1..] {
        assert!(ping(&live[0], pod.ips[0]), "{} answers", pod.name);
    }
}

#[test]
fn sigkill_inside_add_map_update_and_status_write_loses_and_duplicates_nothing() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    let mut agent = crd_agent(&cluster, "node-k", 64, None);
    // Replay a failed run with the seed its output names.
    let seed = std::env::var("WEFT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("seed {seed} (replay with WEFT_TEST_SEED={seed})");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut live: Vec<Pod> = (0..4)
        .map(|i| add(&agent, "web", &format!("k{i}")))
        .collect();
    let mut kills = [0_u32; 3];
    let (mut completed, mut interrupted, mut queued) = (0, 0, 0);
    for round in 0..24 {
        let step = Step::ALL[round % Step::ALL.len()];
        agent.kill();
        agent.env = vec![(ENV.to_owned(), format!("{}=delay:{HOLD_MS}", step.point()))];
        agent.spawn();
        agent.wait_ready(Duration::from_secs(30));
        let kill_at = Duration::from_millis(rng.u64(0..HOLD_MS + 100));
        let before = holds(&agent, step.point());
        let name = format!("r{round}");
        match step {
            Step::Add | Step::MapUpdate => {
                let netns = NamedNetNs::new();
                let id = unique("ctr-");
                let call = add_in_background(&agent, &id, &netns, &name);
                wait_hold(&agent, step.point(), before + 1);
                std::thread::sleep(kill_at);
                agent.kill();
                let answer = call.join().expect("the ADD thread");
                let pod = Pod {
                    netns,
                    id,
                    ns: "web".to_owned(),
                    name,
                    ips: Vec::new(),
                };
                if answer.code == 0 {
                    completed += 1;
                    live.push(Pod {
                        ips: ips_of(&answer),
                        ..pod
                    });
                } else {
                    // As kubelet does: a failed ADD is followed by a DEL (queued: no agent).
                    interrupted += 1;
                    del(&agent, &pod);
                }
            }
            Step::StatusWrite => {
                if live.len() > 4 && rng.bool() {
                    let pod = live.swap_remove(rng.usize(..live.len()));
                    del(&agent, &pod);
                } else {
                    live.push(add(&agent, "web", &name));
                }
                wait_hold(&agent, step.point(), before + 1);
                std::thread::sleep(kill_at);
                agent.kill();
            }
        }
        kills[round % Step::ALL.len()] += 1;
        // Now and then a pod goes while no agent runs: its DEL waits in the queue.
        if live.len() > 2 && rng.f32() < 0.25 {
            let pod = live.swap_remove(rng.usize(..live.len()));
            del(&agent, &pod);
            queued += 1;
        }
    }
    agent.env.clear();
    let started = Instant::now();
    agent.spawn();
    agent.wait_ready(Duration::from_secs(30));
    for i in 0..3 {
        live.push(add(&agent, "web", &format!("after{i}")));
    }

    assert_consistent(&cluster, &agent, &live);
    wait_for(
        "status.ipam.used to equal the live pods",
        DEBOUNCE * 10,
        || converged(&cluster, "node-k", &live),
    );
    println!(
        "sigkill (seed {seed}): {} kills (inside ADD's datapath step {}, a map update {}, a \
         status write {}); ADDs that completed before the kill {completed}, interrupted (then \
         DELed) {interrupted}; DELs queued while down {queued}; {} pods alive, each checked for \
         a unique address, endpoint entry, veth, record, CNI CHECK and a ping; \
         status.ipam.used converged {:.1?} after the last start",
        kills.iter().sum::<u32>(),
        kills[0],
        kills[1],
        kills[2],
        live.len(),
        started.elapsed()
    );
}

/// A pod slot of the churn test: a network namespace reused by successive containers.
struct Slot {
    netns: NamedNetNs,
    /// The container in it now, and its pod name.
    current: Option<(String, String)>,
}

/// The value of an unlabelled-by-pool gauge line `name{…} value` in `/metrics`.
/// Wait, bounded (10 s), for the background finishes of the last DELs, answered before their
/// veths were deleted (the sandboxes live): the veth, then the record, then the release. The
/// caller's checks then say what is left.
fn settle_finishes(agent: &Agent, used_before: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(veths().is_empty()
        && records(agent) == 0
        && gauge(agent, "weft_ipam_used_ips") == used_before)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn gauge(agent: &Agent, name: &str) -> u64 {
    let (status, body) = agent.http_get("/metrics");
    assert_eq!(status, 200);
    body.lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{body}"))
}

/// A failed ADD of container `id` (pod `name`) in `netns` answered the datapath error for an
/// injected fault and left neither veth nor pod interface; the point it failed at.
fn assert_rolled_back(netns: &NamedNetNs, id: &str, name: &str, call: &CniCall) -> &'static str {
    let details = call.stdout["details"].as_str().unwrap_or_default();
    let point = ["veth", "routes", "map-update"]
        .into_iter()
        .find(|p| details.contains(&format!("fault injected at {p} ")))
        .unwrap_or_else(|| {
            panic!(
                "ADD {name} failed without an injected fault: {}",
                call.stdout
            )
        });
    let host = host_ifname(id, "eth0");
    let left = Command::new("ip")
        .args(["link", "show", "dev", &host])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("ip link");
    assert!(
        !left.success(),
        "failed ADD {name} at {point} left veth {host}"
    );
    let inside = Command::new("ip")
        .args(["-n", &netns.name, "link", "show", "eth0"])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("ip -n link");
    assert!(
        !inside.success(),
        "failed ADD {name} at {point} left eth0 in the pod"
    );
    point
}

/// CHECK, then DEL, every pod left in `slots`; how many of each.
fn check_and_del(agent: &Agent, slots: &mut [Slot]) -> (u32, u32) {
    let (mut checks, mut dels) = (0, 0);
    for slot in slots {
        let netns = slot.netns.path().display().to_string();
        if let Some((id, name)) = slot.current.take() {
            let check = agent.cni("CHECK", &id, &netns, ("web", &name));
            assert_eq!(check.code, 0, "CHECK {name}: {}", check.stdout);
            checks += 1;
            let call = agent.cni("DEL", &id, &netns, ("web", &name));
            assert_eq!(call.code, 0, "DEL {name}: {}", call.stdout);
            dels += 1;
        }
    }
    (checks, dels)
}

#[test]
fn a_thousand_add_del_cycles_with_datapath_failures_leak_nothing() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    // 7% at each of three points inside the datapath step: about one ADD in five fails.
    let agent = crd_agent(
        &cluster,
        "node-l",
        16,
        Some("veth=fail:7,routes=fail:7,map-update=fail:7"),
    );
    let ipcache_before = ipcache_prefixes(&agent);
    let used_before = gauge(&agent, "weft_ipam_used_ips");
    let mut slots: Vec<Slot> = (0..8)
        .map(|_| Slot {
            netns: NamedNetNs::new(),
            current: None,
        })
        .collect();
    let started = Instant::now();
    let (mut ok, mut dels) = (0, 0);
    let mut failed = std::collections::BTreeMap::<&str, u32>::new();
    for cycle in 0..CYCLES {
        let slot = &mut slots[cycle % 8];
        let netns = slot.netns.path().display().to_string();
        if let Some((id, name)) = slot.current.take() {
            let call = agent.cni("DEL", &id, &netns, ("web", &name));
            assert_eq!(call.code, 0, "DEL {name}: {}", call.stdout);
            dels += 1;
        }
        let id = unique("ctr-");
        let name = format!("c{cycle}");
        let call = agent.cni("ADD", &id, &netns, ("web", &name));
        if call.code == 0 {
            ok += 1;
            slot.current = Some((id, name));
            continue;
        }
        // A failed ADD answers the datapath error and leaves nothing behind, without a DEL.
        assert_eq!(
            call.stdout["code"],
            code::DATAPATH_FAILED,
            "ADD {name}: {}",
            call.stdout
        );
        *failed
            .entry(assert_rolled_back(&slot.netns, &id, &name, &call))
            .or_default() += 1;
    }
    let (check_calls, last_dels) = check_and_del(&agent, &mut slots);
    dels += last_dels;
    let churn = started.elapsed();
    let fails: u32 = failed.values().sum();
    assert!(
        fails > 0 && ok > 0,
        "faults were injected and ADDs succeeded"
    );
    assert_eq!(
        agent.log().matches("injecting a failure at ").count(),
        usize::try_from(fails).expect("count"),
        "every injected failure failed its ADD"
    );

    settle_finishes(&agent, used_before);
    let veths_left = veths();
    let endpoints_left = endpoint_ips(&agent);
    let ipcache_after = ipcache_prefixes(&agent);
    let ipcache_leaked: Vec<_> = ipcache_after.difference(&ipcache_before).collect();
    let records_left = records(&agent);
    let used_after = gauge(&agent, "weft_ipam_used_ips");
    println!(
        "churn with datapath faults: {CYCLES} ADDs in {churn:.1?}: {ok} succeeded, {fails} failed \
         ({failed:?}) each with CNI error {} and rolled back; {dels} DELs, {check_calls} CHECKs; \
         leaked: veths {}, endpoint entries {}, IPCache entries {}, records {}, allocator \
         addresses {} (used {used_before} before, {used_after} after)",
        code::DATAPATH_FAILED,
        veths_left.len(),
        endpoints_left.len(),
        ipcache_leaked.len(),
        records_left,
        used_after.saturating_sub(used_before),
    );
    assert!(veths_left.is_empty(), "leaked veths: {veths_left:?}");
    assert!(
        endpoints_left.is_empty(),
        "leaked endpoints: {endpoints_left:?}"
    );
    assert!(
        ipcache_leaked.is_empty(),
        "leaked IPCache entries: {ipcache_leaked:?}"
    );
    assert_eq!(records_left, 0, "leaked endpoint records");
    assert_eq!(used_after, used_before, "leaked allocator addresses");
    wait_for(
        "status.ipam.used to hold only the router",
        DEBOUNCE * 10,
        || converged(&cluster, "node-l", &[]),
    );
}

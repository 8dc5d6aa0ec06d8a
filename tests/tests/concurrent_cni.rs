//! CNI requests at once against the real agent (`weft-agent run` in a private node namespace,
//! `weft-cni` processes as a runtime makes them): 20 pods ADDed and then DELed by 20
//! processes at a time are all wired, with distinct addresses, and leave nothing behind; the
//! same container id ADDed by 5 processes at once ends as one attachment with one address. A
//! DEL answered before its veth is deleted: the next ADD in the same sandbox waits for it, and
//! an agent killed before it finished finishes it at the next start.

use std::{
    collections::BTreeSet,
    net::IpAddr,
    path::Path,
    process::Command,
    sync::Barrier,
    thread,
    time::{Duration, Instant},
};

use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, NODE1_WITH_A_24, Pod, add, del, example_store, ips_of, ping},
    containerd::{pinned_endpoints, pinned_ifaces},
    require_root, wait_for,
};

fn agent() -> Agent {
    agent_with_faults(None)
}

/// [`agent`] with `WEFT_TEST_FAULTS` set to `faults`.
fn agent_with_faults(faults: Option<&str>) -> Agent {
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--enable-ipv6",
            "false",
            "--ipam-multi-pool-pre-allocation",
            "default=8",
        ],
    );
    agent.put_doc("ciliumnodes/node1.yaml", NODE1_WITH_A_24);
    // Multi-pool selection reads each pod.
    let names = (0..20).map(|i| format!("p{i}"));
    for name in names.chain(["web".to_owned()]) {
        let doc = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n\
             spec:\n  nodeName: node1\n"
        );
        agent.put_doc(&format!("pods/default/{name}.yaml"), &doc);
    }
    if let Some(faults) = faults {
        agent.env = vec![("WEFT_TEST_FAULTS".to_owned(), faults.to_owned())];
    }
    agent.start();
    agent
}

/// The host-side veths weft made in the calling thread's namespace.
fn host_veths() -> Vec<String> {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link show");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .filter(|name| name.starts_with("wft"))
        .collect()
}

/// The endpoint records the agent keeps.
fn records(agent: &Agent) -> Vec<String> {
    let dir = agent.state.join("endpoints");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| Path::new(name).extension().is_some_and(|x| x == "json"))
        .collect()
}

#[test]
fn twenty_concurrent_adds_and_dels_wire_every_pod_and_leave_nothing() {
    require_root();
    let _node = ThreadNetNs::new();
    let agent = agent();
    let barrier = Barrier::new(20);
    let pods: Vec<Pod> = thread::scope(|s| {
        let workers: Vec<_> = (0..20)
            .map(|i| {
                let (agent, barrier) = (&agent, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    add(agent, "default", &format!("p{i}"))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("ADD thread"))
            .collect()
    });
    let addrs: BTreeSet<IpAddr> = pods.iter().flat_map(|p| p.ips.iter().copied()).collect();
    assert_eq!(
        addrs.len(),
        20,
        "20 pods, one address each, all distinct: {addrs:?}"
    );
    let unreachable: Vec<String> = pods
        .iter()
        .enumerate()
        .filter(|(i, pod)| !ping(pod, pods[(i + 1) % pods.len()].ips[0]))
        .map(|(i, pod)| format!("{} -> p{}", pod.name, (i + 1) % pods.len()))
        .collect();
    assert!(unreachable.is_empty(), "unreachable: {unreachable:?}");
    let endpoints = pinned_endpoints(&agent.pin_dir);
    assert_eq!(
        endpoints.keys().copied().collect::<BTreeSet<_>>(),
        addrs,
        "one endpoint entry per pod address"
    );
    assert_eq!(host_veths().len(), 20, "one host veth per pod");

    let barrier = Barrier::new(20);
    thread::scope(|s| {
        for pod in &pods {
            let (agent, barrier) = (&agent, &barrier);
            s.spawn(move || {
                barrier.wait();
                del(agent, pod);
            });
        }
    });
    assert_eq!(pinned_endpoints(&agent.pin_dir).len(), 0, "endpoints left");
    assert_eq!(
        pinned_ifaces(&agent.pin_dir),
        Vec::<u32>::new(),
        "interface entries left"
    );
    // A DEL answers once the pod's map entries are gone; its veth and its record go in the
    // background right after.
    wait_for("the DELs to finish", Duration::from_secs(10), || {
        let (veths, records) = (host_veths(), records(&agent));
        (veths.is_empty() && records.is_empty())
            .then_some(())
            .ok_or_else(|| format!("host veths {veths:?}, records {records:?}"))
    });
}

#[test]
fn one_container_id_added_by_five_processes_at_once_is_one_attachment() {
    require_root();
    let _node = ThreadNetNs::new();
    let agent = agent();
    let netns = NamedNetNs::new();
    let path = netns.path().display().to_string();
    let barrier = Barrier::new(5);
    let answers: Vec<Vec<IpAddr>> = thread::scope(|s| {
        let workers: Vec<_> = (0..5)
            .map(|_| {
                let (agent, barrier, path) = (&agent, &barrier, &path);
                s.spawn(move || {
                    barrier.wait();
                    let call = agent.cni("ADD", "same-ctr", path, ("default", "web"));
                    assert_eq!(call.code, 0, "ADD: {}", call.stdout);
                    ips_of(&call)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("ADD thread"))
            .collect()
    });
    assert!(
        answers
            .iter()
            .all(|ips| ips.len() == 1 && *ips == answers[0]),
        "every ADD of the same attachment gets the same one address: {answers:?}"
    );
    let endpoints = pinned_endpoints(&agent.pin_dir);
    assert_eq!(
        endpoints.keys().copied().collect::<Vec<_>>(),
        answers[0],
        "one endpoint entry, the answered address"
    );
    assert_eq!(host_veths().len(), 1, "one host veth: {:?}", host_veths());
    assert_eq!(records(&agent).len(), 1, "one endpoint record");
    let pod_links = netns
        .command("ip")
        .args(["-o", "addr", "show", "dev", "eth0"])
        .output()
        .expect("ip addr");
    let text = String::from_utf8_lossy(&pod_links.stdout);
    assert_eq!(
        text.matches(" inet ").count(),
        1,
        "one address on the pod's eth0: {text}"
    );
    assert!(text.contains(&answers[0][0].to_string()), "{text}");
}

/// The record of `id` on eth0, if any.
fn record_of(agent: &Agent, id: &str) -> Option<serde_json::Value> {
    let text = std::fs::read(agent.state.join(format!("endpoints/{id}_eth0.json"))).ok()?;
    Some(serde_json::from_slice(&text).expect("a record parses"))
}

#[test]
fn an_add_in_the_sandbox_of_an_unfinished_del_waits_for_it() {
    require_root();
    let _node = ThreadNetNs::new();
    // Every DEL's background half holds for 2 s before it deletes the veth.
    let agent = agent_with_faults(Some("finish=delay:2000"));
    let first = add(&agent, "default", "p0");
    let started = Instant::now();
    del(&agent, &first);
    let answered = started.elapsed();
    assert!(
        record_of(&agent, &first.id).is_some_and(|r| r["deleting"] == true),
        "DEL answered with its record marked deleting (answered in {answered:?})"
    );
    assert_eq!(
        host_veths().len(),
        1,
        "the veth is deleted after the answer"
    );
    assert!(
        pinned_endpoints(&agent.pin_dir).is_empty(),
        "the endpoint entry is gone before the answer"
    );
    // The runtime reuses the sandbox: eth0 there is still the first pod's until the DEL
    // finishes, and the ADD must wait for that rather than fail on it or take it over.
    assert!(
        record_of(&agent, &first.id).is_some(),
        "the DEL is unfinished"
    );
    let call = agent.cni(
        "ADD",
        "second",
        &first.netns.path().display().to_string(),
        ("default", "p1"),
    );
    assert_eq!(call.code, 0, "ADD in the same sandbox: {}", call.stdout);
    assert!(record_of(&agent, &first.id).is_none(), "first record left");
    assert_eq!(host_veths().len(), 1, "one host veth: {:?}", host_veths());
    assert!(agent.log().contains("holding at finish"), "{}", agent.log());
}

#[test]
fn a_del_answered_before_the_agent_was_killed_is_finished_at_the_next_start() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = agent_with_faults(Some("finish=delay:60000"));
    let pod = add(&agent, "default", "p0");
    del(&agent, &pod);
    assert!(
        record_of(&agent, &pod.id).is_some_and(|r| r["deleting"] == true),
        "the DEL is unfinished"
    );
    assert_eq!(host_veths().len(), 1, "its veth is still there");
    agent.kill();
    agent.env.clear();
    agent.start();
    assert!(record_of(&agent, &pod.id).is_none(), "record left");
    assert_eq!(host_veths(), Vec::<String>::new(), "host veths left");
    let address = pod.ips[0].to_string();
    wait_for(
        "the address to leave status.ipam.used",
        Duration::from_secs(10),
        || {
            let used = agent.node_doc()["status"]["ipam"]["used"].clone();
            used.get(&address)
                .is_none()
                .then_some(())
                .ok_or_else(|| used.to_string())
        },
    );
}

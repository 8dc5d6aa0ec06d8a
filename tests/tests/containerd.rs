//! weft under a container runtime nobody here wrote: containerd 1.6 from Debian's packages,
//! whose `ctr run --cni` reaches `weft-cni` through go-cni and libcni, the path Kubernetes' CRI
//! takes. A private containerd (see `weft_tests::containerd`) runs busybox containers; the
//! real `weft-agent` serves the node (a private network namespace, where `ctr` also runs the
//! plugin) from a copy of `examples/store`.
//!
//! `ctr` passes no `CNI_ARGS`, so the agent maps `CNI_CONTAINERID` = `<ctr namespace>-<id>` to
//! the Pod `<namespace>/<name>`: `ctr -n mars run … rover` is Pod mars/rover. From inside the
//! containers the test checks the address pool (namespace selector for mars/rover, a pod
//! annotation for default/lander), that the gateway answers ARP and ND, and that containers ping
//! each other through the datapath (counters). Then what containerd does on the way out: the
//! foreground `ctr run` deletes the task, and with it the network namespace and the veth, before
//! it sends DEL with an empty `CNI_NETNS`; the DEL must still release the addresses and remove
//! the endpoints. `ctr run -d` never sends a DEL: the same container id run again must get a
//! fresh attachment, not the dead one's replayed result. Finally nothing is left: no task,
//! container, veth, endpoint, record, shim, cgroup or host change.

use std::{
    collections::BTreeSet,
    net::IpAddr,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use ipnet::IpNet;
use serde_json::{Value, json};
use weft_agent::datapath::host_ifname;
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, example_store},
    bin_path,
    containerd::{
        Container, Containerd, PluginTrace, pinned_counters, pinned_endpoints, pinned_ifaces,
    },
    run, wait_until,
};

const FLAGS: [&str; 8] = [
    "--ipam",
    "multi-pool",
    "--enable-ipv6",
    "true",
    "--ipam-multi-pool-pre-allocation",
    "default=8,mars=4",
    "--ipam-cilium-node-update-rate",
    "1s",
];

/// A pod in namespace default whose annotation selects pool mars.
const LANDER: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lander\n  namespace: default\n  \
                      annotations:\n    ipam.cilium.io/ip-pool: mars\nspec:\n  nodeName: node1\n";

const DEFAULT_POOL: [&str; 2] = ["10.200.0.0/27", "fd00:200::/123"];
const MARS_POOL: [&str; 2] = ["10.201.0.0/28", "fd00:201::/124"];

/// MAC of a link in the calling thread's (node) namespace, `None` if there is no such link.
fn link_mac(name: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["-j", "link", "show", "dev", name])
        .output()
        .expect("ip link");
    let links: Value = serde_json::from_slice(&out.stdout).ok()?;
    links[0]["address"].as_str().map(str::to_owned)
}

/// Links in the node namespace named like weft's host-side veths.
fn weft_links() -> Vec<String> {
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

/// `spec.ipam.pools.requested[pool].needed.ipv4-addrs` of the CiliumNode as written back.
fn needed_v4(agent: &Agent, pool: &str) -> Option<u64> {
    let doc = agent.node_doc();
    doc["spec"]["ipam"]["pools"]["requested"]
        .as_array()?
        .iter()
        .find(|r| r["pool"] == pool)?["needed"]["ipv4-addrs"]
        .as_u64()
}

fn record_path(agent: &Agent, container_id: &str) -> std::path::PathBuf {
    agent
        .state
        .join("endpoints")
        .join(format!("{container_id}_eth0.json"))
}

/// The addresses of a CNI result (or `prevResult`).
fn result_ips(result: &Value) -> BTreeSet<IpAddr> {
    result["ips"]
        .as_array()
        .unwrap_or_else(|| panic!("no ips in {result}"))
        .iter()
        .map(|ip| {
            ip["address"]
                .as_str()
                .and_then(|a| a.parse::<IpNet>().ok())
                .unwrap_or_else(|| panic!("bad address in {ip}"))
                .addr()
        })
        .collect()
}

/// libcni's cached result for `container_id`: what containerd got from ADD.
fn cached_ips(ctrd: &Containerd, container_id: &str) -> BTreeSet<IpAddr> {
    let path = ctrd.cached_result("weft", container_id, "eth0");
    let text =
        std::fs::read(&path).unwrap_or_else(|e| panic!("libcni cache {}: {e}", path.display()));
    let cache: Value = serde_json::from_slice(&text).expect("cache JSON");
    result_ips(&cache["result"])
}

fn assert_in_pool(c: &Container<'_>, addrs: &[IpAddr], pool: [&str; 2]) {
    assert_eq!(
        addrs.len(),
        2,
        "{}: one address per family: {addrs:?}",
        c.cni_id()
    );
    for (ip, cidr) in addrs.iter().zip(pool) {
        let net: IpNet = cidr.parse().expect("cidr");
        assert!(
            net.contains(ip),
            "{} got {ip}, outside its pool's {cidr}",
            c.cni_id()
        );
    }
}

/// The gateway answers the container: ARP for the IPv4 one (busybox arping), ND for the IPv6
/// one, both with the MAC of the container's host-side veth, from the datapath's responder.
fn assert_gateway_answers(c: &Container<'_>) {
    let (gw4, gw6) = c.gateways();
    let veth = host_ifname(&c.cni_id(), "eth0");
    let mac = link_mac(&veth).unwrap_or_else(|| panic!("no host veth {veth}"));
    let arping = c.exec(&[
        "arping",
        "-c",
        "1",
        "-w",
        "2",
        "-I",
        "eth0",
        &gw4.to_string(),
    ]);
    let text = String::from_utf8_lossy(&arping.stdout);
    assert!(
        arping.status.success() && text.contains(&format!("[{mac}]")),
        "{}: ARP for gateway {gw4} not answered with {mac}:\n{text}",
        c.cni_id()
    );
    let _ = c.exec(&["ping", "-c", "1", "-W", "1", &gw6.to_string()]);
    let neigh = c.sh("ip -6 neigh show");
    assert!(
        neigh
            .lines()
            .any(|l| l.starts_with(&format!("{gw6} ")) && l.contains(&format!("lladdr {mac}"))),
        "{}: ND for gateway {gw6} not answered with {mac}:\n{neigh}",
        c.cni_id()
    );
}

fn assert_ping(from: &Container<'_>, to: IpAddr) {
    let out = from.exec(&["ping", "-A", "-c", "3", "-W", "2", &to.to_string()]);
    assert!(
        out.status.success(),
        "{} cannot ping {to}:\n{}",
        from.cni_id(),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Kill a container's task and check what its DEL (empty `CNI_NETNS`) undid.
fn kill_and_check_del(ctrd: &Containerd, agent: &Agent, c: &mut Container<'_>, addrs: &[IpAddr]) {
    let id = c.cni_id();
    let veth = host_ifname(&id, "eth0");
    let endpoints = pinned_endpoints(&agent.pin_dir);
    let ifindex = endpoints[&addrs[0]];
    let status = c.kill();
    assert!(
        status.code().is_some(),
        "ctr run {id} ended by a signal: {status}"
    );
    assert!(
        !ctrd.cached_result("weft", &id, "eth0").exists(),
        "libcni keeps the result of {id}: its DEL failed"
    );
    assert!(
        !record_path(agent, &id).exists(),
        "{id}: the record survived DEL"
    );
    let endpoints = pinned_endpoints(&agent.pin_dir);
    for ip in addrs {
        assert!(
            !endpoints.contains_key(ip),
            "{id}: endpoint {ip} survived DEL: {endpoints:?}"
        );
    }
    assert!(
        !pinned_ifaces(&agent.pin_dir).contains(&ifindex),
        "{id}: interface entry {ifindex} survived DEL"
    );
    assert!(link_mac(&veth).is_none(), "{id}: veth {veth} survived DEL");
}

/// What containerd passed on ADD: no `CNI_ARGS`, the task's netns by `/proc` path, eth0.
fn check_add_call(trace: &PluginTrace, container_id: &str) {
    let add = &trace.calls_for("ADD", container_id)[0];
    assert_eq!(
        add.var("ARGS"),
        Some(""),
        "ctr passes no CNI_ARGS: {:?}",
        add.env
    );
    assert_eq!(add.var("IFNAME"), Some("eth0"));
    let netns = add.var("NETNS").unwrap_or_default();
    assert!(
        netns.starts_with("/proc/") && netns.ends_with("/ns/net"),
        "CNI_NETNS {netns}"
    );
    assert!(
        add.stdin.get("prevResult").is_none(),
        "ADD has no prevResult"
    );
}

/// eth0's addresses, checked against what ADD returned to containerd (libcni's cache).
fn addresses(ctrd: &Containerd, c: &Container<'_>) -> Vec<IpAddr> {
    let addrs = c.addresses();
    let cached: Vec<IpAddr> = cached_ips(ctrd, &c.cni_id()).into_iter().collect();
    let mut sorted = addrs.clone();
    sorted.sort();
    assert_eq!(sorted, cached, "{}: eth0 has what ADD returned", c.cni_id());
    addrs
}

/// Every echo request and reply of `pings` redirected pod to pod by the datapath.
fn check_pings(agent: &Agent, pings: &[(&Container<'_>, IpAddr)]) {
    let before = pinned_counters(&agent.pin_dir);
    for (from, to) in pings {
        assert_ping(from, *to);
    }
    let after = pinned_counters(&agent.pin_dir);
    let delta = |k: &str| after[k] - before[k];
    assert!(
        delta("redirect_local") >= 2 * 3 * pings.len() as u64,
        "every echo request and reply redirected pod to pod: {before:?} -> {after:?}"
    );
    assert_eq!(delta("drop_invalid_source"), 0, "{after:?}");
    assert_eq!(delta("drop_redirect_failed"), 0, "{after:?}");
}

/// `ctr run -d`: no DEL, ever. The same id run again must be a fresh attachment.
fn check_detached_then_rerun(ctrd: &Containerd, agent: &Agent, trace: &PluginTrace, peer: IpAddr) {
    ctrd.run_detached("default", "ghost", &["sleep", "600"]);
    let first = cached_ips(ctrd, "default-ghost");
    ctrd.remove("default", "ghost");
    assert!(
        trace.calls_for("DEL", "default-ghost").is_empty(),
        "ctr run -d never sends DEL"
    );
    assert!(
        record_path(agent, "default-ghost").exists(),
        "without a DEL the agent still holds the attachment"
    );
    let mut ghost = ctrd.spawn("default", "ghost", &["sleep", "600"]);
    let ips = ghost.addresses();
    assert_eq!(ips.len(), 2, "the re-run ghost is wired: {ips:?}");
    assert_ping(&ghost, peer);
    let endpoints = pinned_endpoints(&agent.pin_dir);
    let live = endpoints[&ips[0]];
    for ip in &first {
        assert!(
            endpoints.get(ip).is_none_or(|ifindex| *ifindex == live),
            "the first ghost's endpoint {ip} outlived it: {endpoints:?}"
        );
    }
    kill_and_check_del(ctrd, agent, &mut ghost, &ips);
}

/// After every DEL: no endpoint, interface entry, veth, record, task or container is left.
fn check_nothing_left(ctrd: &Containerd, agent: &Agent) {
    assert!(pinned_endpoints(&agent.pin_dir).is_empty());
    assert!(pinned_ifaces(&agent.pin_dir).is_empty());
    assert!(weft_links().is_empty(), "veths left: {:?}", weft_links());
    let records = std::fs::read_dir(agent.state.join("endpoints")).map_or(0, Iterator::count);
    assert_eq!(records, 0, "endpoint records left");
    for ns in ["default", "mars"] {
        let (tasks, containers) = ctrd.leftovers(ns);
        assert!(
            tasks.is_empty() && containers.is_empty(),
            "{ns}: tasks {tasks:?}, containers {containers:?}"
        );
    }
}

#[test]
fn containerd_runs_pods_on_weft() {
    let started = Instant::now();
    let ctrd = Containerd::start();
    for ns in ["default", "mars"] {
        ctrd.import_image(ns);
    }
    let node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &FLAGS);
    agent.put_doc("pods/default/lander.yaml", LANDER);
    agent.start();
    let trace = ctrd.install_traced_plugin(&bin_path("weft-cni"));
    ctrd.install_conflist(&json!({
        "cniVersion": "1.0.0", "name": "weft",
        "plugins": [{"type": "weft-cni", "agent-socket": agent.socket,
                     "delete-queue-dir": agent.delete_queue}],
    }));

    // Container `<ns>/<name>` is Pod `<ns>/<name>` (CNI_CONTAINERID `<ns>-<name>`).
    let mut web = ctrd.spawn("default", "web", &["sleep", "600"]);
    let mut db = ctrd.spawn("default", "db", &["sleep", "600"]);
    let mut rover = ctrd.spawn("mars", "rover", &["sleep", "600"]);
    let mut lander = ctrd.spawn("default", "lander", &["sleep", "600"]);
    check_add_call(&trace, "mars-rover");

    // The right pool, chosen from the store's Pod objects.
    let web_ips = addresses(&ctrd, &web);
    let db_ips = addresses(&ctrd, &db);
    let rover_ips = addresses(&ctrd, &rover);
    let lander_ips = addresses(&ctrd, &lander);
    assert_in_pool(&web, &web_ips, DEFAULT_POOL);
    assert_in_pool(&db, &db_ips, DEFAULT_POOL);
    assert_in_pool(&rover, &rover_ips, MARS_POOL); // namespace mars selects pool mars
    assert_in_pool(&lander, &lander_ips, MARS_POOL); // the Pod's ip-pool annotation

    // The gateway answers, from the datapath.
    let before = pinned_counters(&agent.pin_dir);
    for c in [&web, &db, &rover, &lander] {
        assert_gateway_answers(c);
    }
    let after = pinned_counters(&agent.pin_dir);
    assert!(
        after["neigh_reply"] - before["neigh_reply"] >= 8,
        "4 ARP and 4 ND answers from the datapath: {before:?} -> {after:?}"
    );

    // Containers ping each other through the datapath, within and across pools.
    check_pings(
        &agent,
        &[
            (&web, db_ips[0]),
            (&web, db_ips[1]),
            (&db, web_ips[0]),
            (&rover, web_ips[0]),
            (&lander, rover_ips[0]),
            (&rover, lander_ips[1]),
        ],
    );

    // Pool mars now has 2 addresses in use: demand ceil((2 + 4) / 4) * 4 = 8.
    wait_until("mars demand for 2 pods", Duration::from_secs(15), || {
        needed_v4(&agent, "mars") == Some(8)
    });

    // DEL arrives after the task (its netns and veth) is gone, with an empty CNI_NETNS and
    // ADD's result (from libcni's cache) as prevResult.
    kill_and_check_del(&ctrd, &agent, &mut web, &web_ips);
    let del = &trace.calls_for("DEL", "default-web")[0];
    assert_eq!(del.var("NETNS"), Some(""), "ctr's DEL: {:?}", del.env);
    let prev: Vec<IpAddr> = result_ips(&del.stdin["prevResult"]).into_iter().collect();
    let mut sorted = web_ips.clone();
    sorted.sort();
    assert_eq!(prev, sorted, "DEL's prevResult is ADD's result");

    check_detached_then_rerun(&ctrd, &agent, &trace, db_ips[0]);

    for (c, addrs) in [
        (&mut db, &db_ips),
        (&mut rover, &rover_ips),
        (&mut lander, &lander_ips),
    ] {
        kill_and_check_del(&ctrd, &agent, c, addrs);
    }
    // The addresses went back: mars demand returns to the pre-allocation alone.
    wait_until("mars demand back to 4", Duration::from_secs(15), || {
        needed_v4(&agent, "mars") == Some(4)
    });
    check_nothing_left(&ctrd, &agent);

    let pid = ctrd.pid();
    drop((web, db, rover, lander));
    agent.stop();
    drop(agent);
    drop(node);
    ctrd.shutdown();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "containerd {pid} still runs"
    );
    eprintln!(
        "containerd scenario took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

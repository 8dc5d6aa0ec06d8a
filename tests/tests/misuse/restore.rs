//! Restarts over state that no longer fits: the router address the CiliumNode names
//! (`CiliumInternalIP`), recorded addresses that cannot come back (an address that left
//! `spec.ipam.pool`, a changed podCIDR, a deleted CiliumPodIPPool), a truncated `router.json`,
//! and a queued DEL whose replay fails.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use serde_json::Value;
use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, CniCall, add, example_store},
    bin_path, require_root, unique, wait_for,
};

/// How long the agent gets to converge after a restart.
const PATIENCE: Duration = Duration::from_secs(15);

/// A cluster-pool CiliumNode whose podCIDR is already assigned and whose `spec.addresses`
/// names `internal` as `CiliumInternalIP`.
fn cluster_pool_node(internal: &str) -> String {
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  addresses:\n  \
         - type: InternalIP\n    ip: 192.0.2.10\n  - type: CiliumInternalIP\n    ip: {internal}\n  \
         ipam:\n    podCIDRs:\n    - 10.244.3.0/24\n"
    )
}

const CLUSTER_POOL: [&str; 8] = [
    "--ipam",
    "cluster-pool",
    "--cluster-pool-ipv4-cidr",
    "10.244.0.0/16",
    "--cluster-pool-ipv4-mask-size",
    "24",
    "--ipam-cilium-node-update-rate",
    "200ms",
];

/// A crd-mode CiliumNode whose `spec.ipam.pool` holds `ips`.
fn crd_node(ips: &[&str]) -> String {
    let mut pool = String::new();
    for ip in ips {
        pool.push_str("      ");
        pool.push_str(ip);
        pool.push_str(":\n        resource: eni-1\n");
    }
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  ipam:\n    \
         pool:\n{pool}    min-allocate: 1\n"
    )
}

const CRD: [&str; 4] = ["--ipam", "crd", "--ipam-cilium-node-update-rate", "200ms"];

/// ADD `ns/name` once (no retry) in a fresh namespace.
fn add_once(agent: &Agent, ns: &str, name: &str) -> (NamedNetNs, CniCall) {
    let netns = NamedNetNs::new();
    let call = agent.cni(
        "ADD",
        &unique("ctr-"),
        &netns.path().display().to_string(),
        (ns, name),
    );
    (netns, call)
}

/// The IPv4 address and gateway of a successful ADD.
fn address_and_gateway(call: &CniCall) -> (String, String) {
    assert_eq!(call.code, 0, "ADD failed: {}", call.stdout);
    let ip = &call.stdout["ips"][0];
    let address = ip["address"].as_str().expect("address");
    let address = address.split('/').next().expect("address").to_owned();
    let gateway = ip["gateway"].as_str().expect("gateway").to_owned();
    (address, gateway)
}

/// The `CiliumInternalIP` entries of the own CiliumNode on disk.
fn internal_ips(agent: &Agent) -> Vec<String> {
    agent.node_doc()["spec"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"] == "CiliumInternalIP")
        .filter_map(|a| a["ip"].as_str().map(str::to_owned))
        .collect()
}

/// The IPCache identity of `prefix` as `weft-agent bpf ipcache list` prints it.
fn ipcache_identity(agent: &Agent, prefix: &str) -> Option<Value> {
    let out = Command::new(bin_path("weft-agent"))
        .arg("--pin-dir")
        .arg(&agent.pin_dir)
        .args(["bpf", "ipcache", "list", "-o", "json"])
        .output()
        .expect("weft-agent bpf ipcache list");
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "ipcache rows ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    rows.as_array()
        .expect("rows")
        .iter()
        .find(|r| r["prefix"] == prefix)
        .map(|r| r["identity"].clone())
}

/// `weft-agent status -o json` of `agent`.
fn status_json(agent: &Agent) -> Value {
    let out = Command::new(bin_path("weft-agent"))
        .arg("status")
        .arg("--socket")
        .arg(&agent.socket)
        .args(["-o", "json"])
        .env_remove("WEFT_SOCK")
        .output()
        .expect("weft-agent status");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "status JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The only endpoint record in the agent's state directory.
fn only_record(agent: &Agent) -> PathBuf {
    let dir = agent.state.join("endpoints");
    let records: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(records.len(), 1, "records: {records:?}");
    records[0].clone()
}

fn queued(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count()
    })
}

#[test]
fn a_cilium_internal_ip_inside_the_pod_cidr_becomes_the_router() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &CLUSTER_POOL);
    agent.put_doc("ciliumnodes/node1.yaml", &cluster_pool_node("10.244.3.9"));
    agent.start();
    let (_netns, call) = add_once(&agent, "default", "web");
    let (address, gateway) = address_and_gateway(&call);
    assert_eq!(
        gateway,
        "10.244.3.9",
        "the router must be restored from CiliumInternalIP\n{}",
        agent.log()
    );
    assert_ne!(address, gateway, "a pod got the router's address");
    let saved = std::fs::read_to_string(agent.state.join("router.json")).expect("router.json");
    assert!(saved.contains("10.244.3.9"), "router.json: {saved}");
}

#[test]
fn the_chosen_router_is_written_back_as_cilium_internal_ip() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &CLUSTER_POOL);
    // Outside the node's podCIDR: it cannot be the router.
    agent.put_doc("ciliumnodes/node1.yaml", &cluster_pool_node("10.99.0.1"));
    agent.start();
    let (_netns, call) = add_once(&agent, "default", "web");
    let (_, gateway) = address_and_gateway(&call);
    assert!(gateway.starts_with("10.244.3."), "gateway {gateway}");
    wait_for("CiliumInternalIP to name the router", PATIENCE, || {
        let now = internal_ips(&agent);
        if now == [gateway.clone()] {
            Ok(())
        } else {
            Err(format!("{now:?}"))
        }
    });
    let doc = agent.node_doc();
    assert_eq!(
        doc["spec"]["addresses"][0],
        serde_json::json!({"type": "InternalIP", "ip": "192.0.2.10"}),
        "other addresses stay: {doc}"
    );
    wait_for(
        "the IPCache host entries to follow the router",
        PATIENCE,
        || {
            let router = ipcache_identity(&agent, &format!("{gateway}/32"));
            let stale = ipcache_identity(&agent, "10.99.0.1/32");
            if router == Some(1.into()) && stale.is_none() {
                Ok(())
            } else {
                Err(format!("router {router:?}, stale 10.99.0.1 {stale:?}"))
            }
        },
    );
}

#[test]
fn an_address_that_left_the_crd_pool_is_reported_and_new_pods_proceed() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &CRD);
    let pool = ["10.210.0.10", "10.210.0.11", "10.210.0.12", "10.210.0.13"];
    agent.put_doc("ciliumnodes/node1.yaml", &crd_node(&pool));
    agent.start();
    let web = add(&agent, "default", "web");
    let gone = web.ips[0].to_string();
    agent.stop();
    let left: Vec<&str> = pool.iter().copied().filter(|ip| *ip != gone).collect();
    agent.put_doc("ciliumnodes/node1.yaml", &crd_node(&left));
    agent.start();

    let (_netns, call) = add_once(&agent, "default", "db");
    assert_eq!(
        call.code,
        0,
        "a new pod must not wait for an address that can never come back: {}\n{}",
        call.stdout,
        agent.log()
    );
    let log = agent.log();
    assert!(
        log.lines()
            .any(|l| l.contains(&gone) && l.contains("default/web") && l.contains("not restored")),
        "the log must name the address, its pod and the reason:\n{log}"
    );
    let status = status_json(&agent);
    assert!(
        status["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .any(|p| p
                .as_str()
                .is_some_and(|p| p.contains(&gone) && p.contains("default/web"))),
        "status must list the unrestored address: {status}"
    );
    let record: Value =
        serde_json::from_slice(&std::fs::read(only_record_of(&agent, &web.id)).expect("record"))
            .expect("record JSON");
    assert!(
        record["not_restored"]
            .as_str()
            .is_some_and(|r| r.contains(&gone)),
        "the record must be marked: {record}"
    );

    // --bypass-ip-availability-upon-restore: the address is restored anyway (crd mode).
    agent.stop();
    agent
        .flags
        .push("--bypass-ip-availability-upon-restore".to_owned());
    agent.flags.push("true".to_owned());
    agent.start();
    let status = status_json(&agent);
    assert!(
        !status["problems"].to_string().contains(&gone),
        "bypassed, the address is restored: {status}"
    );
    wait_for(
        "status.ipam.used to hold the bypassed address",
        PATIENCE,
        || {
            let used = agent.node_doc()["status"]["ipam"]["used"][&gone]["owner"].clone();
            if used.as_str().is_some_and(|o| o.starts_with("default/web")) {
                Ok(())
            } else {
                Err(used.to_string())
            }
        },
    );
}

/// The endpoint record of container `id`.
fn only_record_of(agent: &Agent, id: &str) -> PathBuf {
    agent
        .state
        .join("endpoints")
        .join(format!("{id}_eth0.json"))
}

#[test]
fn a_truncated_router_json_stops_the_start_naming_it() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    agent.start();
    let _web = add(&agent, "default", "web");
    agent.stop();
    let path = agent.state.join("router.json");
    let saved = std::fs::read(&path).expect("router.json");
    std::fs::write(&path, &saved[..saved.len() / 2]).expect("truncate router.json");
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    let log = agent.log();
    assert!(
        code.is_some_and(|c| c != 0),
        "an agent with a truncated router.json must refuse to start ({code:?}):\n{log}"
    );
    assert!(
        log.contains(&path.display().to_string()),
        "the error must name {}:\n{log}",
        path.display()
    );
}

#[test]
fn a_queued_del_whose_replay_fails_stays_queued_until_it_succeeds() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    agent.start();
    let web = add(&agent, "default", "web");
    agent.stop();
    let queued_del = agent.cni("DEL", &web.id, "", ("default", "web"));
    assert_eq!(queued_del.code, 0, "queued: {}", queued_del.stdout);
    assert_eq!(queued(&agent.delete_queue), 1, "the DEL is queued");
    // The replay cannot read the pod's record, so the DEL fails.
    let record = only_record(&agent);
    let good = std::fs::read(&record).expect("record");
    std::fs::write(&record, b"{").expect("break the record");
    agent.start();
    assert_eq!(
        queued(&agent.delete_queue),
        1,
        "a DEL whose replay failed must stay queued:\n{}",
        agent.log()
    );
    agent.stop();
    std::fs::write(&record, good).expect("repair the record");
    agent.start();
    assert_eq!(
        queued(&agent.delete_queue),
        0,
        "the DEL is replayed once it can succeed:\n{}",
        agent.log()
    );
    assert!(!record.exists(), "the replayed DEL removed the record");
}

/// An address no longer in the pod CIDR does not hold up the node: the pod it belonged to is
/// listed, and a new pod gets an address (cluster-pool, podCIDR changed while down).
#[test]
fn a_changed_pod_cidr_does_not_wedge_the_node() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &CLUSTER_POOL);
    agent.put_doc("ciliumnodes/node1.yaml", &cluster_pool_node("10.244.3.9"));
    agent.start();
    let web = add(&agent, "default", "web");
    agent.stop();
    let moved = cluster_pool_node("10.244.4.9").replace("10.244.3.0/24", "10.244.4.0/24");
    agent.put_doc("ciliumnodes/node1.yaml", &moved);
    agent.start();
    let (_netns, call) = add_once(&agent, "default", "db");
    let (address, _) = address_and_gateway(&call);
    assert!(address.starts_with("10.244.4."), "{address}");
    let status = status_json(&agent);
    let gone = web.ips[0];
    assert!(
        status["problems"]
            .to_string()
            .contains(&IpAddr::to_string(&gone)),
        "status must list {gone}: {status}"
    );
}

/// The example node with only the `default` pool's CIDRs (multi-pool).
const DEFAULT_POOL_ONLY: &str = "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\n\
                                 spec:\n  addresses:\n  - type: InternalIP\n    ip: 192.0.2.10\n  ipam:\n    \
                                 pools:\n      allocated:\n      - pool: default\n        cidrs:\n        \
                                 - 10.200.0.0/27\n        - fd00:200::/123\n";

/// A pod of a CiliumPodIPPool deleted while the agent was down does not hold up the node
/// (multi-pool); it is listed in `status`.
#[test]
fn a_deleted_pool_does_not_wedge_the_node() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--ipam-cilium-node-update-rate",
            "200ms",
        ],
    );
    agent.start();
    let rover = add(&agent, "mars", "rover");
    agent.stop();
    std::fs::remove_file(agent.store.join("ciliumpodippools/mars.yaml")).expect("delete pool");
    agent.put_doc("ciliumnodes/node1.yaml", DEFAULT_POOL_ONLY);
    agent.start();
    let (_netns, call) = add_once(&agent, "default", "db");
    assert_eq!(
        call.code,
        0,
        "a new pod must not wait for a deleted pool: {}\n{}",
        call.stdout,
        agent.log()
    );
    let status = status_json(&agent);
    let problems = status["problems"].to_string();
    assert!(
        problems.contains("mars/rover") && problems.contains("\\\"mars\\\" does not exist"),
        "status must list the deleted pool's pod {:?}: {status}",
        rover.ips
    );
}

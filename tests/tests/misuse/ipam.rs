//! IPAM input that cannot work, said out loud (issue 16, findings 4, 5 and 11): bad entries of
//! the own CiliumNode (pool keys and addresses are skipped and named; a bad pod CIDR fails the
//! whole object, as in Cilium, and is named with its field path), a pod naming a pool that does
//! not exist, records a new configuration can never restore, and the planner's and `explain`'s
//! exit codes.

use std::{
    fmt::Write as _,
    path::Path,
    process::{Command, Output},
    time::Duration,
};

use serde_json::Value;
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, add, example_store},
    bin_path,
};

/// `weft-agent` with `args`; its output.
fn weft(args: &[&str]) -> Output {
    Command::new(bin_path("weft-agent"))
        .args(args)
        .env_remove("WEFT_SOCK")
        .env_remove("NODE_NAME")
        .output()
        .expect("run weft-agent")
}

/// Stdout and stderr of `out`, for messages.
fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `weft-agent status` of `agent`.
fn status(agent: &Agent) -> Output {
    weft(&["status", "--socket", &agent.socket.display().to_string()])
}

/// `weft-agent ipam simulate` of node `node` over `store`, with `extra` flags.
fn simulate(store: &Path, node: &str, extra: &[&str]) -> Output {
    let store = store.display().to_string();
    let mut args = vec!["ipam", "simulate", "--store", &store, "--node-name", node];
    args.extend_from_slice(extra);
    weft(&args)
}

/// The plan `out` printed; panics unless simulate succeeded.
fn plan_of(out: &Output) -> Value {
    assert!(out.status.success(), "simulate failed: {}", text(out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("plan is not JSON ({e}): {}", text(out)))
}

/// A crd-mode node with `pool` keys and `spec.addresses` `(type, ip)`.
fn crd_node(pool: &[&str], addresses: &[(&str, &str)]) -> String {
    let mut entries = String::new();
    for ip in pool {
        let _ = writeln!(entries, "      {ip}: {{}}");
    }
    let mut listed = String::new();
    for (t, ip) in addresses {
        let _ = writeln!(listed, "  - type: {t}\n    ip: {ip}");
    }
    format!(
        "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  \
         addresses:\n{listed}  ipam:\n    pool:\n{entries}    min-allocate: 1\n"
    )
}

const CRD: [&str; 4] = ["--ipam", "crd", "--ipam-cilium-node-update-rate", "500ms"];

#[test]
fn bad_node_entries_are_named_in_the_log_status_and_simulate_and_the_good_ones_serve() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &CRD);
    agent.put_doc(
        "ciliumnodes/node1.yaml",
        &crd_node(
            &["10.99.0.5", "10.99.0.6", "10.99.0.7", "10.99.0.300"],
            &[
                ("InternalIP", "192.0.2.10"),
                // Not CiliumInternalIP: the agent owns that one and writes its router there.
                ("ExternalIP", "10.99.0.999"),
            ],
        ),
    );
    let bad_key = "spec.ipam.pool[\"10.99.0.300\"]";
    let bad_address = "spec.addresses[1].ip \"10.99.0.999\"";
    let plan = plan_of(&simulate(&agent.store, "node1", &["--ipam", "crd"]));
    let problems = plan["problems"].to_string();
    for path in [bad_key, bad_address] {
        assert!(
            problems.contains(&path.replace('"', "\\\"")),
            "simulate's problems must name {path}: {problems}"
        );
    }
    agent.start();
    let web = add(&agent, "default", "web");
    let db = add(&agent, "default", "db");
    for pod in [&web, &db] {
        assert!(
            pod.ips[0].to_string().starts_with("10.99.0."),
            "the valid pool entries serve: {:?}",
            pod.ips
        );
    }
    let out = status(&agent);
    let shown = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "status must be unhealthy: {shown}"
    );
    for path in [bad_key, bad_address] {
        assert!(shown.contains(path), "status must name {path}: {shown}");
    }
    let log = agent.log();
    for path in [bad_key, bad_address] {
        assert_eq!(
            log.matches(path).count(),
            1,
            "{path} must be logged once:\n{log}"
        );
    }
}

#[test]
fn simulate_fails_for_a_missing_store_or_node_and_says_what_an_exhausted_node_needs() {
    let missing = std::env::temp_dir().join(weft_tests::unique("weft-no-store-"));
    let out = simulate(&missing, "node1", &[]);
    assert!(
        !out.status.success() && text(&out).contains(&missing.display().to_string()),
        "a store directory that does not exist must fail, naming it: {}",
        text(&out)
    );
    assert!(!missing.exists(), "simulate created {}", missing.display());
    let out = simulate(&example_store(), "node9", &["--ipam", "multi-pool"]);
    assert!(
        !out.status.success() && text(&out).contains("node9"),
        "a node not in the store must fail, naming it: {}",
        text(&out)
    );
    // Two addresses for the router and three pods: two more are needed.
    let agent = Agent::new(&example_store(), &CRD);
    agent.put_doc(
        "ciliumnodes/node1.yaml",
        &crd_node(&["10.99.0.5", "10.99.0.6"], &[("InternalIP", "192.0.2.10")]),
    );
    let plan = plan_of(&simulate(&agent.store, "node1", &["--ipam", "crd"]));
    assert_eq!(
        plan["needed"]["ipv4"], 2,
        "an exhausted crd node must say how many more addresses it needs: {plan:#}"
    );
    assert!(
        plan["problems"].to_string().contains("2 more ipv4"),
        "the deficit is a problem too: {plan:#}"
    );
    let plan = plan_of(&simulate(&agent.store, "node1", &["--ipam", "azure"]));
    assert_eq!(plan["needed"]["ipv4"], 2, "azure: {plan:#}");
    // ENI: three addresses on the node's interface for the router and three pods.
    agent.put_doc("ciliumnodes/node1.yaml", ENI_NODE);
    let plan = plan_of(&simulate(&agent.store, "node1", &["--ipam", "eni"]));
    assert_eq!(plan["needed"]["ipv4"], 1, "eni: {plan:#}");
}

const ENI_NODE: &str = "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  \
                        eni: {}\nstatus:\n  eni:\n    enis:\n      eni-1:\n        id: eni-1\n        \
                        ip: 10.0.1.10\n        number: 0\n        addresses: [10.0.1.10, 10.0.1.11, \
                        10.0.1.12]\n        subnet: {id: subnet-1, cidr: 10.0.1.0/24}\n";

#[test]
fn simulate_plans_on_top_of_a_running_agent_s_records() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &CRD);
    agent.put_doc(
        "ciliumnodes/node1.yaml",
        &crd_node(
            &[
                "10.99.0.5",
                "10.99.0.6",
                "10.99.0.7",
                "10.99.0.8",
                "10.99.0.9",
            ],
            &[("InternalIP", "192.0.2.10")],
        ),
    );
    agent.start();
    let web = add(&agent, "default", "web");
    let state = agent.state.display().to_string();
    let plan = plan_of(&simulate(
        &agent.store,
        "node1",
        &["--ipam", "crd", "--state-dir", &state],
    ));
    let web_ip = web.ips[0].to_string();
    assert!(
        plan["pods"]["default/web"]["ips"].get(&web_ip).is_some(),
        "web keeps its recorded {web_ip}: {plan:#}"
    );
    let planned = format!("{}{}", plan["pods"], plan["router"]);
    let taken = planned.matches(&format!("\"{web_ip}\"")).count();
    assert_eq!(taken, 1, "{web_ip} is planned for web only: {plan:#}");
}

/// A pod of namespace `default` annotated with pool `pool`.
fn annotated_pod(name: &str, pool: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  \
         annotations:\n    ipam.cilium.io/ip-pool: {pool}\nspec:\n  nodeName: node1\n"
    )
}

#[test]
fn a_pod_naming_a_missing_pool_is_a_status_problem_and_explain_fails_for_it() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    agent.put_doc("pods/default/typo.yaml", &annotated_pod("typo", "bleu"));
    agent.start();
    let socket = agent.socket.display().to_string();
    let explain = |pod: &str| weft(&["ipam", "explain", pod, "--socket", &socket]);
    let out = explain("default/web");
    assert!(
        out.status.success(),
        "explain of a good pod: {}",
        text(&out)
    );
    let out = explain("default/typo");
    assert!(
        !out.status.success() && text(&out).contains("pool bleu does not exist"),
        "explain must fail saying the pool does not exist: {}",
        text(&out)
    );
    let out = explain("default/nobody");
    assert!(
        !out.status.success() && text(&out).contains("default/nobody"),
        "explain of a pod that does not exist must fail naming it: {}",
        text(&out)
    );
    let out = status(&agent);
    assert!(
        !out.status.success() && text(&out).contains("pod default/typo asks for pool bleu"),
        "status must name the pod and the missing pool: {}",
        text(&out)
    );
}

#[test]
fn records_of_a_family_now_off_are_refused_at_start_naming_them_and_the_fix() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &["--ipam", "multi-pool", "--enable-ipv6=true"],
    );
    agent.start();
    let web = add(&agent, "default", "web");
    assert!(
        web.ips.iter().any(std::net::IpAddr::is_ipv6),
        "dual-stack: {:?}",
        web.ips
    );
    agent.stop();
    agent.flags = ["--ipam", "multi-pool", "--enable-ipv6=false"]
        .map(str::to_owned)
        .to_vec();
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    let log = agent.log();
    assert!(
        code.is_some_and(|c| c != 0),
        "IPv6 records with IPv6 now off must refuse the start ({code:?}):\n{log}"
    );
    let refusal = log.rsplit("weft-agent ready").next().unwrap_or_default();
    for needle in [&agent.state.display().to_string(), "ipv6", "enable-ipv6"] {
        assert!(
            refusal.contains(needle),
            "the refusal must name {needle}:\n{refusal}"
        );
    }
}

#[test]
fn a_bad_pod_cidr_is_named_with_its_field_path_in_status_and_simulate() {
    weft_tests::require_root();
    let _node = ThreadNetNs::new();
    let flags = [
        "--ipam",
        "cluster-pool",
        "--cluster-pool-ipv4-cidr",
        "10.244.0.0/16",
    ];
    let mut agent = Agent::new(&example_store(), &flags);
    let node = "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node1\nspec:\n  \
                addresses:\n  - type: InternalIP\n    ip: 192.0.2.10\n  ipam:\n    podCIDRs:\n    \
                - 10.244.3.0/24\n    - 10.244.999.0/24\n";
    agent.put_doc("ciliumnodes/node1.yaml", node);
    let field = "spec.ipam.podCIDRs[1]";
    let out = simulate(&agent.store, "node1", &flags);
    assert!(
        !out.status.success() && text(&out).contains(field),
        "simulate must fail naming {field}: {}",
        text(&out)
    );
    agent.spawn();
    let mut shown = String::new();
    for _ in 0..100 {
        shown = text(&status(&agent));
        if shown.contains(field) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(shown.contains(field), "status must name {field}: {shown}");
    let doc = std::fs::read_to_string(agent.store.join("ciliumnodes/node1.yaml")).expect("doc");
    assert_eq!(doc, node, "the user's document must stay as written");
}

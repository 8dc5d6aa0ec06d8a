//! `--metrics-naming weft|cilium` against the real programs: the agent (a child process in a
//! private node namespace, pods added through the real `weft-cni` and pinged) and the operator
//! (against the Kubernetes API emulator) are scraped in each naming and every scrape is linted
//! by Prometheus's own `promtool check metrics`. In Cilium's naming the names a Cilium Grafana
//! dashboard queries are there with Cilium's type and labels (IPAM, drops and forwards,
//! endpoints, the process's CPU and memory). The agent honours
//! `prometheus-serve-addr` as a cilium-config key.

use std::{
    io::Write as _,
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::json;
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, add, example_store, http_get},
    kube::Emulator,
    operator::Operator,
    require_root, unique, wait_for,
};

/// The own CiliumNode of a cluster-pool node: the operator gave it 10.4.0.0/24.
const CLUSTER_POOL_NODE: &str = "apiVersion: cilium.io/v2
kind: CiliumNode
metadata:
  name: node1
spec:
  ipam:
    podCIDRs:
    - 10.4.0.0/24
";

/// What `promtool check metrics` finds in Cilium's own operator output too: Cilium's two
/// operation counters are named without `_total`, and weft keeps Cilium's exact names.
const CILIUM_OWN_LINT: [&str; 3] = [
    r#"cilium_operator_ipam_ip_allocation_ops counter metrics should have "_total" suffix"#,
    r#"cilium_operator_ipam_ip_release_ops counter metrics should have "_total" suffix"#,
    r#"cilium_operator_ipam_interface_creation_ops counter metrics should have "_total" suffix"#,
];

/// `promtool check metrics` of `scrape`: every problem it reports, one per line, except the
/// ones Cilium's own output has ([`CILIUM_OWN_LINT`]).
fn promtool_problems(scrape: &str) -> Vec<String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("promtool (Debian's prometheus package; `cargo xtask setup` installs it): {e}")
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(scrape.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let problems: Vec<String> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !CILIUM_OWN_LINT.contains(l))
        .map(str::to_owned)
        .collect();
    assert!(
        out.status.success() || !said.trim().is_empty(),
        "promtool failed without a word: {:?}",
        out.status
    );
    problems
}

fn assert_lint_clean(what: &str, scrape: &str) {
    let problems = promtool_problems(scrape);
    assert!(
        problems.is_empty(),
        "promtool check metrics on {what}:\n{}\n--- scrape:\n{scrape}",
        problems.join("\n")
    );
}

/// The `# TYPE` of `name` and the label names of its first sample.
fn type_and_labels(scrape: &str, name: &str) -> (String, Vec<String>) {
    let kind = scrape
        .lines()
        .find_map(|l| l.strip_prefix(&format!("# TYPE {name} ")))
        .unwrap_or_else(|| panic!("no # TYPE {name} in:\n{scrape}"))
        .to_owned();
    let sample = scrape
        .lines()
        .find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .unwrap_or_else(|| panic!("no sample of {name} in:\n{scrape}"));
    let labels = sample
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(labels, _)| {
            labels
                .split(',')
                .filter_map(|l| l.split_once('=').map(|(n, _)| n.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    (kind, labels)
}

fn value(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in:\n{scrape}"))
}

/// A cluster-pool agent with two pods that pinged each other, `flags` added.
fn agent_with_traffic(flags: &[&str]) -> Agent {
    let mut all = vec!["--ipam", "cluster-pool"];
    all.extend_from_slice(flags);
    let mut agent = Agent::new(&example_store(), &all);
    agent.put_doc("ciliumnodes/node1.yaml", CLUSTER_POOL_NODE);
    agent.start();
    let web = add(&agent, "default", "web");
    let db = add(&agent, "default", "db");
    let ping = web
        .netns
        .command("ping")
        .args(["-n", "-q", "-c", "2", "-i", "0.2", "-W", "1"])
        .arg(db.ips[0].to_string())
        .output()
        .expect("ping");
    assert!(ping.status.success(), "web → db");
    agent
}

#[test]
fn the_agent_in_cilium_naming_serves_ciliums_names_on_the_key_s_address() {
    require_root();
    let _node = ThreadNetNs::new();
    // The listener comes from the cilium-config key, not a flag.
    let config = std::env::temp_dir().join(unique("weft-metrics-naming-config-"));
    std::fs::write(&config, "prometheus-serve-addr: 127.0.0.1:0\n").expect("config");
    let config_arg = config.display().to_string();
    let agent = agent_with_traffic(&["--metrics-naming", "cilium", "--config", &config_arg]);
    let (code, scrape) = http_get(
        &agent.logged_addr("serving Prometheus /metrics"),
        "/metrics",
    );
    assert_eq!(code, 200, "{scrape}");
    let _ = std::fs::remove_file(&config);

    for (name, kind, labels) in [
        ("cilium_ip_addresses", "gauge", &["family"][..]),
        ("cilium_ipam_capacity", "gauge", &["family"]),
        ("cilium_ipam_events_total", "counter", &["action", "family"]),
        (
            "cilium_drop_count_total",
            "counter",
            &["reason", "direction"],
        ),
        (
            "cilium_drop_bytes_total",
            "counter",
            &["reason", "direction"],
        ),
        ("cilium_forward_count_total", "counter", &["direction"]),
        ("cilium_forward_bytes_total", "counter", &["direction"]),
        ("cilium_endpoint_state", "gauge", &["endpoint_state"]),
        ("cilium_endpoint", "gauge", &[]),
        ("cilium_process_cpu_seconds_total", "counter", &[]),
        ("cilium_process_resident_memory_bytes", "gauge", &[]),
    ] {
        let (got_kind, got_labels) = type_and_labels(&scrape, name);
        assert_eq!(got_kind, kind, "{name}");
        assert_eq!(got_labels, labels, "{name}");
    }
    // Two pods and the router; two allocations through CNI; pod traffic forwarded.
    assert!((value(&scrape, r#"cilium_ip_addresses{family="ipv4"}"#) - 3.0).abs() < 0.5);
    assert!((value(&scrape, r#"cilium_ipam_capacity{family="ipv4"}"#) - 254.0).abs() < 0.5);
    assert!(
        (value(
            &scrape,
            r#"cilium_ipam_events_total{action="allocate",family="ipv4"}"#
        ) - 2.0)
            .abs()
            < 0.5
    );
    assert!(value(&scrape, r#"cilium_forward_count_total{direction="EGRESS"}"#) >= 4.0);
    assert!((value(&scrape, r#"cilium_endpoint_state{endpoint_state="ready"}"#) - 2.0).abs() < 0.5);
    // The weft metrics Cilium has no equivalent of keep their name.
    value(&scrape, r#"weft_ipam_available_ips{target_node="node1"}"#);
    assert_lint_clean("the agent's /metrics in cilium naming", &scrape);
}

#[test]
fn the_agent_in_weft_naming_is_lint_clean_and_has_no_cilium_name() {
    require_root();
    let _node = ThreadNetNs::new();
    let agent = agent_with_traffic(&[]);
    let (code, scrape) = agent.http_get("/metrics");
    assert_eq!(code, 200, "{scrape}");
    assert!(!scrape.contains("cilium_"), "{scrape}");
    value(&scrape, r#"weft_endpoints{state="ready"}"#);
    assert_lint_clean("the agent's /metrics in weft naming", &scrape);
}

/// A cluster-pool operator with two nodes that got their blocks, `naming` chosen.
fn operator_with_nodes(emu: &Emulator, naming: &str) -> (Operator, std::path::PathBuf) {
    let kubeconfig = std::env::temp_dir().join(unique("weft-metrics-naming-kubeconfig-"));
    emu.write_kubeconfig(&kubeconfig);
    for name in ["n1", "n2"] {
        emu.put(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name},
        }));
        emu.put(json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": name},
            "spec": {"ipam": {}},
        }));
    }
    let mut op = Operator::new(
        &kubeconfig,
        &[
            "--leader-election=false",
            "--cluster-pool-ipv4-cidr",
            "10.200.0.0/22",
            "--cluster-pool-ipv4-mask-size",
            "24",
            "--metrics-naming",
            naming,
        ],
    );
    op.spawn();
    wait_for("both nodes to get a block", Duration::from_secs(20), || {
        let blocks = emu
            .list("ciliumnodes")
            .iter()
            .filter(|n| n["spec"]["ipam"]["podCIDRs"][0].is_string())
            .count();
        (blocks == 2)
            .then_some(())
            .ok_or(format!("{blocks} blocks"))
    });
    (op, kubeconfig)
}

#[test]
fn the_operator_in_cilium_naming_serves_ciliums_operator_names() {
    let emu = Emulator::start();
    let (op, kubeconfig) = operator_with_nodes(&emu, "cilium");
    let scrape = wait_for(
        "a scrape that counts both nodes",
        Duration::from_secs(20),
        || {
            let scrape = op.metrics();
            let total = scrape
                .lines()
                .find_map(|l| l.strip_prefix(r#"cilium_operator_ipam_nodes{category="total"} "#))
                .map(str::to_owned);
            (total.as_deref() == Some("2"))
                .then_some(scrape.clone())
                .ok_or(scrape)
        },
    );
    let _ = std::fs::remove_file(&kubeconfig);
    for (name, kind, labels) in [
        ("cilium_operator_ipam_nodes", "gauge", &["category"][..]),
        (
            "cilium_operator_ipam_available_ips",
            "gauge",
            &["target_node"],
        ),
        ("cilium_operator_ipam_used_ips", "gauge", &["target_node"]),
        ("cilium_operator_ipam_needed_ips", "gauge", &["target_node"]),
        ("cilium_operator_ipam_resync_total", "counter", &[]),
        ("cilium_operator_process_cpu_seconds_total", "counter", &[]),
        (
            "cilium_operator_process_resident_memory_bytes",
            "gauge",
            &[],
        ),
    ] {
        let (got_kind, got_labels) = type_and_labels(&scrape, name);
        assert_eq!(got_kind, kind, "{name}");
        assert_eq!(got_labels, labels, "{name}");
    }
    // A /24 per node: its capacity, as Cilium's operator reports `available_ips`.
    assert!(
        (value(
            &scrape,
            r#"cilium_operator_ipam_available_ips{target_node="n1"}"#
        ) - 256.0)
            .abs()
            < 0.5
    );
    assert!(!scrape.contains("weft_operator_ipam_nodes"), "{scrape}");
    value(&scrape, "weft_operator_leader");
    assert_lint_clean("the operator's /metrics in cilium naming", &scrape);
}

#[test]
fn the_operator_in_weft_naming_is_lint_clean_and_has_no_cilium_name() {
    let emu = Emulator::start();
    let (op, kubeconfig) = operator_with_nodes(&emu, "weft");
    let scrape = op.metrics();
    let _ = std::fs::remove_file(&kubeconfig);
    assert!(!scrape.contains("cilium_"), "{scrape}");
    value(&scrape, r#"weft_operator_ipam_nodes{category="total"}"#);
    assert_lint_clean("the operator's /metrics in weft naming", &scrape);
}

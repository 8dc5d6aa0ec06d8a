//! `/metrics` and `weft-agent status` against the real agent (a child process in a private
//! node namespace) with pods added through the real `weft-cni`: the scrape carries real values
//! (used IPs = pods + router, allocation operations, datapath counters that move after a
//! ping, map entries, CiliumNode writes), `status` prints Cilium's IPAM line and exits 0, its
//! JSON agrees, a broken store document makes it exit 1 naming the document, and `status`
//! without an agent fails with the socket and how to start one.

use std::{
    path::Path,
    process::{Command, Output},
    time::{Duration, Instant},
};

use serde_json::Value;
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, add, del, example_store, http_get},
    bin_path, require_root, unique, wait_for,
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

/// The text of the sample `series` (name and labels exactly as exported) in a scrape.
fn sample_text<'a>(scrape: &'a str, series: &str) -> &'a str {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{scrape}"))
}

/// The value of an integer sample (counters, gauges, histogram counts).
fn sample(scrape: &str, series: &str) -> u64 {
    let text = sample_text(scrape, series);
    text.parse()
        .unwrap_or_else(|e| panic!("{series} = {text}: {e}"))
}

fn scrape(agent: &Agent) -> String {
    let (code, body) = agent.http_get("/metrics");
    assert_eq!(code, 200, "/metrics: {body}");
    body
}

fn status(args: &[&str]) -> Output {
    Command::new(bin_path("weft-agent"))
        .arg("status")
        .args(args)
        .env_remove("WEFT_SOCK")
        .output()
        .expect("run weft-agent status")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn metrics_and_status_show_pods_allocations_and_datapath_counters() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &["--ipam", "cluster-pool"]);
    agent.put_doc("ciliumnodes/node1.yaml", CLUSTER_POOL_NODE);
    agent.start();
    let before = scrape(&agent);
    let redirected = r#"weft_datapath_packets_total{reason="redirect_local",verdict="redirected"}"#;
    let redirected_before = sample(&before, redirected);

    let web = add(&agent, "default", "web");
    let db = add(&agent, "default", "db");
    let ping = web
        .netns
        .command("ping")
        .args(["-n", "-q", "-c", "3", "-i", "0.2", "-W", "1"])
        .arg(db.ips[0].to_string())
        .output()
        .expect("ping");
    assert!(ping.status.success(), "web → db: {}", text(&ping.stdout));

    let after = scrape(&agent);
    // Two pods and the router, from the one pool of a cluster-pool node.
    let node = r#"{target_node="node1"}"#;
    assert_eq!(sample(&after, &format!("weft_ipam_used_ips{node}")), 3);
    assert_eq!(
        sample(&after, &format!("weft_ipam_available_ips{node}")),
        251
    );
    assert_eq!(sample(&after, &format!("weft_ipam_needed_ips{node}")), 0);
    let pool = r#"{pool="default",family="ipv4"}"#;
    assert_eq!(
        sample(&after, &format!("weft_ipam_pool_capacity{pool}")),
        254
    );
    assert_eq!(sample(&after, &format!("weft_ipam_pool_used_ips{pool}")), 3);
    // The router is allocated at start-up, not through CNI: two pod allocations.
    assert_eq!(
        sample(&after, &format!("weft_ipam_ip_allocation_ops_total{pool}")),
        2
    );
    assert_eq!(
        sample(
            &after,
            r#"weft_ipam_allocation_duration_seconds_count{outcome="success"}"#
        ),
        2
    );
    // Each echo request and reply went pod → pod through bpf_redirect_peer.
    let redirected_after = sample(&after, redirected);
    assert!(
        redirected_after >= redirected_before + 6,
        "redirect_local {redirected_before} → {redirected_after} after 3 pings"
    );
    assert_eq!(
        sample(&after, r#"weft_bpf_map_entries{map="weft_eps_v1"}"#),
        2,
        "one endpoint per pod"
    );
    assert!(sample(&after, r#"weft_bpf_map_entries{map="weft_ipc_v1"}"#) >= 2);
    assert_eq!(
        sample(
            &after,
            r#"weft_datapath_attachments{program="from_container"}"#
        ),
        2
    );

    status_of_a_cluster_pool_node(&agent);
    println!(
        "scrape excerpt:\n{}",
        after
            .lines()
            .filter(|l| l.starts_with("weft_ipam_") && !l.contains("_bucket")
                || l.contains("redirect_local")
                || l.starts_with("weft_bpf_map_entries"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// `weft-agent status` of the node of the test above (2 pods): Cilium's IPAM line and exit 0,
/// the same in JSON, then exit 1 naming a document that does not parse.
fn status_of_a_cluster_pool_node(agent: &Agent) {
    // `weft-agent status`: Cilium's IPAM line, exit 0.
    let socket = agent.socket.display().to_string();
    let out = status(&["--socket", &socket]);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
    assert!(
        report
            .lines()
            .any(|l| l == "IPAM:                IPv4: 3/254 allocated from 10.4.0.0/24"),
        "{report}"
    );
    assert!(
        report.contains("IPAM mode:           cluster-pool"),
        "{report}"
    );
    assert!(report.contains("Problems:            none"), "{report}");
    println!("weft-agent status:\n{report}");

    let out = status(&["--socket", &socket, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(json["ipam"]["used"], 3);
    assert_eq!(
        json["ipam"]["status"],
        "IPv4: 3/254 allocated from 10.4.0.0/24"
    );
    assert_eq!(json["store"]["kind"], "embedded");
    assert_eq!(json["store"]["synced"], true);
    assert_eq!(json["endpoints"], 2);
    let from_container = json["datapath"]["programs"]
        .as_array()
        .expect("programs")
        .iter()
        .find(|p| p["program"] == "from_container")
        .expect("from_container");
    assert_eq!(from_container["devices"].as_array().map(Vec::len), Some(2));

    // A document that does not parse: status names it and exits 1.
    agent.put_doc(
        "pods/default/broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: [\n",
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = status(&["--socket", &socket]);
        if out.status.code() != Some(0) || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("broken.yaml"), "{report}");
    assert!(report.contains("Degraded"), "{report}");
}

#[test]
fn the_scrape_follows_a_del_and_counts_the_release() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "cluster-pool",
            "--prometheus-serve-addr",
            "127.0.0.1:0",
        ],
    );
    agent.put_doc("ciliumnodes/node1.yaml", CLUSTER_POOL_NODE);
    agent.start();
    let web = add(&agent, "default", "web");
    // The sandbox lives, so the DEL's release follows its answer (with the veth deletion). A
    // scrape reads the usage gauges before the counters, so one taken while the release runs
    // can count it and still show the address in use: wait for a scrape that shows both.
    del(&agent, &web);
    let pool = r#"{pool="default",family="ipv4"}"#;
    let after = wait_for(
        "a scrape with the DEL's release and only the router in use",
        Duration::from_secs(10),
        || {
            let after = scrape(&agent);
            let release_series = format!("weft_ipam_ip_release_ops_total{pool}");
            let released = after.lines().any(|l| l.starts_with(&release_series));
            let used = sample(&after, &format!("weft_ipam_pool_used_ips{pool}"));
            (released && used == 1)
                .then_some(after.clone())
                .ok_or(after)
        },
    );
    assert_eq!(
        sample(&after, &format!("weft_ipam_ip_release_ops_total{pool}")),
        1
    );
    assert_eq!(
        sample(&after, "weft_ipam_release_duration_seconds_count"),
        1
    );
    assert_eq!(
        sample(&after, r#"weft_bpf_map_entries{map="weft_eps_v1"}"#),
        0
    );
    // The second listener serves the same registry.
    let (code, other) = http_get(
        &agent.logged_addr("serving Prometheus /metrics"),
        "/metrics",
    );
    assert_eq!(code, 200, "{other}");
    assert_eq!(sample(&other, &format!("weft_ipam_pool_used_ips{pool}")), 1);
}

#[test]
fn status_without_an_agent_fails_and_says_how_to_start_one() {
    let socket = std::env::temp_dir()
        .join(unique("weft-no-agent-"))
        .join("weft.sock");
    assert!(!Path::new(&socket).exists());
    for extra in [&[][..], &["-o", "json"][..]] {
        let mut args = vec!["--socket", socket.to_str().expect("utf-8")];
        args.extend_from_slice(extra);
        let out = status(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            out.stdout.is_empty(),
            "nothing on stdout: {}",
            text(&out.stdout)
        );
        assert!(stderr.contains("weft-agent is not running"), "{stderr}");
        assert!(stderr.contains(&socket.display().to_string()), "{stderr}");
        assert!(stderr.contains("weft-agent run --node-name"), "{stderr}");
    }
}

#[test]
fn multi_pool_status_lists_each_pool_and_the_scrape_counts_ciliumnode_writes() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--ipam-multi-pool-pre-allocation",
            "default=8,mars=4",
            "--ipam-cilium-node-update-rate",
            "1s",
        ],
    );
    agent.start();
    let _web = add(&agent, "default", "web");
    let _rover = add(&agent, "mars", "rover");
    let written = r#"weft_ciliumnode_writes_total{result="written"}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let s = scrape(&agent);
        if s.contains(written) && sample(&s, written) >= 1 || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(sample(&after, written) >= 1, "spec.ipam.pools written back");
    let last_write: f64 = sample_text(&after, "weft_ciliumnode_last_write_timestamp_seconds")
        .parse()
        .expect("seconds");
    assert!(last_write > 1.7e9, "a Unix time: {last_write}");
    // default: web and the router in 10.200.0.0/27 (30 usable); mars: rover in
    // 10.201.0.0/28 (14 usable).
    for (pool, used, capacity) in [("default", 2, 30), ("mars", 1, 14)] {
        let labels = format!(r#"{{pool="{pool}",family="ipv4"}}"#);
        assert_eq!(
            sample(&after, &format!("weft_ipam_pool_used_ips{labels}")),
            used
        );
        assert_eq!(
            sample(&after, &format!("weft_ipam_pool_capacity{labels}")),
            capacity
        );
        assert_eq!(
            sample(
                &after,
                &format!("weft_ipam_ip_allocation_ops_total{labels}")
            ),
            1
        );
    }

    let out = status(&["--socket", &agent.socket.display().to_string()]);
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}{}", text(&out.stderr));
    let lines: Vec<&str> = report.lines().collect();
    assert!(
        lines.contains(&"IPAM:                2 IPAM pool(s) available"),
        "{report}"
    );
    assert!(
        lines.contains(&"                       default      ipv4: 2/30 used (1 CIDR(s))"),
        "{report}"
    );
    assert!(
        lines.contains(&"                       mars         ipv4: 1/14 used (1 CIDR(s))"),
        "{report}"
    );
    assert!(
        report.contains("CiliumNode writes:   ") && !report.contains("0 written"),
        "{report}"
    );
}

//! Against the API server: every request of the agent's kube-rs client is timed by verb,
//! resource and code in `/metrics`, and `weft-agent status` reports the Kubernetes store as
//! synced with the Node's pod CIDR in its IPAM line.

use std::process::Command;

use weft_tests::{ThreadNetNs, bin_path, require_root};

use super::{Cluster, add};

fn count(scrape: &str, labels: &str) -> u64 {
    let series = format!("weft_k8s_client_api_duration_seconds_count{{{labels}}} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.parse().expect("number"))
}

#[test]
fn api_calls_are_timed_by_verb_resource_and_code_and_status_reports_the_store() {
    require_root();
    let _node = ThreadNetNs::new();
    let cluster = Cluster::start();
    cluster.add_node("node-m", "aws:///eu-west-1a/i-0m", Some("10.78.0.0/24"));
    let mut agent = cluster.agent("node-m", &["--ipam", "kubernetes"]);
    agent.start();
    cluster.add_pod("default", "web-0", "node-m");
    let _pod = add(&agent, "default", "web-0");

    let (code, scrape) = agent.http_get("/metrics");
    assert_eq!(code, 200, "{scrape}");
    for labels in [
        r#"verb="get",resource="nodes",code="200""#,
        r#"verb="list",resource="pods",code="200""#,
        r#"verb="list",resource="ciliumnodes",code="200""#,
        r#"verb="watch",resource="ciliumpodippools",code="200""#,
    ] {
        assert!(count(&scrape, labels) >= 1, "no {labels} in:\n{scrape}");
    }
    assert!(
        !scrape.contains("node-m\",code") && !scrape.contains("resource=\"/"),
        "labels carry no names or paths:\n{scrape}"
    );

    let out = Command::new(bin_path("weft-agent"))
        .args(["status", "-o", "json", "--socket"])
        .arg(&agent.socket)
        .output()
        .expect("weft-agent status");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(status["store"]["kind"], "kubernetes");
    assert_eq!(status["store"]["synced"], true);
    assert_eq!(status["ipam"]["mode"], "kubernetes");
    assert_eq!(
        status["ipam"]["status"], "IPv4: 2/254 allocated from 10.78.0.0/24",
        "the pod and the router"
    );
}

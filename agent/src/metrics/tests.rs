//! The exported text: names, types, labels and values as a scrape sees them, the pools that
//! come and go, the verdict of every counter reason, and the HTTP endpoint's routes.

use std::{
    io::{Read as _, Write as _},
    net::SocketAddr,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use agent_common::reason;

use super::*;
use crate::{
    datapath::{CounterRow, DatapathStats, MapStat, ProgramAttachment},
    ipam::{
        Family,
        manager::{IpamUsage, PoolStat},
    },
};

fn pool(name: &str, family: Family, capacity: u64, used: u64) -> PoolStat {
    PoolStat {
        pool: name.into(),
        family,
        capacity,
        used,
        cidr: None,
        cidrs: 1,
    }
}

fn has(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "missing line {line:?} in:\n{text}"
    );
}

/// Metrics with a value in every part.
fn filled() -> Metrics {
    filled_as(Naming::Weft)
}

/// Metrics with a value in every part, served under `naming`'s names.
pub(super) fn filled_as(naming: Naming) -> Metrics {
    let metrics = Metrics::new("node1", naming);
    metrics.ipam.set_usage(&IpamUsage {
        pools: vec![
            pool("default", Family::V4, 30, 3),
            pool("default", Family::V6, 30, 3),
            pool("mars", Family::V4, 14, 1),
        ],
        needed: 2,
        status: "2 IPAM pool(s) available".into(),
    });
    metrics.ipam.allocated(
        Outcome::Success,
        Duration::from_micros(40),
        &[
            ("default".into(), Family::V6),
            ("default".into(), Family::V4),
        ],
    );
    metrics
        .ipam
        .allocated(Outcome::Failure, Duration::from_micros(10), &[]);
    metrics
        .ipam
        .released(Duration::from_micros(5), &[("mars".into(), Family::V4)]);
    metrics.kube.observe(
        "update",
        "ciliumnodes/status",
        Some(409),
        Duration::from_millis(3),
    );
    metrics
        .kube
        .observe("watch", "pods", None, Duration::from_millis(1));
    let stats = WriteStats::default();
    stats.wrote();
    stats.wrote();
    stats.conflicts.fetch_add(1, Ordering::Relaxed);
    metrics.writes.set(&stats);
    metrics.datapath.set(&DatapathStats {
        counters: vec![
            CounterRow {
                reason: reason::name(reason::REDIRECT_LOCAL),
                packets: 10,
                bytes: 980,
            },
            CounterRow {
                reason: reason::name(reason::DROP_INVALID_SOURCE),
                packets: 5,
                bytes: 490,
            },
        ],
        maps: vec![MapStat {
            name: agent_common::maps::ENDPOINTS,
            entries: 4,
            capacity: 65535,
        }],
        attachments: vec![ProgramAttachment {
            program: agent_common::maps::PROG_FROM_CONTAINER,
            ifname: "wft0".into(),
        }],
    });
    metrics.endpoints.set(EndpointCounts {
        ready: 2,
        creating: 1,
        disconnecting: 0,
    });
    metrics
}

#[test]
fn every_part_encodes_with_its_labels_and_the_weft_prefix() {
    let text = filled().encode().expect("encode");
    has(&text, "# TYPE weft_ipam_available_ips gauge");
    has(&text, r#"weft_ipam_available_ips{target_node="node1"} 67"#);
    has(&text, r#"weft_ipam_used_ips{target_node="node1"} 7"#);
    has(&text, r#"weft_ipam_needed_ips{target_node="node1"} 2"#);
    has(
        &text,
        r#"weft_ipam_pool_capacity{pool="mars",family="ipv4"} 14"#,
    );
    has(
        &text,
        r#"weft_ipam_pool_used_ips{pool="default",family="ipv6"} 3"#,
    );
    has(&text, "# TYPE weft_ipam_ip_allocation_ops_total counter");
    has(
        &text,
        r#"weft_ipam_ip_allocation_ops_total{pool="default",family="ipv4"} 1"#,
    );
    has(
        &text,
        r#"weft_ipam_ip_release_ops_total{pool="mars",family="ipv4"} 1"#,
    );
    has(
        &text,
        "# TYPE weft_ipam_allocation_duration_seconds histogram",
    );
    has(
        &text,
        r#"weft_ipam_allocation_duration_seconds_count{outcome="success"} 1"#,
    );
    has(
        &text,
        r#"weft_ipam_allocation_duration_seconds_count{outcome="failure"} 1"#,
    );
    has(&text, "weft_ipam_release_duration_seconds_count 1");
    has(
        &text,
        r#"weft_k8s_client_api_duration_seconds_count{verb="update",resource="ciliumnodes/status",code="409"} 1"#,
    );
    has(
        &text,
        r#"weft_k8s_client_api_duration_seconds_count{verb="watch",resource="pods",code="error"} 1"#,
    );
    has(&text, r#"weft_ciliumnode_writes_total{result="written"} 2"#);
    has(
        &text,
        r#"weft_ciliumnode_writes_total{result="conflict"} 1"#,
    );
    has(
        &text,
        r#"weft_datapath_packets_total{reason="redirect_local",verdict="redirected"} 10"#,
    );
    has(
        &text,
        r#"weft_datapath_bytes_total{reason="drop_invalid_source",verdict="dropped"} 490"#,
    );
    has(&text, r#"weft_bpf_map_entries{map="weft_eps_v1"} 4"#);
    has(&text, r#"weft_bpf_map_capacity{map="weft_eps_v1"} 65535"#);
    has(
        &text,
        r#"weft_datapath_attachments{program="from_container"} 1"#,
    );
    has(&text, r#"weft_datapath_attachments{program="to_netdev"} 0"#);
    assert!(
        !text.contains("# EOF"),
        "the text format 0.0.4 has no # EOF"
    );
    let last_write = text
        .lines()
        .find_map(|l| l.strip_prefix("weft_ciliumnode_last_write_timestamp_seconds "))
        .expect("last write gauge")
        .parse::<f64>()
        .expect("number");
    assert!(last_write > 1.7e9, "a Unix time: {last_write}");
}

#[test]
fn a_pool_that_goes_away_leaves_the_scrape_and_kernel_counters_are_mirrored() {
    let metrics = Metrics::new("n", Naming::Weft);
    metrics.ipam.set_usage(&IpamUsage {
        pools: vec![pool("mars", Family::V4, 14, 1)],
        ..IpamUsage::default()
    });
    metrics.ipam.set_usage(&IpamUsage {
        pools: vec![pool("default", Family::V4, 30, 2)],
        ..IpamUsage::default()
    });
    let text = metrics.encode().expect("encode");
    assert!(!text.contains(r#"pool="mars""#), "{text}");
    has(
        &text,
        r#"weft_ipam_pool_used_ips{pool="default",family="ipv4"} 2"#,
    );

    let row = |packets| DatapathStats {
        counters: vec![CounterRow {
            reason: reason::name(reason::SNAT),
            packets,
            bytes: packets * 100,
        }],
        ..DatapathStats::default()
    };
    metrics.datapath.set(&row(7));
    metrics.datapath.set(&row(9));
    let text = metrics.encode().expect("encode");
    has(
        &text,
        r#"weft_datapath_packets_total{reason="snat",verdict="masqueraded"} 9"#,
    );
}

#[test]
fn every_reason_has_a_verdict() {
    let expected = [
        ("redirect_local", "redirected"),
        ("pass_stack", "passed"),
        ("neigh_reply", "answered"),
        ("drop_malformed", "dropped"),
        ("drop_invalid_source", "dropped"),
        ("drop_redirect_failed", "dropped"),
        ("netdev_pass", "passed"),
        ("snat", "masqueraded"),
        ("snat_skip_endpoint", "passed"),
        ("snat_skip_excluded", "passed"),
        ("snat_skip_cluster", "passed"),
        ("snat_skip_reply", "passed"),
        ("rev_snat", "passed"),
        ("drop_nat_no_port", "dropped"),
        ("drop_nat_unsupported", "dropped"),
        ("pass_stack_flow", "passed"),
        ("netdev_to_pod", "passed"),
        ("encap", "redirected"),
        ("overlay_to_pod", "redirected"),
        ("overlay_pass", "passed"),
        ("drop_no_tunnel_key", "dropped"),
    ];
    assert_eq!(
        expected.len(),
        reason::COUNT as usize,
        "a new reason needs a verdict here"
    );
    for (why, (name, verdict)) in (0..reason::COUNT).zip(expected) {
        assert_eq!(reason::name(why), name);
        assert_eq!(datapath::verdict(name), verdict, "{name}");
    }
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {answer:?}"));
    (code, answer)
}

#[derive(Debug, Default)]
struct Source(std::sync::atomic::AtomicU64);

impl Refresh for Source {
    fn refresh(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            self.0.fetch_add(1, Ordering::Relaxed);
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_probes_and_metrics_refreshed_per_scrape() {
    let metrics = Arc::new(Metrics::new("node1", Naming::Weft));
    let ready = Readiness::default();
    let endpoint = Endpoint::new(Arc::clone(&metrics), ready.clone());
    let addr = endpoint
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    let source = Arc::new(Source::default());
    endpoint.set_source(Arc::clone(&source) as Arc<dyn Refresh>);
    let answers = tokio::task::spawn_blocking(move || {
        let before = get(addr, "/readyz").0;
        ready.set(true);
        [
            (get(addr, "/healthz"), 200),
            ((before, String::new()), 503),
            (get(addr, "/readyz"), 200),
            (get(addr, "/metrics"), 200),
            (get(addr, "/nope"), 404),
        ]
    })
    .await
    .expect("client");
    for ((code, text), want) in &answers {
        assert_eq!(code, want, "{text}");
    }
    let scrape = &answers[3].0.1;
    assert!(
        scrape.contains("text/plain; version=0.0.4"),
        "content type: {scrape}"
    );
    // Families without a series yet print nothing; the plain histogram always does.
    assert!(
        scrape.contains("# TYPE weft_ipam_release_duration_seconds histogram"),
        "{scrape}"
    );
    assert_eq!(
        source.0.load(Ordering::Relaxed),
        1,
        "one refresh per scrape"
    );
}

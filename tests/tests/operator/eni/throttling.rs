//! 30 s of EC2 throttling (every EC2 action answers 503 `RequestLimitExceeded`) while three
//! nodes need a new ENI, with a small token bucket (`--limit-ipam-api-qps 2`, burst 5): the
//! operator logs each retry with its wait, the nodes' `operator-status` says EC2 throttles,
//! the calls it makes stay inside the bucket (requests less the retries it counted: retries
//! take no token, as in Cilium and the SDKs, spec §3.4), and every node is served once the
//! throttling ends, its error cleared.

use std::time::{Duration, Instant};

use serde_json::json;
use weft_tests::ec2::{ACTIONS, EXAMPLE_NODE_SUBNET, Fault, Scenario, Tags};

use super::{Aws, log_lines};
use crate::wait_for;

const QPS: f64 = 2.0;
const BURST: f64 = 5.0;
const NODES: [(&str, &str); 3] = [
    ("node-t1", "i-0d000000000000001"),
    ("node-t2", "i-0d000000000000002"),
    ("node-t3", "i-0d000000000000003"),
];

/// A counter's sum over its labels.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn thirty_seconds_of_throttling_hold_the_rate_and_converge_after() {
    let mut scenario = Scenario::example();
    for (_, instance) in NODES {
        scenario = scenario.instance(instance, "m5.large", EXAMPLE_NODE_SUBNET, Tags::new());
    }
    let aws = Aws::with(scenario);
    let qps = QPS.to_string();
    let burst = BURST.to_string();
    let mut op = aws.operator(&[
        "--limit-ipam-api-qps",
        &qps,
        "--limit-ipam-api-burst",
        &burst,
    ]);
    op.wait_log(
        "initial synchronization with instances API done",
        Duration::from_secs(30),
    );
    aws.ec2
        .inject(Fault::throttle(None).for_duration(Duration::from_secs(30)));
    let throttled_at = Instant::now();
    for (name, instance) in NODES {
        aws.add_node_with(name, instance, &json!({}));
    }
    aws.wait_error(
        "node-t1",
        &["RequestLimitExceeded"],
        Duration::from_mins(1),
        &op,
    );
    let retry_lines = log_lines(
        &op,
        &[
            "EC2 call will be retried",
            "RequestLimitExceeded",
            "wait_ms",
        ],
    );
    assert!(
        !retry_lines.is_empty(),
        "each retry is logged with its wait:\n{}",
        op.log()
    );
    for (name, _) in NODES {
        aws.wait_pool(name, 8, Duration::from_mins(3), &op);
    }
    assert!(
        throttled_at.elapsed() > Duration::from_secs(30),
        "served only after the throttling"
    );
    for (name, _) in NODES {
        wait_for(
            &format!("{name}'s error to go"),
            Duration::from_secs(30),
            || {
                let error = aws.cluster.operator_error(name);
                error.is_empty().then_some(()).ok_or(error)
            },
        );
    }
    // The rate: EC2 requests (not IMDS or STS) since the operator started.
    let ec2: Vec<Instant> = (aws.ec2.requests().into_iter())
        .filter(|r| ACTIONS.contains(&r.action.as_str()))
        .map(|r| r.at)
        .collect();
    let throttled = (aws.ec2.requests().iter())
        .filter(|r| r.code.as_deref() == Some("RequestLimitExceeded"))
        .count();
    assert!(throttled > 0, "EC2 throttled some");
    let metrics = op.metrics();
    let retries = counter(&metrics, "weft_operator_ec2_api_retries_total");
    let span = ec2
        .last()
        .expect("requests")
        .duration_since(ec2[0])
        .as_secs_f64();
    #[expect(clippy::cast_precision_loss, reason = "a request count")]
    let calls = ec2.len() as f64 - retries;
    assert!(
        calls <= BURST + QPS * span + 2.0,
        "{calls} calls ({} requests, {retries} retries) in {span:.1} s: beyond {BURST} + {QPS}/s",
        ec2.len()
    );
    // The peak: no window holds more than every call of the bucket's envelope tried three
    // times (the SDKs' attempts).
    for (i, start) in ec2.iter().enumerate() {
        for (n, end) in ec2[i..].iter().enumerate() {
            let window = end.duration_since(*start).as_secs_f64();
            #[expect(clippy::cast_precision_loss, reason = "a request count")]
            let count = (n + 1) as f64;
            assert!(
                count <= 3.0 * (BURST + QPS * window + 1.0),
                "{count} requests in {window:.2} s"
            );
        }
    }
    assert!(
        counter(
            &metrics,
            "weft_operator_ec2_api_rate_limit_duration_seconds_count"
        ) > 0.0,
        "the bucket made calls wait"
    );
}

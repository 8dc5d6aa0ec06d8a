//! Call-sequence tests of the writer against a recorder standing in for the API server: every
//! request is recorded with the (paused, virtual) time it was made, and each test compares the
//! whole sequence per node with what it expects, so an unexpected call, a missing one or one
//! in the wrong order fails. No test sleeps: tokio's clock is paused and jumps to the next
//! timer when everything waits, and a test waits for a number of calls, never for quiet.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};
use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};
use weft_cluster_ipam::manager::{SpecPart, Write, status_patch};

use super::{CONCURRENCY, NODE_WRITE_INTERVAL, NodeApi, Op, Part, RETRY_AFTER, Sent, drive};
use crate::cloud::manager::NodePatch;

/// What one request was.
#[derive(Debug, Clone, PartialEq)]
enum Req {
    Status(Value),
    Spec(Value),
    Delete,
    Event(&'static str),
}

/// One recorded request: the node, what, when (from the test's start).
#[derive(Debug, Clone, PartialEq)]
struct Call {
    node: String,
    req: Req,
    at: Duration,
}

/// Each request takes this long.
const LATENCY: Duration = Duration::from_millis(10);

#[derive(Clone)]
struct Recorder {
    start: Instant,
    calls: Arc<Mutex<Vec<Call>>>,
    count: Arc<watch::Sender<usize>>,
    /// (node, `status`/`spec`) requests that fail, once each.
    fail_once: Arc<Mutex<BTreeSet<(String, &'static str)>>>,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl Recorder {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            calls: Arc::default(),
            count: Arc::new(watch::channel(0).0),
            fail_once: Arc::default(),
            in_flight: Arc::default(),
            most_in_flight: Arc::default(),
        }
    }

    fn record(&self, node: &str, req: Req) {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push(Call {
            node: node.to_owned(),
            req,
            at: self.start.elapsed(),
        });
        self.count.send_replace(calls.len());
    }

    async fn request(&self, node: &str, req: Req, part: &'static str) -> Sent {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        self.record(node, req);
        tokio::time::sleep(LATENCY).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let failed = self
            .fail_once
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(node.to_owned(), part));
        if failed { Sent::Failed } else { Sent::Done }
    }

    /// Wait (bounded, in virtual time) until `n` requests were made.
    async fn made(&self, n: usize) {
        let mut count = self.count.subscribe();
        tokio::time::timeout(Duration::from_mins(1), count.wait_for(|c| *c >= n))
            .await
            .unwrap_or_else(|_| panic!("fewer than {n} requests: {:#?}", self.calls()))
            .expect("the recorder lives");
    }

    fn calls(&self) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The requests per node, in order.
    fn by_node(&self) -> BTreeMap<String, Vec<Call>> {
        let mut out: BTreeMap<String, Vec<Call>> = BTreeMap::new();
        for call in self.calls() {
            out.entry(call.node.clone()).or_default().push(call);
        }
        out
    }
}

impl NodeApi for Recorder {
    async fn patch(&self, name: &str, part: Part, patch: &Value) -> Sent {
        let req = match part {
            Part::Status => Req::Status(patch.clone()),
            Part::Spec => Req::Spec(patch.clone()),
        };
        self.request(name, req, part.name()).await
    }

    async fn delete(&self, name: &str) -> Sent {
        self.request(name, Req::Delete, "delete").await
    }

    fn event(&self, object: Value, reason: &'static str, _message: String) {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        self.record(name, Req::Event(reason));
    }
}

fn node(i: usize) -> String {
    format!("node-{i}")
}

fn cidrs(i: usize, round: usize) -> SpecPart {
    SpecPart::PodCidrs(vec![format!("10.{round}.{}.0/24", i % 250)])
}

fn write(i: usize, round: usize, error: Option<&str>) -> Op {
    Op::Write(Write {
        node: node(i),
        spec: Some(cidrs(i, round)),
        error: error.map(str::to_owned),
    })
}

fn reqs(calls: &[Call]) -> Vec<&Req> {
    calls.iter().map(|c| &c.req).collect()
}

/// A burst of 100 nodes (more than the writes in flight), each given two spec parts and an
/// error, some a cloud status patch, one deleted in the same burst; then a second burst of
/// two spec parts each. Per node: the status before the spec, one request per part and burst
/// with the newest part, the second burst's write a whole interval after the first; the
/// nodes in the order they came; never more than [`CONCURRENCY`] in flight.
#[tokio::test(start_paused = true)]
async fn a_burst_is_written_in_order_and_coalesced() {
    const NODES: usize = 100;
    const DELETED: usize = NODES - 1;
    let api = Recorder::new();
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(drive(api.clone(), rx));
    for i in 0..NODES {
        let _ = tx.send(write(i, 0, Some("no room")));
        let _ = tx.send(write(i, 1, None));
        if i % 2 == 0 {
            let _ = tx.send(Op::Patch(NodePatch {
                node: node(i),
                spec: None,
                status: Some(json!({"status": {"azure": {"interfaces": [i]}}})),
                events: Vec::new(),
            }));
        }
    }
    let _ = tx.send(Op::Delete(node(DELETED)));
    let _ = tx.send(Op::Event {
        object: json!({"metadata": {"name": "blue"}}),
        reason: "InvalidPool",
        message: "overlaps".into(),
    });
    // Every node but the deleted one: status + spec; the deleted one: its deletion; the Event.
    let first = 2 * (NODES - 1) + 2;
    api.made(first).await;
    for i in 0..DELETED {
        let _ = tx.send(write(i, 2, None));
        let _ = tx.send(write(i, 3, None));
    }
    drop(tx);
    api.made(first + DELETED).await;
    writer
        .await
        .expect("the writer ends when its channel closes");

    let by_node = api.by_node();
    assert_eq!(by_node.len(), NODES + 1, "{by_node:#?}");
    assert_eq!(reqs(&by_node["blue"]), [&Req::Event("InvalidPool")]);
    assert_eq!(reqs(&by_node[&node(DELETED)]), [&Req::Delete]);
    let mut last_start = Duration::ZERO;
    for i in 0..DELETED {
        let calls = &by_node[&node(i)];
        let mut status = status_patch("no room");
        if i % 2 == 0 {
            status = super::compose_patches(
                Some(status),
                Some(json!({"status": {"azure": {"interfaces": [i]}}})),
            )
            .expect("a patch");
        }
        assert_eq!(
            reqs(calls),
            [
                &Req::Status(status),
                &Req::Spec(cidrs(i, 1).merge_patch()),
                &Req::Spec(cidrs(i, 3).merge_patch()),
            ],
            "node {i}"
        );
        assert!(calls[0].at <= calls[1].at, "node {i}: status first");
        assert!(
            calls[2].at >= calls[0].at + NODE_WRITE_INTERVAL,
            "node {i}: the second write came {:?} after the first",
            calls[2].at.saturating_sub(calls[0].at)
        );
        assert!(
            calls[0].at >= last_start,
            "node {i} started before node {}",
            i - 1
        );
        last_start = calls[0].at;
    }
    assert!(
        last_start > Duration::ZERO,
        "the burst did not queue behind the writes in flight"
    );
    assert_eq!(api.most_in_flight.load(Ordering::SeqCst), CONCURRENCY);
}

/// A failed status is tried again after [`RETRY_AFTER`], the spec only after the status went
/// through, and a part queued meanwhile goes with the retry. A write with nothing in it makes
/// no request at all.
#[tokio::test(start_paused = true)]
async fn a_failed_status_is_retried_before_the_spec() {
    let api = Recorder::new();
    api.fail_once
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((node(1), "status"));
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(drive(api.clone(), rx));
    let _ = tx.send(write(1, 0, Some("no room")));
    let _ = tx.send(write(2, 0, None));
    let _ = tx.send(Op::Write(Write {
        node: node(3),
        spec: None,
        error: None,
    }));
    // node-1's failed status, node-2's spec.
    api.made(2).await;
    let _ = tx.send(write(1, 1, None));
    drop(tx);
    writer
        .await
        .expect("the writer ends when its channel closes");

    let by_node = api.by_node();
    assert_eq!(
        by_node.keys().collect::<Vec<_>>(),
        [&node(1), &node(2)],
        "node-3 had nothing to write: {by_node:#?}"
    );
    assert_eq!(
        reqs(&by_node[&node(2)]),
        [&Req::Spec(cidrs(2, 0).merge_patch())]
    );
    let calls = &by_node[&node(1)];
    assert_eq!(
        reqs(calls),
        [
            &Req::Status(status_patch("no room")),
            &Req::Status(status_patch("no room")),
            &Req::Spec(cidrs(1, 1).merge_patch()),
        ]
    );
    assert!(
        calls[1].at >= calls[0].at + LATENCY + RETRY_AFTER,
        "retried {:?} after the failure",
        calls[1].at.saturating_sub(calls[0].at)
    );
}

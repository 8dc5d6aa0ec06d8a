//! The pass and the dry run over a fake API server: the moves, the refusals, the failures, the
//! retries and the ordering with the node manager.

use std::{
    collections::BTreeMap,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use futures::FutureExt as _;
use serde_json::json;

use super::*;

/// An API server holding one pool and some CiliumNodes.
#[derive(Default)]
struct Fake {
    pool: Option<Value>,
    nodes: Mutex<BTreeMap<String, Value>>,
    /// Conflicts each node's next updates answer (another writer changed it meanwhile).
    conflicts: Mutex<BTreeMap<String, usize>>,
    /// Nodes whose updates fail with a 500.
    broken: Vec<String>,
    /// Nodes deleted just before their update.
    vanishing: Vec<String>,
    errors: Mutex<BTreeMap<String, String>>,
    events: Mutex<Vec<(String, String)>>,
    replaced: AtomicUsize,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

fn server_error() -> kube::Error {
    kube::Error::Api(
        kube::core::Status {
            code: 500,
            message: "etcdserver: request timed out".to_owned(),
            ..kube::core::Status::default()
        }
        .boxed(),
    )
}

impl Api for Fake {
    async fn pool(&self, _name: &str) -> Result<Option<Value>, MigrationError> {
        Ok(self.pool.clone())
    }
    async fn nodes(&self) -> Result<Vec<Value>, MigrationError> {
        Ok(self.nodes.lock().expect("lock").values().cloned().collect())
    }
    async fn node(&self, name: &str) -> Result<Option<Value>, MigrationError> {
        if self.vanishing.iter().any(|n| n == name) {
            self.nodes.lock().expect("lock").remove(name);
        }
        Ok(self.nodes.lock().expect("lock").get(name).cloned())
    }
    async fn replace(&self, doc: &Value) -> Result<Written, MigrationError> {
        let name = doc["metadata"]["name"].as_str().expect("named").to_owned();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::task::yield_now().await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.broken.contains(&name) {
            return Err(MigrationError::Api {
                verb: "update",
                what: format!("CiliumNode {name}"),
                source: server_error(),
            });
        }
        if let Some(left) = self.conflicts.lock().expect("lock").get_mut(&name)
            && *left > 0
        {
            *left -= 1;
            return Ok(Written::Conflict);
        }
        let mut nodes = self.nodes.lock().expect("lock");
        let Some(stored) = nodes.get_mut(&name) else {
            return Ok(Written::Gone);
        };
        *stored = doc.clone();
        self.replaced.fetch_add(1, Ordering::SeqCst);
        Ok(Written::Done)
    }
    async fn set_error(&self, node: &str, text: &str) -> Result<Written, MigrationError> {
        self.errors
            .lock()
            .expect("lock")
            .insert(node.to_owned(), text.to_owned());
        Ok(Written::Done)
    }
    async fn event(&self, object: &Value, message: &str) {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        self.events
            .lock()
            .expect("lock")
            .push((format!("{kind}/{name}"), message.to_owned()));
    }
}

fn cilium_node(name: &str, pod_cidrs: &[&str]) -> Value {
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"ipam": {"podCIDRs": pod_cidrs}},
    })
}

fn fake(nodes: &[Value]) -> Fake {
    Fake {
        pool: Some(json!({
            "apiVersion": "cilium.io/v2alpha1", "kind": "CiliumPodIPPool",
            "metadata": {"name": "default"},
            "spec": {
                "ipv4": {"cidrs": ["10.0.0.0/16"], "maskSize": 24},
                "ipv6": {"cidrs": ["fd00::/104"], "maskSize": 120},
            },
        })),
        nodes: Mutex::new(
            nodes
                .iter()
                .map(|n| {
                    (
                        n["metadata"]["name"].as_str().expect("named").to_owned(),
                        n.clone(),
                    )
                })
                .collect(),
        ),
        ..Fake::default()
    }
}

fn config() -> MigrationConfig {
    MigrationConfig {
        enabled: true,
        ..MigrationConfig::default()
    }
}

fn stored(f: &Fake, name: &str) -> Value {
    f.nodes.lock().expect("lock")[name]["spec"]["ipam"].clone()
}

fn error_of(f: &Fake, name: &str) -> Option<String> {
    f.errors.lock().expect("lock").get(name).cloned()
}

#[tokio::test]
async fn v4_v6_and_dual_stack_pod_cidrs_move_into_the_default_pool() {
    let f = fake(&[
        cilium_node("v4", &["10.0.1.0/24"]),
        cilium_node("v6", &["fd00::100/120"]),
        cilium_node("dual", &["10.0.2.0/24", "fd00::200/120"]),
        cilium_node("empty", &[]),
    ]);
    let summary = run_pass(&f, &config()).await.expect("the pass runs");
    assert_eq!(summary.moved, ["dual", "v4", "v6"]);
    assert!(
        summary.refused.is_empty() && summary.failed.is_empty(),
        "{summary:?}"
    );
    assert_eq!(
        stored(&f, "dual"),
        json!({"pools": {"allocated": [{"pool": "default", "cidrs": ["10.0.2.0/24", "fd00::200/120"]}]}})
    );
    assert_eq!(
        stored(&f, "v6"),
        json!({"pools": {"allocated": [{"pool": "default", "cidrs": ["fd00::100/120"]}]}})
    );
    assert_eq!(stored(&f, "empty"), json!({"podCIDRs": []}), "not written");
    assert_eq!(f.replaced.load(Ordering::SeqCst), 3);
    assert!(f.errors.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_refused_node_keeps_its_pod_cidrs_and_says_why_on_itself_and_the_pool() {
    let f = fake(&[
        cilium_node("outside", &["10.1.0.0/24"]),
        cilium_node("other-mask", &["10.0.4.0/23"]),
        cilium_node("garbage", &["banana"]),
        cilium_node("fine", &["10.0.1.0/24"]),
    ]);
    let summary = run_pass(&f, &config()).await.expect("the pass runs");
    assert_eq!(summary.moved, ["fine"]);
    assert_eq!(summary.refused, ["garbage", "other-mask", "outside"]);
    for (node, cidrs, why) in [
        (
            "outside",
            json!(["10.1.0.0/24"]),
            "10.1.0.0/24 is outside spec.ipv4.cidrs of CiliumPodIPPool default (10.0.0.0/16); \
             add a CIDR covering 10.1.0.0/24 to spec.ipv4.cidrs",
        ),
        (
            "other-mask",
            json!(["10.0.4.0/23"]),
            "its spec.ipv4.maskSize must be 23",
        ),
        ("garbage", json!(["banana"]), "\"banana\" is not a CIDR"),
    ] {
        assert_eq!(
            stored(&f, node)["podCIDRs"],
            cidrs,
            "{node} keeps its podCIDRs"
        );
        let error = error_of(&f, node).expect("an error is written");
        assert!(
            error.starts_with("migration to multi-pool IPAM failed: ") && error.contains(why),
            "{node}: {error}"
        );
        let events = f.events.lock().expect("lock");
        assert!(
            events
                .iter()
                .any(|(about, message)| about == "CiliumPodIPPool/default"
                    && message.starts_with(&format!("CiliumNode {node}: "))
                    && message.contains(why)),
            "{node}: {events:?}"
        );
    }
}

#[tokio::test]
async fn without_the_pool_every_node_is_refused_naming_the_pool_to_create() {
    let mut f = fake(&[cilium_node("n1", &["10.0.1.0/24"])]);
    f.pool = None;
    let summary = run_pass(&f, &config()).await.expect("the pass runs");
    assert_eq!(summary.refused, ["n1"]);
    assert_eq!(stored(&f, "n1")["podCIDRs"], json!(["10.0.1.0/24"]));
    let error = error_of(&f, "n1").expect("an error");
    assert!(
        error.contains("CiliumPodIPPool default does not exist; create it with spec.ipv4.cidrs covering 10.0.1.0/24 and spec.ipv4.maskSize 24"),
        "{error}"
    );
    // No pool to put the Event on: it goes on the node.
    let events = f.events.lock().expect("lock");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "CiliumNode/n1");
}

#[tokio::test]
async fn a_failing_update_is_written_to_the_node_with_cilium_s_text_and_the_rest_move() {
    let mut f = fake(&[
        cilium_node("broken", &["10.0.1.0/24"]),
        cilium_node("fine", &["10.0.2.0/24"]),
        cilium_node("gone", &["10.0.3.0/24"]),
    ]);
    f.broken = vec!["broken".to_owned()];
    f.vanishing = vec!["gone".to_owned()];
    let summary = run_pass(&f, &config()).await.expect("the pass runs");
    assert_eq!(summary.moved, ["fine"]);
    assert_eq!(summary.failed, ["broken"], "a deleted node is no failure");
    assert_eq!(stored(&f, "broken")["podCIDRs"], json!(["10.0.1.0/24"]));
    let error = error_of(&f, "broken").expect("an error is written");
    assert!(
        error.starts_with("migration to multi-pool IPAM failed: update CiliumNode broken: ")
            && error.contains("etcdserver: request timed out"),
        "{error}"
    );
    assert_eq!(error_of(&f, "gone"), None);
}

#[tokio::test(start_paused = true)]
async fn a_conflict_is_retried_on_the_node_as_it_is_now() {
    let f = fake(&[
        cilium_node("busy", &["10.0.1.0/24"]),
        cilium_node("stuck", &["10.0.2.0/24"]),
    ]);
    f.conflicts
        .lock()
        .expect("lock")
        .extend([("busy".to_owned(), 3), ("stuck".to_owned(), ATTEMPTS)]);
    // The agent wrote `requested` meanwhile.
    f.nodes.lock().expect("lock").get_mut("busy").expect("busy")["spec"]["ipam"]["pools"] =
        json!({"requested": [{"pool": "default", "needed": {"ipv4-addrs": 16}}]});
    let summary = run_pass(&f, &config()).await.expect("the pass runs");
    assert_eq!(summary.moved, ["busy"]);
    assert_eq!(summary.failed, ["stuck"]);
    assert_eq!(
        stored(&f, "busy"),
        json!({"pools": {
            "requested": [{"pool": "default", "needed": {"ipv4-addrs": 16}}],
            "allocated": [{"pool": "default", "cidrs": ["10.0.1.0/24"]}],
        }}),
        "requested is kept"
    );
    assert!(
        error_of(&f, "stuck").is_some_and(|e| e.ends_with("still conflicting after 10 attempts")),
        "{:?}",
        error_of(&f, "stuck")
    );
}

#[tokio::test]
async fn at_most_the_configured_workers_update_at_once() {
    let nodes: Vec<Value> = (0..12)
        .map(|i| cilium_node(&format!("n{i:02}"), &[&format!("10.0.{i}.0/24")]))
        .collect();
    let f = fake(&nodes);
    let config = MigrationConfig {
        workers: 3,
        ..config()
    };
    let summary = run_pass(&f, &config).await.expect("the pass runs");
    assert_eq!(summary.moved.len(), 12);
    let most = f.most_in_flight.load(Ordering::SeqCst);
    assert!((2..=3).contains(&most), "{most} updates at once");
}

#[tokio::test]
async fn the_node_manager_starts_only_after_the_pass() {
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let started = AtomicBool::new(false);
    let pass = async {
        let _ = finished.await;
    };
    let serve = async {
        started.store(true, Ordering::SeqCst);
        7
    };
    let mut both = Box::pin(before(pass, std::future::pending(), serve));
    assert!((&mut both).now_or_never().is_none(), "waits for the pass");
    assert!(
        !started.load(Ordering::SeqCst),
        "not started during the pass"
    );
    done.send(()).expect("the pass waits");
    assert_eq!(both.await, Some(7));
    assert!(started.load(Ordering::SeqCst));
    // A stop during the pass returns without serving.
    let stopped = before(std::future::pending(), async {}, async { 7 }).await;
    assert_eq!(stopped, None);
}

#[tokio::test]
async fn the_dry_run_lists_each_move_and_refusal_and_writes_nothing() {
    let f = fake(&[
        cilium_node("n1", &["10.0.1.0/24", "fd00::100/120"]),
        cilium_node("n2", &["10.9.0.0/16"]),
        cilium_node("n3", &[]),
    ]);
    let mut out = Vec::new();
    let clean = dry_run(&f, &config(), &mut out).await.expect("it runs");
    assert!(!clean, "n2 would be refused");
    let out = String::from_utf8(out).expect("utf-8");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "CiliumPodIPPool default exists",
            "n1: move 10.0.1.0/24, fd00::100/120",
            "n2: refused: 10.9.0.0/16 is outside spec.ipv4.cidrs of CiliumPodIPPool default \
             (10.0.0.0/16); add a CIDR covering 10.9.0.0/16 to spec.ipv4.cidrs",
            "n3: no spec.ipam.podCIDRs; nothing to move",
            "1 node(s) would move to pool default, 1 refused; nothing was written",
        ]
    );
    assert_eq!(f.replaced.load(Ordering::SeqCst), 0);
    assert!(f.errors.lock().expect("lock").is_empty());
    assert!(f.events.lock().expect("lock").is_empty());
}

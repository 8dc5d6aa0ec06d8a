//! The cloud manager against a scripted provider that records every call (and fails the test
//! on a call it was not scripted for): rounds, their amounts, what is published, retries.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use weft_k8s::resource::FieldError;

use super::*;
use crate::cloud::{
    AllocationAction, Available, InstanceSyncError, InterfaceStats, ReleaseAction,
    view::CloudNodeView,
};

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct MockError(String);

#[derive(Debug, Default)]
struct Cloud {
    /// instance → its addresses in the cloud.
    instances: BTreeMap<String, Vec<String>>,
    /// What the cache shows (copied from `cloud` by syncs).
    cache: BTreeMap<String, Vec<String>>,
    subnet_free: u64,
    calls: Vec<String>,
    fail_allocations: u32,
    fail_resync: bool,
    next: u32,
    /// The instance's interface takes no address; new interfaces go into `slots`.
    full_nic: bool,
    /// Interfaces that can still be created.
    slots: u64,
}

#[derive(Debug, Clone, Default)]
struct Mock(Arc<Mutex<Cloud>>);

impl Mock {
    fn with(instances: &[&str], subnet_free: u64) -> Self {
        let m = Self::default();
        {
            let mut c = m.0.lock().unwrap();
            for i in instances {
                c.instances.insert((*i).to_owned(), Vec::new());
            }
            c.cache = c.instances.clone();
            c.subnet_free = subnet_free;
        }
        m
    }
    fn calls(&self) -> Vec<String> {
        self.0.lock().unwrap().calls.clone()
    }
    fn log(&self, call: String) {
        self.0.lock().unwrap().calls.push(call);
    }
}

impl CloudProvider for Mock {
    type Error = MockError;
    type NodeSpec = ();
    type NodeStatus = Value;
    const FIELD: &'static str = "mock";

    fn is_transient(_: &MockError) -> bool {
        false
    }

    async fn resync(&self) -> Result<(), MockError> {
        let mut c = self.0.lock().unwrap();
        c.calls.push("resync".into());
        if c.fail_resync {
            return Err(MockError("ARM is down".into()));
        }
        c.cache = c.instances.clone();
        Ok(())
    }
    async fn instance_sync(&self, id: &str) -> Result<(), InstanceSyncError<MockError>> {
        let mut c = self.0.lock().unwrap();
        c.calls.push(format!("instance_sync {id}"));
        match c.instances.get(id).cloned() {
            Some(ips) => {
                c.cache.insert(id.to_owned(), ips);
                Ok(())
            }
            None => Err(InstanceSyncError::NotFound(MockError(format!(
                "instance {id} not found"
            )))),
        }
    }
    fn has_instance(&self, id: &str) -> bool {
        self.0.lock().unwrap().cache.contains_key(id)
    }
    fn delete_instance(&self, id: &str) {
        self.0.lock().unwrap().cache.remove(id);
    }
    fn pool_quota(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([("subnet-a".to_owned(), self.0.lock().unwrap().subnet_free)])
    }
    fn max_allocatable(&self, _: NodeRef<'_, ()>) -> u64 {
        256
    }
    fn min_allocatable(&self, _: NodeRef<'_, ()>) -> u64 {
        8
    }
    fn resync_interfaces(
        &self,
        node: NodeRef<'_, ()>,
    ) -> Result<(Available, InterfaceStats), MockError> {
        let c = self.0.lock().unwrap();
        let ips = c
            .cache
            .get(node.instance_id)
            .ok_or_else(|| MockError(format!("instance does not exist: {:?}", node.instance_id)))?;
        let available = ips
            .iter()
            .map(|ip| (ip.clone(), format!("nic-{}", node.instance_id)))
            .collect();
        let free_on_nic = 255 - ips.len() as u64;
        Ok((
            available,
            InterfaceStats {
                node_capacity: 255,
                remaining_interfaces: u64::from(free_on_nic > 0),
            },
        ))
    }
    fn prepare_allocation(&self, node: NodeRef<'_, ()>) -> Result<AllocationAction, MockError> {
        let c = self.0.lock().unwrap();
        let held = c.cache.get(node.instance_id).map_or(0, Vec::len) as u64;
        if c.full_nic {
            return Ok(AllocationAction {
                pool_id: "subnet-a".into(),
                empty_interface_slots: c.slots,
                ..AllocationAction::default()
            });
        }
        Ok(AllocationAction {
            interface_id: format!("nic-{}", node.instance_id),
            pool_id: "subnet-a".into(),
            available_for_allocation: c.subnet_free.min(255 - held),
            interface_candidates: 1,
            ..AllocationAction::default()
        })
    }
    async fn create_interface(
        &self,
        node: NodeRef<'_, ()>,
        action: &AllocationAction,
    ) -> Result<u64, MockError> {
        let mut c = self.0.lock().unwrap();
        c.calls.push(format!(
            "create_interface {} {}",
            node.name, action.max_to_allocate
        ));
        if c.slots == 0 {
            return Err(MockError("no slot".into()));
        }
        c.slots -= 1;
        let count = action.max_to_allocate.min(10);
        for _ in 0..count {
            c.next += 1;
            let ip = format!("10.1.{}.{}", c.next / 250, c.next % 250 + 4);
            c.instances.get_mut(node.instance_id).unwrap().push(ip);
        }
        Ok(count)
    }
    async fn allocate(
        &self,
        node: NodeRef<'_, ()>,
        action: &AllocationAction,
    ) -> Result<(), MockError> {
        let mut c = self.0.lock().unwrap();
        c.calls.push(format!(
            "allocate {} {}",
            node.name, action.available_for_allocation
        ));
        if c.fail_allocations > 0 {
            c.fail_allocations -= 1;
            return Err(MockError("AuthorizationFailed".into()));
        }
        for _ in 0..action.available_for_allocation {
            c.next += 1;
            let ip = format!("10.0.{}.{}", c.next / 250, c.next % 250 + 4);
            c.instances.get_mut(node.instance_id).unwrap().push(ip);
            c.subnet_free -= 1;
        }
        Ok(())
    }
    async fn allocate_static_ip(
        &self,
        node: NodeRef<'_, ()>,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, MockError> {
        self.log(format!("static_ip {} {tags:?}", node.name));
        Ok("20.0.0.7".into())
    }
    fn prepare_release(
        &self,
        node: NodeRef<'_, ()>,
        excess: u64,
        used: &BTreeSet<String>,
    ) -> ReleaseAction {
        let c = self.0.lock().unwrap();
        let ips = c.cache[node.instance_id]
            .iter()
            .filter(|ip| !used.contains(*ip))
            .take(usize::try_from(excess).unwrap())
            .cloned()
            .collect();
        ReleaseAction {
            interface_id: format!("nic-{}", node.instance_id),
            pool_id: "subnet-a".into(),
            ips,
        }
    }
    async fn release(
        &self,
        node: NodeRef<'_, ()>,
        action: &ReleaseAction,
    ) -> Result<(), MockError> {
        let mut c = self.0.lock().unwrap();
        c.calls
            .push(format!("release {} {:?}", node.name, action.ips));
        let ips = c.instances.get_mut(node.instance_id).unwrap();
        ips.retain(|ip| !action.ips.contains(ip));
        Ok(())
    }
    fn status(&self, node: NodeRef<'_, ()>) -> Value {
        let c = self.0.lock().unwrap();
        let addresses: Vec<Value> = c
            .cache
            .get(node.instance_id)
            .into_iter()
            .flatten()
            .map(|ip| json!({"ip": ip, "state": "succeeded"}))
            .collect();
        json!({"interfaces": [{"id": format!("nic-{}", node.instance_id), "addresses": addresses}]})
    }
}

#[derive(Debug, Default, Clone)]
struct Seen(Arc<Mutex<Vec<Snapshot>>>);

impl Observer for Seen {
    fn round(&self, _: Outcome, _: &str, _: u64, _: f64) {}
    fn background_sync(&self, _: bool, _: f64) {}
    fn resynced(&self) {}
    fn snapshot(&self, s: &Snapshot) {
        self.0.lock().unwrap().push(s.clone());
    }
}

async fn start(
    mock: &Mock,
    release_excess: bool,
) -> (CloudManager<Mock>, mpsc::UnboundedReceiver<NodePatch>, Seen) {
    let (tx, rx) = mpsc::unbounded_channel();
    let seen = Seen::default();
    let m = CloudManager::start(
        mock.clone(),
        Settings {
            parallel_workers: 4,
            release_excess,
            release_delay: Duration::ZERO,
        },
        tx,
        Box::new(seen.clone()),
    )
    .await
    .expect("first resync");
    (m, rx, seen)
}

fn node(name: &str, instance: &str) -> ViewOf<Mock> {
    CloudNodeView {
        name: name.into(),
        instance_id: instance.into(),
        ..CloudNodeView::default()
    }
}

/// The view of `p`'s node after the writer applied `p` to it.
fn applied(mut view: ViewOf<Mock>, p: &NodePatch) -> ViewOf<Mock> {
    if let Some(spec) = &p.spec {
        let ipam = &spec["spec"]["ipam"];
        if let Some(pool) = ipam["pool"].as_object() {
            for (ip, v) in pool {
                if v.is_null() {
                    view.pool.remove(ip);
                } else {
                    view.pool
                        .insert(ip.clone(), v["resource"].as_str().unwrap().to_owned());
                }
            }
        }
        if let Some(pre) = ipam["pre-allocate"].as_i64() {
            view.pre_allocate = pre;
        }
    }
    if let Some(status) = &p.status {
        let status = &status["status"];
        if !status[Mock::FIELD].is_null() {
            view.provider_status = status[Mock::FIELD].clone();
        }
        if let Some(ip) = status["ipam"]["assigned-static-ip"].as_str() {
            view.assigned_static_ip = ip.to_owned();
        }
        if let Some(e) = status["ipam"]["operator-status"].get("error") {
            view.operator_error = e.as_str().unwrap_or_default().to_owned();
        }
    }
    view
}

/// Apply patches to `view` (as the writer and API server would) until `done` holds.
async fn follow(
    rx: &mut mpsc::UnboundedReceiver<NodePatch>,
    mut view: ViewOf<Mock>,
    done: impl Fn(&ViewOf<Mock>) -> bool,
) -> ViewOf<Mock> {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !done(&view) {
            let p = rx.recv().await.expect("manager alive");
            view = applied(view, &p);
        }
        view
    })
    .await
    .unwrap_or_else(|v| panic!("the node never reached the state waited for: {v:?}"))
}

#[tokio::test(start_paused = true)]
async fn a_new_node_gets_pre_allocate_addresses_in_one_round() {
    let mock = Mock::with(&["i-1"], 100);
    let (m, mut rx, _) = start(&mock, false).await;
    m.upsert(node("n1", "i-1"));
    let first = rx.recv().await.unwrap();
    assert_eq!(
        first.spec.as_ref().unwrap()["spec"]["ipam"]["pre-allocate"],
        8
    );
    let view = applied(node("n1", "i-1"), &first);
    let view = follow(&mut rx, view, |v| v.pool.len() == 8).await;
    assert_eq!(
        mock.calls(),
        ["resync", "allocate n1 8", "instance_sync i-1"],
        "one allocation of pre-allocate (8), then the instance is read again"
    );
    assert_eq!(
        view.provider_status["interfaces"][0]["addresses"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    // The event of what was written: nothing more to publish or allocate.
    m.upsert(view);
    assert!(
        rx.try_recv().is_err(),
        "an unchanged node is not written again"
    );
    assert_eq!(mock.calls().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn used_addresses_top_the_node_up_and_pending_pods_surge() {
    let mock = Mock::with(&["i-1"], 100);
    let (m, mut rx, _) = start(&mock, false).await;
    m.upsert(node("n1", "i-1"));
    let mut view = follow(&mut rx, node("n1", "i-1"), |v| v.pool.len() == 8).await;
    view.used = view.pool.keys().take(5).cloned().collect();
    m.set_pending_pods(BTreeMap::from([("n1".to_owned(), 20)]));
    m.upsert(view.clone());
    follow(&mut rx, view, |v| v.pool.len() == 8 + 20).await;
    // needed = 8 + 5 - 8 = 5; surge = 20 pending - 5 = 15.
    assert_eq!(mock.calls()[3], "allocate n1 20", "{:?}", mock.calls());
}

#[tokio::test(start_paused = true)]
async fn a_full_interface_with_an_empty_slot_gets_a_new_interface() {
    let mock = Mock::with(&["i-1"], 100);
    {
        let mut c = mock.0.lock().unwrap();
        c.full_nic = true;
        c.slots = 1;
    }
    let (m, mut rx, _) = start(&mock, false).await;
    m.upsert(node("n1", "i-1"));
    follow(&mut rx, node("n1", "i-1"), |v| v.pool.len() == 8).await;
    let calls = mock.calls();
    assert!(
        calls.contains(&"create_interface n1 8".to_owned()),
        "{calls:?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("allocate")),
        "no interface had room: {calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_subnet_allocates_nothing_and_counts_at_capacity() {
    let mock = Mock::with(&["i-1"], 0);
    let (m, mut rx, seen) = start(&mock, false).await;
    m.upsert(node("n1", "i-1"));
    let _ = rx.recv().await;
    m.shared.resync_nodes(Instant::now());
    let snapshot = seen.0.lock().unwrap().last().cloned().unwrap();
    assert_eq!(snapshot.total, 1);
    assert!(
        mock.calls().iter().all(|c| !c.starts_with("allocate")),
        "{:?}",
        mock.calls()
    );
    assert_eq!(snapshot.per_subnet["subnet-a"], 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_round_is_published_and_retried_with_backoff() {
    let mock = Mock::with(&["i-1"], 100);
    mock.0.lock().unwrap().fail_allocations = 1;
    let (m, mut rx, _) = start(&mock, false).await;
    m.upsert(node("n1", "i-1"));
    let mut view = node("n1", "i-1");
    view = follow(&mut rx, view, |v| !v.operator_error.is_empty()).await;
    assert!(
        view.operator_error.contains("AuthorizationFailed"),
        "{}",
        view.operator_error
    );
    let view = follow(&mut rx, view, |v| v.pool.len() == 8).await;
    assert_eq!(
        view.operator_error, "",
        "the retry that succeeded clears the error"
    );
    let allocations = mock
        .calls()
        .iter()
        .filter(|c| c.starts_with("allocate"))
        .count();
    assert_eq!(allocations, 2);
}

#[tokio::test(start_paused = true)]
async fn an_unstable_instances_api_blocks_rounds() {
    let mock = Mock::with(&["i-1"], 100);
    let (m, mut rx, _) = start(&mock, false).await;
    mock.0.lock().unwrap().fail_resync = true;
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let runner = {
        let m = m.clone();
        tokio::spawn(async move {
            m.run(async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            })
            .await;
        })
    };
    // The loop's first resync fails: the API is unstable.
    tokio::time::timeout(Duration::from_secs(5), async {
        while mock
            .calls()
            .iter()
            .filter(|c| *c == "resync")
            .nth(1)
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("a second resync");
    m.upsert(node("n1", "i-1"));
    let _ = rx.recv().await;
    // Once ARM answers again, the next resync unblocks the node.
    mock.0.lock().unwrap().fail_resync = false;
    follow(&mut rx, node("n1", "i-1"), |v| v.pool.len() == 8).await;
    let calls = mock.calls();
    let first_allocation = calls
        .iter()
        .position(|c| c.starts_with("allocate"))
        .unwrap();
    let last_failed_resync = calls.iter().rposition(|c| c == "resync").unwrap();
    assert!(
        calls[..first_allocation]
            .iter()
            .filter(|c| *c == "resync")
            .count()
            >= 3,
        "no allocation while the resync failed: {calls:?}"
    );
    assert!(last_failed_resync < calls.len());
    let _ = stop_tx.send(true);
    runner.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_node_unknown_to_the_cache_is_synchronised_first() {
    let mock = Mock::with(&["i-1"], 100);
    let (m, mut rx, _) = start(&mock, false).await;
    // Created in the cloud after the first resync.
    mock.0
        .lock()
        .unwrap()
        .instances
        .insert("i-2".into(), Vec::new());
    m.upsert(node("n2", "i-2"));
    follow(&mut rx, node("n2", "i-2"), |v| v.pool.len() == 8).await;
    assert_eq!(
        mock.calls(),
        [
            "resync",
            "instance_sync i-2",
            "allocate n2 8",
            "instance_sync i-2"
        ]
    );
    // An instance the cloud does not know: the node's status says so, nothing is allocated.
    m.upsert(node("n3", "i-3"));
    let error = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let p = rx.recv().await.unwrap();
            if p.node == "n3"
                && let Some(e) = p
                    .status
                    .as_ref()
                    .and_then(|s| s["status"]["ipam"]["operator-status"]["error"].as_str())
            {
                return e.to_owned();
            }
        }
    })
    .await
    .expect("n3's failure is published");
    assert!(error.contains("instance i-3 not found"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_static_ip_is_assigned_once_and_published() {
    let mock = Mock::with(&["i-1"], 100);
    let (m, mut rx, _) = start(&mock, false).await;
    let mut view = node("n1", "i-1");
    view.static_ip_tags.insert("env".into(), "prod".into());
    m.upsert(view);
    let ip = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let p = rx.recv().await.unwrap();
            if let Some(ip) = p
                .status
                .as_ref()
                .and_then(|s| s["status"]["ipam"]["assigned-static-ip"].as_str())
            {
                return ip.to_owned();
            }
        }
    })
    .await
    .expect("the static IP is published");
    assert_eq!(ip, "20.0.0.7");
    let static_calls = mock
        .calls()
        .iter()
        .filter(|c| c.starts_with("static_ip"))
        .count();
    assert_eq!(static_calls, 1, "{:?}", mock.calls());
}

#[tokio::test(start_paused = true)]
async fn a_field_error_is_cleared_once_the_field_is_fixed() {
    let mock = Mock::with(&["i-1"], 100);
    let (m, mut rx, _) = start(&mock, false).await;
    m.upsert(node("n1", "i-1"));
    let good = follow(&mut rx, node("n1", "i-1"), |v| v.pool.len() == 8).await;
    let mut broken = good.clone();
    broken.invalid = Arc::from([FieldError {
        path: "spec.ipam.pre-allocate".into(),
        source: serde::de::Error::custom("\"8\" is not a whole number"),
    }]);
    m.upsert(broken.clone());
    let view = follow(&mut rx, broken, |v| {
        v.operator_error.starts_with("spec.ipam.pre-allocate")
    })
    .await;
    // The user fixes the field; the node needs nothing, so no round runs to clear it.
    let mut fixed = view;
    fixed.invalid = Arc::default();
    m.upsert(fixed.clone());
    follow(&mut rx, fixed, |v| v.operator_error.is_empty()).await;
}

mod release;

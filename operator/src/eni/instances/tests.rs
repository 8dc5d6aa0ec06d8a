//! The cache over an in-memory inventory: wholesale resyncs, per-instance syncs, deletions
//! during a resync, the limits' refresh, and the local patches after a change.

use std::sync::{
    Arc,
    atomic::{AtomicU32, Ordering},
};

use tokio::sync::Notify;
use weft_k8s::crd::eni::AwsSubnet;

use super::*;

#[derive(Debug, thiserror::Error)]
#[error("EC2 is down")]
struct Down;

#[derive(Debug, Default)]
struct Fake {
    network: Mutex<NetworkState>,
    enis: Mutex<Vec<AttachedEni>>,
    types: Mutex<BTreeMap<String, Limits>>,
    type_sweeps: AtomicU32,
    /// When set, `enis` waits for it (a resync held in the middle).
    hold: Mutex<Option<Arc<Notify>>>,
    down: Mutex<bool>,
}

impl Inventory for Arc<Fake> {
    type Error = Down;

    async fn network(&self) -> Result<NetworkState, Down> {
        if *self.down.lock().unwrap() {
            return Err(Down);
        }
        Ok(self.network.lock().unwrap().clone())
    }
    async fn enis(&self, _: &NetworkState) -> Result<Vec<AttachedEni>, Down> {
        let hold = self.hold.lock().unwrap().clone();
        if let Some(hold) = hold {
            hold.notified().await;
        }
        Ok(self.enis.lock().unwrap().clone())
    }
    async fn instance_enis(&self, instance: &str, _: &NetworkState) -> Result<Vec<Eni>, Down> {
        Ok((self.enis.lock().unwrap().iter())
            .filter(|a| a.instance == instance)
            .map(|a| a.eni.clone())
            .collect())
    }
    async fn instance_types(&self) -> Result<BTreeMap<String, Limits>, Down> {
        self.type_sweeps.fetch_add(1, Ordering::SeqCst);
        Ok(self.types.lock().unwrap().clone())
    }
}

fn attached(instance: &str, id: &str, addresses: &[&str]) -> AttachedEni {
    AttachedEni {
        instance: instance.into(),
        eni: Eni {
            id: id.into(),
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
            subnet: Some(AwsSubnet {
                id: "subnet-1".into(),
                ..AwsSubnet::default()
            }),
            ..Eni::default()
        },
    }
}

fn fake() -> Arc<Fake> {
    let fake = Arc::new(Fake::default());
    fake.network.lock().unwrap().subnets.insert(
        "subnet-1".into(),
        Subnet {
            id: "subnet-1".into(),
            available: 100,
            ..Subnet::default()
        },
    );
    *fake.enis.lock().unwrap() = vec![
        attached("i-1", "eni-a", &["10.0.0.4"]),
        attached("i-2", "eni-b", &["10.0.0.5"]),
    ];
    fake
}

#[tokio::test]
async fn a_resync_replaces_everything_and_a_failed_one_nothing() {
    let fake = fake();
    let cache = Instances::new(Arc::clone(&fake));
    cache.resync().await.expect("resync");
    assert!(cache.has_instance("i-1") && cache.has_instance("i-2"));
    assert_eq!(
        cache.pool_quota(),
        BTreeMap::from([("subnet-1".into(), 100)])
    );
    fake.enis.lock().unwrap().remove(1);
    cache.resync().await.expect("resync");
    assert!(
        !cache.has_instance("i-2"),
        "gone from EC2, gone from the cache"
    );
    *fake.down.lock().unwrap() = true;
    fake.enis.lock().unwrap().clear();
    cache.resync().await.expect_err("down");
    assert!(cache.has_instance("i-1"), "a failed resync changes nothing");
}

#[tokio::test]
async fn an_instance_deleted_during_a_resync_is_not_brought_back() {
    let fake = fake();
    let hold = Arc::new(Notify::new());
    *fake.hold.lock().unwrap() = Some(Arc::clone(&hold));
    let cache = Arc::new(Instances::new(Arc::clone(&fake)));
    let running = tokio::spawn({
        let cache = Arc::clone(&cache);
        async move { cache.resync().await }
    });
    // Wait until the resync holds in its ENI listing, then delete i-2 and let it finish.
    while cache.lock().deleted_during_resync.is_none() {
        tokio::task::yield_now().await;
    }
    cache.delete_instance("i-2");
    hold.notify_one();
    running.await.expect("joined").expect("resync");
    assert!(cache.has_instance("i-1"));
    assert!(!cache.has_instance("i-2"));
}

#[tokio::test]
async fn an_instance_with_no_eni_is_kept_empty() {
    let fake = fake();
    let cache = Instances::new(Arc::clone(&fake));
    cache.instance_sync("i-9").await.expect("sync");
    assert!(cache.has_instance("i-9"));
    assert!(cache.lock().instances["i-9"].is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_missing_instance_type_reads_the_limits_again_at_most_once_a_minute() {
    let fake = fake();
    let cache = Instances::new(Arc::clone(&fake));
    cache.refresh_limits().await.expect("sweep");
    assert_eq!(cache.limits("m5.large").await.expect("read"), None);
    assert_eq!(
        fake.type_sweeps.load(Ordering::SeqCst),
        1,
        "read a moment ago"
    );
    let m5 = Limits {
        adapters: 3,
        ipv4: 10,
        ..Limits::default()
    };
    fake.types
        .lock()
        .unwrap()
        .insert("m5.large".into(), m5.clone());
    tokio::time::advance(LIMITS_REFRESH).await;
    assert_eq!(cache.limits("m5.large").await.expect("read"), Some(m5));
    assert_eq!(fake.type_sweeps.load(Ordering::SeqCst), 2);
    cache.limits("m5.large").await.expect("read");
    assert_eq!(
        fake.type_sweeps.load(Ordering::SeqCst),
        2,
        "known: no sweep"
    );
}

#[tokio::test]
async fn local_patches_keep_the_addresses_and_the_subnet_count() {
    let fake = fake();
    let cache = Instances::new(Arc::clone(&fake));
    cache.resync().await.expect("resync");
    let new: Vec<IpAddr> = vec!["10.0.0.8".parse().unwrap(), "10.0.0.9".parse().unwrap()];
    let assigned = |addresses: Vec<IpAddr>| Assigned {
        addresses,
        prefixes: Vec::new(),
    };
    cache.add_assigned("i-1", "eni-a", &assigned(new.clone()));
    assert_eq!(cache.lock().instances["i-1"]["eni-a"].addresses.len(), 3);
    assert_eq!(cache.pool_quota()["subnet-1"], 98);
    // moto answers with every address of the ENI: only the new ones are taken.
    let every = cache.lock().instances["i-1"]["eni-a"].addresses.clone();
    cache.add_assigned("i-1", "eni-a", &assigned(every));
    assert_eq!(cache.pool_quota()["subnet-1"], 98);
    cache.remove("i-1", "eni-a", &[IpNet::from(new[0])]);
    assert_eq!(cache.lock().instances["i-1"]["eni-a"].addresses.len(), 2);
    assert_eq!(cache.pool_quota()["subnet-1"], 99);
    let created = attached("i-1", "eni-c", &["10.0.0.20", "10.0.0.21"]).eni;
    cache.insert_eni("i-1", created);
    assert_eq!(cache.lock().instances["i-1"].len(), 2);
    assert_eq!(cache.pool_quota()["subnet-1"], 97);
}

//! The ENI provider over an in-memory EC2: a new ENI at the first free index (the next one
//! after a conflict, deleted again when the attachment fails), prefixes and their fall-back,
//! a 1.19 release, the static Elastic IP, and a node filled through the cloud manager.

use std::{net::IpAddr, time::Duration};

use ipnet::IpNet;
use tokio::sync::mpsc;

use super::*;
use crate::{
    cloud::{
        manager::{CloudManager, NodePatch, Observer, Outcome, Settings, Snapshot},
        view::CloudNodeView,
    },
    eni::gc::{GcSettings, round as gc_round},
};

mod fake;
mod ipv6;
mod release;
mod sync;

use fake::{ATTACH_LIMIT, Fake, INDEX_TAKEN, PREFIX_CAPACITY, subnet_of};

/// EC2 with instance i-1 (m5.large) holding only its device-0 ENI.
fn ec2() -> Fake {
    let fake = Fake::default();
    {
        let mut ec2 = fake.0.lock().unwrap();
        ec2.subnet_free = 200;
        let primary: IpAddr = "10.0.0.10".parse().unwrap();
        ec2.instances.insert(
            "i-1".into(),
            BTreeMap::from([(
                "eni-0".to_owned(),
                Eni {
                    id: "eni-0".into(),
                    ip: Some(primary),
                    addresses: vec![primary],
                    subnet: Some(subnet_of("subnet-1")),
                    security_groups: vec!["sg-node".into()],
                    ..Eni::default()
                },
            )]),
        );
    }
    fake
}

fn spec(first: i64) -> EniSpec {
    EniSpec {
        instance_type: "m5.large".into(),
        first_interface_index: Some(first),
        vpc_id: "vpc-1".into(),
        availability_zone: "us-east-1a".into(),
        node_subnet_id: "subnet-1".into(),
        ..EniSpec::default()
    }
}

fn node(spec: &EniSpec) -> NodeRef<'_, EniSpec> {
    NodeRef {
        name: "n1",
        instance_id: "i-1",
        spec,
    }
}

async fn provider(fake: &Fake, pd: bool) -> EniProvider<Fake> {
    let p = EniProvider::new(
        fake.clone(),
        EniSettings {
            prefix_delegation: pd,
            eni_tags: BTreeMap::from([("io.cilium/cilium-managed".into(), "true".into())]),
            gc: GcSettings::default(),
        },
    );
    p.resync().await.expect("first resync");
    p
}

#[tokio::test]
async fn a_node_without_room_gets_a_new_eni_at_the_first_interface_index() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(1);
    let action = p.prepare_allocation(node(&s)).expect("known");
    assert_eq!(
        (action.interface_id.as_str(), action.empty_interface_slots),
        ("", 2)
    );
    let held = p
        .create_interface(
            node(&s),
            &AllocationAction {
                max_to_allocate: 8,
                ..action
            },
        )
        .await
        .expect("created");
    assert_eq!(held, 8);
    assert_eq!(
        fake.calls(),
        [
            "create subnet-1 Addresses(8) [\"sg-node\"]",
            "attach eni-new1 i-1 1",
            "delete_on_termination eni-new1",
        ]
    );
    let (available, _) = p.resync_interfaces(node(&s)).expect("known");
    assert_eq!(
        available.len(),
        8,
        "the new ENI's secondaries, before any sync"
    );
    assert!(available.values().all(|eni| eni == "eni-new1"));
    let status = p.status(node(&s));
    let shown = &status.enis["eni-new1"];
    assert_eq!(shown.number, 1);
    assert_eq!(shown.addresses.len(), 8, "the primary is the ENI's ip only");
}

#[tokio::test]
async fn a_taken_index_moves_to_the_next_and_a_failed_attachment_leaves_no_eni() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(1);
    fake.inject("attach", INDEX_TAKEN);
    let action = AllocationAction {
        max_to_allocate: 4,
        empty_interface_slots: 2,
        ..AllocationAction::default()
    };
    p.create_interface(node(&s), &action)
        .await
        .expect("created");
    assert!(
        fake.calls().contains(&"attach eni-new1 i-1 2".to_owned()),
        "{:?}",
        fake.calls()
    );

    fake.inject("attach", ATTACH_LIMIT);
    let err = p
        .create_interface(node(&s), &action)
        .await
        .expect_err("limit");
    assert_eq!(
        EniProvider::<Fake>::creation_condition(&err),
        "unableToAttachENI"
    );
    assert!(
        fake.calls().contains(&"delete eni-new2".to_owned()),
        "{:?}",
        fake.calls()
    );
    assert!(fake.0.lock().unwrap().detached.is_empty(), "no ENI leaked");
    // The next creation is not answered with the deleted ENI: its token is new.
    p.create_interface(node(&s), &action)
        .await
        .expect("created");
    let tokens = fake.0.lock().unwrap().tokens.clone();
    assert_ne!(tokens[1], tokens[2], "{tokens:?}");
}

#[tokio::test]
async fn prefixes_on_a_nitro_node_and_addresses_when_the_subnet_has_no_28() {
    let fake = ec2();
    let p = provider(&fake, true).await;
    let s = spec(0);
    let mut action = p.prepare_allocation(node(&s)).expect("known");
    assert_eq!(action.interface_id, "eni-0");
    action.available_for_allocation = 20;
    p.allocate(node(&s), &action).await.expect("assigned");
    assert_eq!(fake.calls().last().unwrap(), "assign eni-0 Prefixes(2)");

    fake.inject("assign", PREFIX_CAPACITY);
    p.allocate(node(&s), &action).await.expect("fell back");
    // m5.large: 10 slots per ENI, one the primary address, two the prefixes assigned above
    // (the cache holds them from the answer).
    assert_eq!(
        fake.calls().last().unwrap(),
        "assign eni-0 Addresses(7)",
        "no more single addresses than the ENI has slots for"
    );
}

#[tokio::test]
async fn a_1_19_release_unassigns_the_chosen_free_addresses() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(0);
    let mut action = p.prepare_allocation(node(&s)).expect("known");
    action.available_for_allocation = 4;
    p.allocate(node(&s), &action).await.expect("assigned");
    p.instances.instance_sync("i-1").await.expect("sync");
    let used = BTreeSet::from(["10.0.1.1".to_owned()]);
    let release = p.prepare_release(node(&s), 2, &used);
    assert_eq!(release.ips, ["10.0.1.2", "10.0.1.3"]);
    p.release(node(&s), &release).await.expect("released");
    let (available, _) = p.resync_interfaces(node(&s)).expect("known");
    assert_eq!(available.len(), 2, "{available:?}");
}

#[tokio::test]
async fn the_static_ip_is_an_unassociated_tagged_elastic_ip_on_the_primary_eni() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(0);
    let tags = BTreeMap::from([("pool".to_owned(), "egress".to_owned())]);
    let err = p
        .allocate_static_ip(node(&s), &tags)
        .await
        .expect_err("none");
    assert!(
        err.to_string()
            .starts_with("no unassociated EIPs found for tags"),
        "{err}"
    );
    fake.0.lock().unwrap().elastic_ips = vec![("eipalloc-1".into(), "20.0.0.9".parse().unwrap())];
    let ip = p
        .allocate_static_ip(node(&s), &tags)
        .await
        .expect("assigned");
    assert_eq!(ip, "20.0.0.9");
    assert!(
        fake.calls()
            .contains(&"associate eipalloc-1 eni-0".to_owned())
    );
}

#[derive(Debug, Default)]
struct Quiet;

impl Observer for Quiet {
    fn round(&self, _: Outcome, _: &str, _: u64, _: f64) {}
    fn background_sync(&self, _: bool, _: f64) {}
    fn resynced(&self) {}
    fn snapshot(&self, _: &Snapshot) {}
}

/// The cloud manager over `p` (two workers) and the receiver of its writes.
async fn manager(
    p: EniProvider<Fake>,
    release_excess: bool,
    release_delay: Duration,
) -> (
    CloudManager<EniProvider<Fake>>,
    mpsc::UnboundedReceiver<NodePatch>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let settings = Settings {
        parallel_workers: 2,
        release_excess,
        release_delay,
    };
    let manager = CloudManager::start(p, settings, tx, Box::new(Quiet))
        .await
        .expect("first resync");
    (manager, rx)
}

#[tokio::test(start_paused = true)]
async fn the_cloud_manager_fills_a_node_through_a_new_eni() {
    let fake = ec2();
    let p = EniProvider::new(fake.clone(), EniSettings::default());
    let (manager, mut rx) = manager(p, false, Duration::ZERO).await;
    manager.upsert(CloudNodeView {
        name: "n1".into(),
        instance_id: "i-1".into(),
        provider: spec(1),
        ..CloudNodeView::default()
    });
    let filled = tokio::time::timeout(Duration::from_mins(1), async {
        loop {
            let patch = rx.recv().await.expect("manager alive");
            let pool = patch.spec.as_ref().and_then(|s| {
                s["spec"]["ipam"]["pool"]
                    .as_object()
                    .map(serde_json::Map::len)
            });
            if pool == Some(8) {
                return patch;
            }
        }
    })
    .await
    .expect("the node's pool reached pre-allocate 8");
    let status = filled.status.expect("status published");
    assert!(
        status["status"]["eni"]["enis"]["eni-new1"]["number"] == 1,
        "{status}"
    );
}

#[tokio::test]
async fn a_detached_tagged_eni_is_deleted_at_the_second_round_and_an_untagged_one_never() {
    let fake = ec2();
    let tagged = BTreeMap::from([("io.cilium/cilium-managed".to_owned(), "true".to_owned())]);
    {
        let mut ec2 = fake.0.lock().unwrap();
        for (id, tags) in [
            ("eni-leaked", tagged.clone()),
            ("eni-theirs", BTreeMap::new()),
        ] {
            ec2.detached.insert(
                id.to_owned(),
                Eni {
                    id: id.into(),
                    tags,
                    ..Eni::default()
                },
            );
        }
    }
    let settings = GcSettings {
        interval: Duration::from_mins(5),
        tags: tagged,
        subnet_ids: Vec::new(),
    };
    let marked = gc_round(&fake, &settings, Vec::new()).await;
    assert_eq!(marked, ["eni-leaked"]);
    assert!(
        !fake.calls().iter().any(|c| c.starts_with("delete")),
        "nothing deleted at the first sighting"
    );
    let marked = gc_round(&fake, &settings, marked).await;
    assert_eq!(fake.calls(), ["delete eni-leaked"]);
    assert!(marked.is_empty());
    assert!(fake.0.lock().unwrap().detached.contains_key("eni-theirs"));
}

#[tokio::test]
async fn a_failed_creation_is_counted_under_cilium_s_condition_for_its_step() {
    let fake = ec2();
    let p = provider(&fake, false).await;
    let s = spec(1);
    let action = AllocationAction {
        max_to_allocate: 4,
        empty_interface_slots: 2,
        ..AllocationAction::default()
    };
    fake.inject("create", ATTACH_LIMIT);
    let err = p
        .create_interface(node(&s), &action)
        .await
        .expect_err("create");
    assert_eq!(
        EniProvider::<Fake>::creation_condition(&err),
        "unableToCreateENI"
    );
    fake.inject("modify", ATTACH_LIMIT);
    let err = p
        .create_interface(node(&s), &action)
        .await
        .expect_err("mark");
    assert_eq!(
        EniProvider::<Fake>::creation_condition(&err),
        "unableToMarkENIForDeletion"
    );
    assert!(
        err.to_string()
            .starts_with("marking eni-new1 delete-on-termination"),
        "{err}"
    );
    assert!(
        fake.calls().contains(&"delete eni-new1".to_owned()),
        "{:?}",
        fake.calls()
    );
    let mut no_subnets = spec(1);
    no_subnets.availability_zone = "elsewhere".into();
    no_subnets.node_subnet_id = "subnet-gone".into();
    let err = p
        .create_interface(node(&no_subnets), &action)
        .await
        .expect_err("no subnet");
    assert_eq!(
        EniProvider::<Fake>::creation_condition(&err),
        "unableToFindSubnet"
    );
}

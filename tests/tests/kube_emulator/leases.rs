//! `coordination.k8s.io/v1` Leases through kube-rs's typed `Api<Lease>`, the way client-go's
//! LeaseLock drives them for leader election: GET (404 before anyone holds it), POST to take
//! it (AlreadyExists for the loser of a race), PUT with the `resourceVersion` read to renew or
//! take over (409 Conflict when someone wrote in between), MicroTime `acquireTime` and
//! `renewTime` kept to the microsecond, and watches that see each renewal as MODIFIED.

use futures::StreamExt as _;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{ListParams, PostParams, WatchEvent, WatchParams},
};
use serde_json::json;
use weft_tests::kube::{Emulator, Verb};

use super::{api_error, client, next_matching};

fn micro(text: &str) -> MicroTime {
    MicroTime(text.parse::<Timestamp>().expect("an RFC 3339 timestamp"))
}

fn lease(name: &str, holder: &str, acquired: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(micro(acquired)),
            renew_time: Some(micro(acquired)),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

/// Renew `current` as `holder` at `at`, keeping its resourceVersion (the PUT's precondition).
fn renewed(current: &Lease, holder: &str, at: &str) -> Lease {
    let mut next = current.clone();
    let spec = next.spec.get_or_insert_default();
    if spec.holder_identity.as_deref() != Some(holder) {
        spec.holder_identity = Some(holder.to_owned());
        spec.acquire_time = Some(micro(at));
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(micro(at));
    next
}

#[tokio::test]
async fn leader_election_gets_creates_and_replaces_with_optimistic_concurrency() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let leases: Api<Lease> = Api::namespaced(client, "kube-system");
    let missing = api_error(leases.get("weft-operator").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));

    let first = "2026-01-02T03:04:05.123456Z";
    let created = leases
        .create(&PostParams::default(), &lease("weft-operator", "a", first))
        .await
        .expect("create the lease");
    assert!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        created.metadata.generation, None,
        "Leases are not custom resources"
    );
    let race = api_error(
        leases
            .create(&PostParams::default(), &lease("weft-operator", "b", first))
            .await,
    );
    assert_eq!((race.code, race.reason.as_str()), (409, "AlreadyExists"));

    // Both candidates read the same version; the first PUT wins, the second is 409 Conflict.
    let read = leases.get("weft-operator").await.expect("get");
    assert_eq!(read, created);
    let second = "2026-01-02T03:04:07.000001Z";
    let renewal = leases
        .replace(
            "weft-operator",
            &PostParams::default(),
            &renewed(&read, "a", second),
        )
        .await
        .expect("the holder renews");
    assert_ne!(
        renewal.metadata.resource_version,
        read.metadata.resource_version
    );
    let takeover = api_error(
        leases
            .replace(
                "weft-operator",
                &PostParams::default(),
                &renewed(&read, "b", second),
            )
            .await,
    );
    assert_eq!((takeover.code, takeover.reason.as_str()), (409, "Conflict"));
    assert!(
        takeover
            .message
            .contains("leases.coordination.k8s.io \"weft-operator\""),
        "{}",
        takeover.message
    );
    let now = leases.get("weft-operator").await.expect("get");
    assert_eq!(now, renewal);
    let spec = now.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.renew_time, Some(micro(second)));
    assert_eq!(spec.acquire_time, Some(micro(first)));
    assert_eq!(emu.requests().count_code(Verb::Update, "leases", 409), 1);
}

#[tokio::test]
async fn micro_times_round_trip_as_sent() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let at = "2026-03-04T05:06:07.089012Z";
    leases
        .create(&PostParams::default(), &lease("node1", "node1", at))
        .await
        .expect("create");
    // On the wire and in the store, exactly the string k8s-openapi (and client-go) write.
    let stored = emu
        .get("leases", Some("kube-node-lease"), "node1")
        .expect("stored");
    assert_eq!(stored["apiVersion"], "coordination.k8s.io/v1");
    assert_eq!(stored["spec"]["renewTime"], at);
    assert_eq!(stored["spec"]["acquireTime"], at);
    let raw: serde_json::Value =
        serde_json::to_value(leases.get("node1").await.expect("get")).expect("a Lease serializes");
    assert_eq!(raw["spec"]["renewTime"], at);

    // A lease seeded with other precisions comes back with the same strings.
    emu.put(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "seeded", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "x", "renewTime": "2026-03-04T05:06:07.000000Z",
                 "acquireTime": "2026-03-04T05:06:07Z"},
    }));
    let seeded = leases.get("seeded").await.expect("get seeded");
    let spec = seeded.spec.expect("spec");
    assert_eq!(spec.renew_time, Some(micro("2026-03-04T05:06:07Z")));
    let list = leases.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 2);
    let stored = emu
        .get("leases", Some("kube-node-lease"), "seeded")
        .expect("stored");
    assert_eq!(stored["spec"]["renewTime"], "2026-03-04T05:06:07.000000Z");
    assert_eq!(stored["spec"]["acquireTime"], "2026-03-04T05:06:07Z");
}

#[tokio::test]
async fn watches_see_each_renewal_as_modified() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let leases: Api<Lease> = Api::namespaced(client, "kube-system");
    let created = leases
        .create(
            &PostParams::default(),
            &lease("weft-operator", "a", "2026-01-02T03:04:05.000000Z"),
        )
        .await
        .expect("create");
    let since = created.metadata.resource_version.clone().expect("rv");
    let mut events = leases
        .watch(
            &WatchParams::default().fields("metadata.name=weft-operator"),
            &since,
        )
        .await
        .expect("watch")
        .boxed();
    let mut current = created;
    for (holder, at) in [
        ("a", "2026-01-02T03:04:07.250000Z"),
        ("b", "2026-01-02T03:04:30.999999Z"),
    ] {
        current = leases
            .replace(
                "weft-operator",
                &PostParams::default(),
                &renewed(&current, holder, at),
            )
            .await
            .expect("renew");
        let event = next_matching(&mut events, 10, "MODIFIED", |e| {
            matches!(e, Ok(WatchEvent::Modified(_)))
        })
        .await;
        let Ok(WatchEvent::Modified(seen)) = event else {
            unreachable!("matched MODIFIED");
        };
        assert_eq!(seen, current);
        let spec = seen.spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some(holder));
        assert_eq!(spec.renew_time, Some(micro(at)));
    }
    assert_eq!(
        current.spec.and_then(|s| s.lease_transitions),
        Some(1),
        "one change of holder"
    );
}

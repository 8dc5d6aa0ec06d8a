//! Types served at two versions of one group, as a multi-version CRD with `conversion: None`
//! serves them: CiliumPodIPPool at `cilium.io/v2` (weft's) and `v2alpha1` (upstream's, the
//! storage version). One set of objects and one resourceVersion sequence; reads, lists,
//! watches and writes at either version see the same JSON apart from `apiVersion`.

use futures::StreamExt as _;
use kube::{
    Api,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams, WatchEvent, WatchParams,
    },
};
use serde_json::{Value, json};
use weft_tests::kube::Emulator;

use super::{client, dynamic, next_matching};

fn pools(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("cilium.io", version, "CiliumPodIPPool");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "ciliumpodippools"),
    )
}

fn pool(version: &str, name: &str, cidr: &str) -> DynamicObject {
    dynamic(json!({
        "apiVersion": format!("cilium.io/{version}"), "kind": "CiliumPodIPPool",
        "metadata": {"name": name, "labels": {"team": "blue"}},
        "spec": {"ipv4": {"cidrs": [cidr], "maskSize": 27}},
    }))
}

/// `object` as JSON, with its `apiVersion` checked and then removed.
fn without_version(object: &DynamicObject, version: &str) -> Value {
    let mut value = serde_json::to_value(object).expect("serializes");
    assert_eq!(
        value["apiVersion"],
        format!("cilium.io/{version}"),
        "{value}"
    );
    value
        .as_object_mut()
        .expect("an object")
        .remove("apiVersion");
    value
}

#[tokio::test]
async fn pod_ip_pools_are_the_same_objects_at_v2_and_v2alpha1() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let (v2, v2alpha1) = (pools(&client, "v2"), pools(&client, "v2alpha1"));
    let created = v2
        .create(&PostParams::default(), &pool("v2", "blue", "10.20.0.0/16"))
        .await
        .expect("create at v2");
    let stored = emu.get("ciliumpodippools", None, "blue").expect("stored");
    assert_eq!(
        stored["apiVersion"], "cilium.io/v2alpha1",
        "the storage version"
    );
    let old = v2alpha1.get("blue").await.expect("get at v2alpha1");
    assert_eq!(
        without_version(&old, "v2alpha1"),
        without_version(&created, "v2")
    );
    assert_eq!(old.metadata.generation, Some(1));

    // A write at one version is a write of the same object: the resourceVersion read at
    // v2alpha1 is the precondition of a PUT at v2, and the stale one is 409 there too.
    let mut changed = old.clone();
    changed.types.as_mut().expect("types").api_version = "cilium.io/v2".to_owned();
    changed.data["spec"]["ipv4"]["maskSize"] = json!(26);
    let replaced = v2
        .replace("blue", &PostParams::default(), &changed)
        .await
        .expect("replace at v2 with the version read at v2alpha1");
    assert_eq!(replaced.metadata.generation, Some(2));
    let stale = v2alpha1
        .replace("blue", &PostParams::default(), &old)
        .await
        .expect_err("stale");
    assert!(
        matches!(&stale, kube::Error::Api(s) if s.code == 409),
        "{stale:?}"
    );
    let patched = v2alpha1
        .patch(
            "blue",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "green"}}})),
        )
        .await
        .expect("merge patch at v2alpha1");
    let at_v2 = v2.get("blue").await.expect("get at v2");
    assert_eq!(
        without_version(&at_v2, "v2"),
        without_version(&patched, "v2alpha1")
    );

    for (api, version) in [(&v2, "v2"), (&v2alpha1, "v2alpha1")] {
        let list = api
            .list(&ListParams::default().labels("team=green"))
            .await
            .expect("list");
        assert_eq!(list.items.len(), 1, "{version}");
        assert_eq!(
            without_version(&list.items[0], version),
            without_version(&at_v2, "v2")
        );
    }
}

#[tokio::test]
async fn a_watch_at_v2_sees_writes_at_v2alpha1_as_v2() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let (v2, v2alpha1) = (pools(&client, "v2"), pools(&client, "v2alpha1"));
    let mut events = v2
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch at v2")
        .boxed();
    let created = v2alpha1
        .create(
            &PostParams::default(),
            &pool("v2alpha1", "red", "10.30.0.0/16"),
        )
        .await
        .expect("create at v2alpha1");
    let added = next_matching(&mut events, 10, "ADDED red", |e| {
        matches!(e, Ok(WatchEvent::Added(_)))
    })
    .await;
    let Ok(WatchEvent::Added(seen)) = added else {
        unreachable!("matched ADDED");
    };
    assert_eq!(
        without_version(&seen, "v2"),
        without_version(&created, "v2alpha1")
    );
    let gone = v2alpha1
        .delete("red", &DeleteParams::default())
        .await
        .expect("delete at v2alpha1");
    let deleted = next_matching(&mut events, 10, "DELETED red", |e| {
        matches!(e, Ok(WatchEvent::Deleted(_)))
    })
    .await;
    let Ok(WatchEvent::Deleted(seen)) = deleted else {
        unreachable!("matched DELETED");
    };
    let gone = gone.left().expect("deleted at once (no finalizers)");
    assert_eq!(
        without_version(&seen, "v2"),
        without_version(&gone, "v2alpha1")
    );
}

//! Reads and writes through kube-rs: typed core objects, dynamic CiliumNodes, the status
//! subresource and generation, optimistic concurrency and conflict storms, merge and JSON
//! patches, finalizers.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use weft_tests::kube::{Emulator, Verb};

use super::{api_error, ciliumnodes, client, cn, dynamic};

#[tokio::test]
async fn typed_nodes_and_pods_crud_with_selectors() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "node1", "labels": {"zone": "a"}},
        "spec": {"podCIDRs": ["10.0.1.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}]},
    }))
    .unwrap();
    let created = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    let meta = &created.metadata;
    assert!(
        meta.uid.is_some() && meta.creation_timestamp.is_some() && meta.resource_version.is_some()
    );
    let again = api_error(nodes.create(&PostParams::default(), &node).await);
    assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"));
    let missing = api_error(nodes.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));

    let mut changed = created.clone();
    changed
        .metadata
        .labels
        .get_or_insert_default()
        .insert("zone".into(), "b".into());
    let replaced = nodes
        .replace("node1", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let zone_b = nodes
        .list(&ListParams::default().labels("zone in (b,c)"))
        .await
        .expect("list");
    assert_eq!(zone_b.items.len(), 1);
    assert!(
        nodes
            .list(&ListParams::default().labels("zone=a"))
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, node) in [("p1", "node1"), ("p2", "node2"), ("p3", "node1")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        let created = pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        assert_eq!(
            created.status.and_then(|s| s.phase).as_deref(),
            Some("Pending")
        );
    }
    let all_pods: Api<Pod> = Api::all(client.clone());
    let on_node1 = all_pods
        .list(&ListParams::default().fields("spec.nodeName=node1"))
        .await
        .expect("list");
    let names: Vec<_> = on_node1
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, ["p1", "p3"]);
    let bad = api_error(
        all_pods
            .list(&ListParams::default().fields("spec.bogus=x"))
            .await,
    );
    assert_eq!((bad.code, bad.reason.as_str()), (400, "BadRequest"));

    let elsewhere: Api<Pod> = Api::namespaced(client.clone(), "nowhere");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    let no_ns = api_error(elsewhere.create(&PostParams::default(), &pod).await);
    assert_eq!((no_ns.code, no_ns.reason.as_str()), (404, "NotFound"));

    pods.delete("p2", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(emu.get("pods", Some("default"), "p2").is_none());
    nodes
        .delete("node1", &DeleteParams::default())
        .await
        .expect("delete node");
    assert_eq!(emu.requests().count_code(Verb::Create, "pods", 201), 3);
}

#[tokio::test]
async fn dynamic_ciliumnodes_follow_the_status_subresource_and_generation() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    let created = api
        .create(&PostParams::default(), &dynamic(cn("n1", &json!({}))))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "a create drops status: {created:?}"
    );

    // A main write changes spec (generation bumps) and ignores status.
    let mut main = created.clone();
    main.data["spec"]["ipam"]["podCIDRs"] = json!(["10.1.0.0/24"]);
    main.data["status"] = json!({"ipam": {"used": {"10.1.0.5": {"owner": "x"}}}});
    let after_main = api
        .replace("n1", &PostParams::default(), &main)
        .await
        .expect("replace");
    assert_eq!(after_main.metadata.generation, Some(2));
    assert_eq!(
        after_main.data["spec"]["ipam"]["podCIDRs"],
        json!(["10.1.0.0/24"])
    );
    assert!(after_main.data.get("status").is_none());

    // A status write sets status and ignores spec and labels.
    let mut status = after_main.clone();
    status.data["spec"]["ipam"]["podCIDRs"] = json!(["10.9.0.0/24"]);
    status.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
    status.data["status"] = json!({"ipam": {"used": {"10.1.0.5": {"owner": "default/a"}}}});
    let after_status = api
        .replace_status("n1", &PostParams::default(), &status)
        .await
        .expect("replace_status");
    assert_eq!(
        after_status.data["spec"]["ipam"]["podCIDRs"],
        json!(["10.1.0.0/24"])
    );
    assert_eq!(
        after_status.data["status"]["ipam"]["used"]["10.1.0.5"]["owner"],
        "default/a"
    );
    assert_eq!(after_status.metadata.generation, Some(2));
    assert!(
        after_status
            .metadata
            .labels
            .as_ref()
            .is_none_or(std::collections::BTreeMap::is_empty)
    );

    // A main write that only changes status changes nothing (no new resourceVersion).
    let mut only_status = after_status.clone();
    only_status.data["status"] = json!({});
    let unchanged = api
        .replace("n1", &PostParams::default(), &only_status)
        .await
        .expect("replace");
    assert_eq!(
        unchanged.metadata.resource_version,
        after_status.metadata.resource_version
    );

    // Status merge patch; get_status.
    let patch = json!({"status": {"ipam": {"release-ips": {"10.1.0.9": "ready-for-release"}}}, "spec": {"x": 1}});
    api.patch_status("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch_status");
    let got = api.get_status("n1").await.expect("get_status");
    assert_eq!(
        got.data["status"]["ipam"]["release-ips"]["10.1.0.9"],
        "ready-for-release"
    );
    assert!(got.data["spec"].get("x").is_none());
    let gone = api
        .delete("n1", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(gone.is_left());
    assert!(emu.get("ciliumnodes", None, "n1").is_none());
}

#[tokio::test]
async fn stale_resource_versions_and_conflict_storms_answer_409() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    let first = api
        .create(&PostParams::default(), &dynamic(cn("n1", &json!({}))))
        .await
        .unwrap();
    let mut second = first.clone();
    second.data["spec"]["bootid"] = json!("b1");
    api.replace("n1", &PostParams::default(), &second)
        .await
        .expect("fresh rv");
    let mut stale = first.clone();
    stale.data["spec"]["bootid"] = json!("b2");
    let conflict = api_error(api.replace("n1", &PostParams::default(), &stale).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("the object has been modified"),
        "{}",
        conflict.message
    );
    let stale_patch = json!({"metadata": {"resourceVersion": first.metadata.resource_version}, "spec": {"bootid": "b3"}});
    let conflict = api_error(
        api.patch("n1", &PatchParams::default(), &Patch::Merge(&stale_patch))
            .await,
    );
    assert_eq!(conflict.code, 409);
    // No resourceVersion: an unconditional update.
    stale.metadata.resource_version = None;
    api.replace("n1", &PostParams::default(), &stale)
        .await
        .expect("unconditional");

    emu.faults().conflict_next("ciliumnodes", 2);
    let current = api.get("n1").await.unwrap();
    for _ in 0..2 {
        assert_eq!(
            api_error(api.replace("n1", &PostParams::default(), &current).await).code,
            409
        );
    }
    api.replace("n1", &PostParams::default(), &current)
        .await
        .expect("storm over");
    assert_eq!(
        emu.requests().count_code(Verb::Update, "ciliumnodes", 409),
        3
    );
    assert_eq!(
        emu.requests().count_code(Verb::Patch, "ciliumnodes", 409),
        1
    );
}

#[tokio::test]
async fn merge_and_json_patches_apply_and_others_are_refused() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    emu.put(cn("n1", &json!({"a": "1", "b": "2"})));
    let merge = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"bootid": "x"}});
    let merged = api
        .patch("n1", &PatchParams::default(), &Patch::Merge(&merge))
        .await
        .expect("merge");
    let labels = merged.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.keys().collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(merged.data["spec"]["bootid"], "x");

    let ops = json!([
        {"op": "test", "path": "/spec/bootid", "value": "x"},
        {"op": "add", "path": "/spec/ipam/podCIDRs", "value": ["10.2.0.0/24"]},
        {"op": "remove", "path": "/spec/bootid"},
    ]);
    let patched = api
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(ops).unwrap()),
        )
        .await
        .expect("json patch");
    assert_eq!(
        patched.data["spec"]["ipam"]["podCIDRs"],
        json!(["10.2.0.0/24"])
    );
    assert!(patched.data["spec"].get("bootid").is_none());
    let failing = json!([{"op": "test", "path": "/spec/ipam/podCIDRs/0", "value": "nope"}]);
    let err = api_error(
        api.patch(
            "n1",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(failing).unwrap()),
        )
        .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));

    let strategic = api_error(
        api.patch("n1", &PatchParams::default(), &Patch::Strategic(json!({})))
            .await,
    );
    assert_eq!(
        (strategic.code, strategic.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    let apply = api_error(
        api.patch(
            "n1",
            &PatchParams::apply("weft"),
            &Patch::Apply(cn("n1", &json!({}))),
        )
        .await,
    );
    assert_eq!(apply.code, 415);
    let missing = api_error(
        api.patch("n2", &PatchParams::default(), &Patch::Merge(&merge))
            .await,
    );
    assert_eq!(missing.code, 404);
}

#[tokio::test]
async fn finalizers_delay_deletion_until_the_last_one_goes() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    let mut node = cn("n1", &json!({}));
    node["metadata"]["finalizers"] = json!(["weft.io/test"]);
    emu.put(node);
    let marked = api
        .delete("n1", &DeleteParams::default())
        .await
        .expect("delete");
    let marked = marked.left().expect("the object, marked");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(emu.get("ciliumnodes", None, "n1").is_some());
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch("n1", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .expect("patch");
    assert!(emu.get("ciliumnodes", None, "n1").is_none());
}

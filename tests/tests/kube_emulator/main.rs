//! The Kubernetes API emulator, driven by kube-rs exactly as the agent will drive it (through a
//! kubeconfig file): discovery, typed and dynamic CRUD, optimistic concurrency, the status
//! subresource, merge and JSON patch, selectors, pagination, watches (bookmarks, 410 Expired,
//! selector transitions, streaming lists) and the injected faults a `watcher` must survive.
//! No root needed. Reads and writes are in `crud.rs`, lists and watches in `watch.rs`, Leases
//! (leader election's reads and writes) in `leases.rs`, types served at two versions in
//! `versions.rs`, and the `kube-emulator` program driven by kubectl in `program.rs`.

mod crud;
mod leases;
mod program;
mod versions;
mod watch;

use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client, Config, Discovery,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams},
    config::{KubeConfigOptions, Kubeconfig},
    discovery::{Scope, verbs},
    runtime::watcher::{self, Event},
};
use serde_json::{Value, json};
use weft_tests::{
    kube::{Emulator, ResourceDef, Verb},
    unique,
};

/// A client built from the emulator's kubeconfig, as the agent builds one.
async fn client(emu: &Emulator) -> Client {
    let path = std::env::temp_dir().join(unique("weft-kubeconfig-"));
    emu.write_kubeconfig(&path);
    let kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig parses");
    let _ = std::fs::remove_file(&path);
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    Client::try_from(config).expect("client")
}

fn cn_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumNode"),
        "ciliumnodes",
    )
}

fn ciliumnodes(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &cn_resource())
}

fn cn(name: &str, labels: &Value) -> Value {
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": name, "labels": labels},
        "spec": {"ipam": {"pools": {"requested": [{"pool": "default", "needed": {"ipv4-addrs": 8}}]}}},
        "status": {"ipam": {"used": {}}},
    })
}

fn dynamic(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("a DynamicObject")
}

/// The API error of `result`, which must have failed.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Poll `stream` until `pred` holds for an item; panics after `secs` seconds.
async fn wait_for<S, T>(stream: &mut S, secs: u64, what: &str, pred: impl FnMut(&T) -> bool)
where
    S: Stream<Item = T> + Unpin,
    T: std::fmt::Debug,
{
    drop(next_matching(stream, secs, what, pred).await);
}

/// As [`wait_for`], returning the item.
async fn next_matching<S, T>(
    stream: &mut S,
    secs: u64,
    what: &str,
    mut pred: impl FnMut(&T) -> bool,
) -> T
where
    S: Stream<Item = T> + Unpin,
    T: std::fmt::Debug,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(item)) if pred(&item) => return item,
            Ok(Some(item)) => seen.push(format!("{item:?}")),
            Ok(None) => panic!("stream ended waiting for {what}; saw {seen:#?}"),
            Err(elapsed) => panic!("{elapsed} waiting for {what}; saw {seen:#?}"),
        }
    }
}

fn name_of(event: &Result<Event<DynamicObject>, watcher::Error>) -> Option<(&'static str, String)> {
    let (kind, obj) = match event.as_ref().ok()? {
        Event::Apply(o) => ("apply", o),
        Event::Delete(o) => ("delete", o),
        Event::InitApply(o) => ("init-apply", o),
        Event::Init => return Some(("init", String::new())),
        Event::InitDone => return Some(("init-done", String::new())),
    };
    Some((kind, obj.metadata.name.clone().unwrap_or_default()))
}

fn is(event: &Result<Event<DynamicObject>, watcher::Error>, kind: &str, name: &str) -> bool {
    name_of(event).is_some_and(|(k, n)| k == kind && n == name)
}

#[tokio::test]
async fn discovery_finds_every_type_with_its_scope_and_verbs() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let version = client.apiserver_version().await.expect("/version");
    assert_eq!(version.major, "1");
    for discovery in [
        Discovery::new(client.clone())
            .run()
            .await
            .expect("discovery"),
        Discovery::new(client.clone())
            .run_aggregated()
            .await
            .expect("aggregated discovery"),
    ] {
        let find = |g: &str, v: &str, k: &str| {
            discovery
                .resolve_gvk(&GroupVersionKind::gvk(g, v, k))
                .unwrap_or_else(|| panic!("{g}/{v} {k} not discovered"))
        };
        let (ar, caps) = find("cilium.io", "v2", "CiliumNode");
        assert_eq!(ar.plural, "ciliumnodes");
        assert_eq!(caps.scope, Scope::Cluster);
        assert!(caps.supports_operation(verbs::WATCH) && caps.supports_operation(verbs::PATCH));
        assert!(
            caps.subresources
                .iter()
                .any(|(sr, _)| sr.plural == "status"),
            "{caps:?}"
        );
        for version in ["v2alpha1", "v2"] {
            assert_eq!(
                find("cilium.io", version, "CiliumPodIPPool").1.scope,
                Scope::Cluster
            );
        }
        let (lease, caps) = find("coordination.k8s.io", "v1", "Lease");
        assert_eq!(lease.plural, "leases");
        assert_eq!(caps.scope, Scope::Namespaced);
        assert!(caps.supports_operation(verbs::UPDATE) && caps.supports_operation(verbs::WATCH));
        assert!(caps.subresources.is_empty(), "{caps:?}");
        assert_eq!(
            find("cilium.io", "v2", "CiliumNodeConfig").1.scope,
            Scope::Namespaced
        );
        assert_eq!(
            find("cilium.io", "v2", "CiliumEndpoint").1.scope,
            Scope::Namespaced
        );
        assert_eq!(
            find("cilium.io", "v2", "CiliumIdentity").1.scope,
            Scope::Cluster
        );
        assert_eq!(find("", "v1", "Pod").1.scope, Scope::Namespaced);
        assert_eq!(find("", "v1", "Node").1.scope, Scope::Cluster);
        assert_eq!(find("", "v1", "Namespace").1.scope, Scope::Cluster);
        let cilium = discovery.get("cilium.io").expect("cilium.io group");
        assert_eq!(cilium.preferred_version_or_latest(), "v2");
    }
    assert!(emu.requests().count(Verb::Discovery, "/apis/cilium.io/v2") >= 1);
}

#[test]
fn the_table_matches_the_fixture_crds() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/cilium-crds");
    let emu = Emulator::builder().token(None).start();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (shared/ must sit beside the repository)",
            dir.display()
        )
    }) {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("fixture");
        let crd: Value =
            serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut from_crd = ResourceDef::from_crd(&crd).expect("a served CRD");
        if from_crd.plural == "ciliumpodippools" {
            // weft serves its own v2 beside upstream's v2alpha1, which stays the storage version.
            from_crd.versions.insert(0, "v2".to_owned());
        }
        let built_in = emu
            .resources()
            .iter()
            .find(|d| d.plural == from_crd.plural)
            .unwrap_or_else(|| panic!("{} is not served", from_crd.plural));
        assert_eq!(&from_crd, built_in, "{}", path.display());
        checked += 1;
    }
    assert_eq!(checked, 5);
}

#[tokio::test]
async fn tokens_are_checked_and_latency_is_applied() {
    let emu = Emulator::start();
    let mut config = Config::new(emu.url().parse().unwrap());
    config.default_namespace = "default".into();
    let anonymous = Client::try_from(config).unwrap();
    let err = api_error(
        Api::<Node>::all(anonymous)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(err.code, 401);

    let client = client(&emu).await;
    emu.faults().set_latency(Duration::from_millis(300));
    let started = std::time::Instant::now();
    Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .expect("list");
    assert!(started.elapsed() >= Duration::from_millis(300));
    emu.faults().clear();
}

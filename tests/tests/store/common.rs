//! Shared harness of the store tests: scratch stores, runtimes, documents, diffs.
#![allow(
    unused_imports,
    dead_code,
    reason = "each test module uses a different part"
)]

pub(crate) use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, SystemTime},
};

pub(crate) use inotify::{Inotify, WatchMask};
pub(crate) use serde_json::{Value, json};
pub(crate) use tokio::{runtime::Runtime, sync::watch, time::Instant};
pub(crate) use weft_agent::{
    crd::{
        ipam::{AllocationIp, IpamPoolSpec, ReleaseState},
        node::CiliumNode,
    },
    store::{
        NodeWrite, Snapshot, Store as _, StoreError,
        embedded::{self, EmbeddedStore, docs},
    },
};
pub(crate) use weft_tests::{report, unique};

/// How long anything asynchronous (inotify, the writer task) may take.
pub(crate) const PATIENCE: Duration = Duration::from_secs(5);
/// Polling interval of the waits.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// The debounce of the debounce test.
pub(crate) const DEBOUNCE: Duration = Duration::from_millis(300);
/// A debounce no test waits out.
pub(crate) const LONG: Duration = Duration::from_mins(1);

/// A CRD-mode CiliumNode as `kubectl get ciliumnode -o yaml` prints it, with fields no Cilium
/// version has (`future*`) at every level and strings that YAML would read as other types.
pub(crate) const CRD_MODE_NODE: &str = r#"# The operator filled spec.ipam.pool; the agent owns status.ipam.used and release-ips.
apiVersion: cilium.io/v2
kind: CiliumNode
futureTopLevel:
  keep: [1, 2.5, true, null, "x"]
metadata:
  name: node1
  uid: 6b3c1f0e-8f2d-4c4b-9a51-0d3c2b1a0f99
  resourceVersion: "48213"
  generation: 7
  creationTimestamp: "2026-01-02T03:04:05Z"
  labels:
    kubernetes.io/hostname: node1
    kubernetes.io/os: linux
    topology.kubernetes.io/zone: eu-west-1a
  annotations:
    example.com/quoted-bool: "true"
    example.com/quoted-octal: "0755"
    example.com/quoted-null: "null"
    example.com/quoted-tilde: "~"
    example.com/yes: "yes"
    example.com/on: "on"
    example.com/empty: ""
    example.com/float: "1e3"
    example.com/multiline: |
      line one
      line two
  ownerReferences:
  - apiVersion: v1
    kind: Node
    name: node1
    uid: 1f0e6b3c-2d8f-4b4c-519a-3c0d1a2b990f
  managedFields:
  - apiVersion: cilium.io/v2
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:ipam:
          f:pool: {}
    manager: cilium-operator-generic
    operation: Update
    time: "2026-01-02T03:04:05Z"
  futureMetadata: kept
spec:
  instance-id: i-0123456789abcdef0
  addresses:
  - type: InternalIP
    ip: 192.0.2.10
  - type: CiliumInternalIP
    ip: 10.0.0.1
  health:
    ipv4: 10.0.0.2
  encryption: {}
  futureSpec:
    x: 1
  ipam:
    pool:
      10.0.0.1:
        resource: eni-1
      10.0.0.2:
        resource: eni-1
      10.0.0.5:
        resource: eni-1
      10.0.0.6:
        resource: eni-1
      10.0.0.7:
        resource: eni-1
    pre-allocate: 8
    min-allocate: 4
    futureIpam: kept
status:
  futureStatus:
    phase: x
  ipam:
    used:
      10.0.0.1:
        owner: router
        resource: eni-1
      10.0.0.5:
        owner: default/old
        resource: eni-1
    release-ips:
      10.0.0.7: marked-for-release
    operator-status: {}
    futureIpamStatus: [a, b]
"#;

/// A multi-pool CiliumNode with unknown fields beside `spec.ipam.pools`.
pub(crate) const MULTI_POOL_NODE: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNode
futureTopLevel: true
metadata:
  name: node1
  resourceVersion: "77"
  labels:
    kubernetes.io/hostname: node1
  futureMetadata:
    a: b
spec:
  addresses:
  - type: InternalIP
    ip: 192.0.2.10
  futureSpec: 3
  ipam:
    futureIpam: kept
    pools:
      requested:
      - pool: default
        needed:
          ipv4-addrs: 16
          ipv6-addrs: 16
      allocated:
      - pool: default
        cidrs:
        - 10.200.0.0/27
        - 10.200.0.32/27
        - fd00:200::/123
      - pool: mars
        cidrs:
        - 10.201.0.0/28
status:
  futureStatus: kept
  ipam:
    operator-status:
      error: ""
"#;

/// `spec.ipam.pools` the multi-pool test writes (canonical: zero counts left out).
pub(crate) fn multi_pool_pools() -> Value {
    json!({
        "requested": [
            {"pool": "default", "needed": {"ipv4-addrs": 20, "ipv6-addrs": 16}},
            {"pool": "mars", "needed": {"ipv4-addrs": 1}}
        ],
        "allocated": [
            {"pool": "default", "cidrs": ["10.200.0.0/27", "fd00:200::/123"]},
            {"pool": "mars", "cidrs": ["10.201.0.0/28"]}
        ]
    })
}

// ---------------------------------------------------------------------------------------------
// Harness.

/// A temporary store directory, removed on drop. Declare it before the runtime, so that the
/// store's tasks are gone before the directory is.
pub(crate) struct Scratch {
    pub(crate) root: PathBuf,
}

impl Scratch {
    pub(crate) fn new() -> Self {
        let root = std::env::temp_dir().join(unique("weft-store-"));
        fs::create_dir_all(&root).unwrap_or_else(|e| panic!("create {}: {e}", root.display()));
        Self { root }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Write `text` to `rel` atomically (hidden temp file, rename), creating directories.
    pub(crate) fn put(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        let dir = path.parent().expect("a document has a directory");
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let tmp = dir.join(format!(".{}.test-tmp", unique("put")));
        fs::write(&tmp, text).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
        fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("rename to {}: {e}", path.display()));
        path
    }

    /// Put the YAML `yaml` at `ciliumnodes/node1.<ext>`, as pretty JSON for `json`.
    pub(crate) fn put_node(&self, ext: &str, yaml: &str) -> PathBuf {
        let rel = format!("ciliumnodes/node1.{ext}");
        if ext != "json" {
            return self.put(&rel, yaml);
        }
        // Top level: not a document.
        let source = self.put("source.yaml", yaml);
        let value = read(&source);
        fs::remove_file(&source).unwrap_or_else(|e| panic!("remove {}: {e}", source.display()));
        let text = serde_json::to_string_pretty(&value).expect("a Value serializes");
        self.put(&rel, &text)
    }

    /// Open the store for node `node1` (inside a runtime).
    pub(crate) fn open(&self, debounce: Duration) -> EmbeddedStore {
        EmbeddedStore::open(&self.root, "node1", debounce)
            .unwrap_or_else(|e| panic!("open {}: {}", self.root.display(), report(&e)))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

pub(crate) fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

pub(crate) fn multi_thread() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

/// A document as the store reads it.
pub(crate) fn read(path: &Path) -> Value {
    docs::read_value(path).unwrap_or_else(|e| panic!("{}", report(&e)))
}

pub(crate) fn nsname(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_owned(), name.to_owned())
}

/// What a snapshot holds, for failure messages.
pub(crate) fn summary(s: &Snapshot) -> String {
    format!(
        "nodes {:?}, pools {:?}, node_configs {:?}, pods {:?}, namespaces {:?}, problems {:?}",
        s.nodes.keys().collect::<Vec<_>>(),
        s.pools.keys().collect::<Vec<_>>(),
        s.node_configs.keys().collect::<Vec<_>>(),
        s.pods.keys().collect::<Vec<_>>(),
        s.namespaces.keys().collect::<Vec<_>>(),
        s.problems,
    )
}

/// The first snapshot (the current one included) that satisfies `want`, within [`PATIENCE`].
pub(crate) async fn wait_snapshot(
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    what: &str,
    want: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let snap = rx.borrow_and_update().clone();
        if want(&snap) {
            return snap;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => panic!("the store stopped publishing while waiting for {what}"),
            Err(tokio::time::error::Elapsed { .. }) => panic!(
                "no snapshot with {what} within {PATIENCE:?}; the last one has {}",
                summary(&snap)
            ),
        }
    }
}

/// Poll `probe` until it gives a value, within [`PATIENCE`].
pub(crate) async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// Every leaf path (`a.b[0].c`) where `before` and `after` differ.
pub(crate) fn diff(before: &Value, after: &Value) -> Vec<String> {
    pub(crate) fn walk(before: &Value, after: &Value, at: &str, out: &mut Vec<String>) {
        let join = |key: &str| {
            if at.is_empty() {
                key.to_owned()
            } else {
                format!("{at}.{key}")
            }
        };
        match (before, after) {
            (Value::Object(old), Value::Object(new)) => {
                for key in old.keys().chain(new.keys()).collect::<BTreeSet<_>>() {
                    match (old.get(key), new.get(key)) {
                        (Some(was), Some(is)) => walk(was, is, &join(key), out),
                        _ => out.push(join(key)),
                    }
                }
            }
            (Value::Array(old), Value::Array(new)) if old.len() == new.len() => {
                for (i, (was, is)) in old.iter().zip(new).enumerate() {
                    walk(was, is, &format!("{at}[{i}]"), out);
                }
            }
            _ if before != after => out.push(at.to_owned()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(before, after, "", &mut out);
    out
}

/// Whether `path` is `prefix` or below it.
pub(crate) fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// File names in `dir`, sorted.
pub(crate) fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Every file below `dir`.
pub(crate) fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Copy the directory tree `from` to `to`.
pub(crate) fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("read {}: {e}", from.display()))
            .path();
        let target = to.join(path.file_name().expect("a directory entry has a name"));
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", path.display(), target.display()));
        }
    }
}

pub(crate) fn allocation(owner: &str) -> AllocationIp {
    AllocationIp {
        owner: owner.to_owned(),
        resource: "eni-1".to_owned(),
    }
}

/// A write of `status.ipam.used` only: `ip → owner`.
pub(crate) fn used_write(used: &[(&str, &str)]) -> NodeWrite {
    NodeWrite {
        used: Some(
            used.iter()
                .map(|(ip, owner)| ((*ip).to_owned(), allocation(owner)))
                .collect(),
        ),
        ..NodeWrite::default()
    }
}

/// A write of `status.ipam.release-ips` only.
pub(crate) fn release_write(ip: &str, state: ReleaseState) -> NodeWrite {
    NodeWrite {
        release_ips: Some(BTreeMap::from([(ip.to_owned(), state)])),
        ..NodeWrite::default()
    }
}

/// A write of `spec.ipam.pools` only.
pub(crate) fn pools_write(pools: &Value) -> NodeWrite {
    let pools: IpamPoolSpec = serde_json::from_value(pools.clone())
        .unwrap_or_else(|e| panic!("{pools} is not an IpamPoolSpec: {e}"));
    NodeWrite {
        pools: Some(pools),
        ..NodeWrite::default()
    }
}

pub(crate) fn pod_yaml(namespace: &str, name: &str, app: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  \
         labels:\n    app: {app}\nspec:\n  nodeName: node1\n"
    )
}

pub(crate) fn pod_json(namespace: &str, name: &str, app: &str) -> String {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"nodeName": "node1"}
    });
    serde_json::to_string_pretty(&pod).expect("a Value serializes")
}

pub(crate) fn namespace_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    \
         kubernetes.io/metadata.name: {name}\n"
    )
}

pub(crate) fn node_yaml(name: &str) -> String {
    format!("apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: {name}\nspec: {{}}\n")
}

pub(crate) const POOL_YAML: &str = "apiVersion: cilium.io/v2alpha1\nkind: CiliumPodIPPool\nmetadata:\n  \
                         name: default\nspec:\n  ipv4:\n    cidrs: [10.200.0.0/16]\n    \
                         maskSize: 27\n";

pub(crate) const NODE_CONFIG_YAML: &str = "apiVersion: cilium.io/v2\nkind: CiliumNodeConfig\nmetadata:\n  \
                                name: cfg\n  namespace: kube-system\nspec:\n  defaults:\n    \
                                ipam-default-ip-pool: mars\n  nodeSelector: {}\n";

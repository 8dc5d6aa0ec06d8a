//! 1. Layout.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;

// ---------------------------------------------------------------------------------------------
// 1. Layout.

/// Documents at the right places, each a valid document of its kind.
pub(crate) fn put_layout(scratch: &Scratch) {
    scratch.put("ciliumnodes/node1.yaml", &node_yaml("node1"));
    let node2 = read(&scratch.put("source.yaml", &node_yaml("node2")));
    fs::remove_file(scratch.path("source.yaml")).expect("remove source.yaml");
    scratch.put(
        "ciliumnodes/node2.json",
        &serde_json::to_string(&node2).expect("a Value serializes"),
    );
    scratch.put("ciliumnodes/node3.yml", &node_yaml("node3"));
    scratch.put("ciliumpodippools/default.yaml", POOL_YAML);
    scratch.put("ciliumnodeconfigs/kube-system/cfg.yaml", NODE_CONFIG_YAML);
    scratch.put("pods/default/web.yaml", &pod_yaml("default", "web", "web"));
    scratch.put("pods/default/db.json", &pod_json("default", "db", "db"));
    scratch.put("pods/mars/rover.yaml", &pod_yaml("mars", "rover", "rover"));
    scratch.put("namespaces/default.yaml", &namespace_yaml("default"));
    scratch.put("namespaces/mars.yaml", &namespace_yaml("mars"));
}

/// Files that are not documents: valid ones would show up as objects, broken ones as problems.
pub(crate) const IGNORED: &[&str] = &[
    "node9.yaml",                           // top level
    "ciliumnodes/extra/node9.yaml",         // cluster-scoped kind one level too deep
    "ciliumnodeconfigs/cfg9.yaml",          // namespaced kind without a namespace
    "pods/stray.yaml",                      // namespaced kind without a namespace
    "pods/default/sub/deep.yaml",           // too deep
    "namespaces/default/ns9.yaml",          // cluster-scoped kind in a "namespace"
    "ciliumendpoints/ep.yaml",              // unknown kind directory
    "ciliumnodes/.hidden.yaml",             // hidden
    "ciliumnodes/.node1.yaml.weft-tmp",     // the store's own temp file
    "ciliumnodes/node1.yaml.tmp",           // temporary
    "ciliumnodes/node9.tmp",                // temporary
    "ciliumnodes/node1.yaml~",              // editor backup
    "ciliumnodes/node1.yaml.bak",           // backup
    "ciliumnodes/#node1.yaml#",             // editor autosave
    "ciliumnodes/README.md",                // not a document
    "pods/default/.web.yaml.swp",           // editor swap file
    "pods/default/.db.json.tmp",            // hidden temporary
    "namespaces/.mars.yaml",                // hidden
    "ciliumpodippools/default.yaml.orig",   // not a document
    "ciliumnodeconfigs/kube-system/.x.yml", // hidden
];

pub(crate) fn put_ignored(scratch: &Scratch) {
    for (i, rel) in IGNORED.iter().enumerate() {
        // Alternate valid documents of some kind and unparsable text.
        let text = if i % 2 == 0 {
            pod_yaml("default", "ignored", "ignored")
        } else {
            "metadata: [unclosed\n".to_owned()
        };
        scratch.put(rel, &text);
    }
}

pub(crate) fn keys<V>(map: &BTreeMap<String, V>) -> Vec<String> {
    map.keys().cloned().collect()
}

pub(crate) fn assert_layout(snap: &Snapshot, what: &str) {
    assert_eq!(
        snap.nodes.keys().cloned().collect::<Vec<_>>(),
        ["node1", "node2", "node3"],
        "{what}: nodes"
    );
    assert_eq!(keys(&snap.pools), ["default"], "{what}: pools");
    assert_eq!(
        keys(&snap.namespaces),
        ["default", "mars"],
        "{what}: namespaces"
    );
    assert_eq!(
        snap.node_configs.keys().cloned().collect::<Vec<_>>(),
        [nsname("kube-system", "cfg")],
        "{what}: node configs"
    );
    assert_eq!(
        snap.pods.keys().cloned().collect::<Vec<_>>(),
        [
            nsname("default", "db"),
            nsname("default", "web"),
            nsname("mars", "rover")
        ],
        "{what}: pods"
    );
    assert!(
        snap.problems.is_empty(),
        "{what}: problems {:?}",
        snap.problems
    );
    assert!(snap.synced, "{what}: not synced");
    assert_eq!(snap.node_name, "node1", "{what}: node name");
    let own = snap
        .own_node()
        .unwrap_or_else(|| panic!("{what}: no own node"));
    assert_eq!(own.metadata.name, "node1", "{what}: own node");
    assert_eq!(
        snap.nodes["node2"].metadata.name, "node2",
        "{what}: JSON node"
    );
    assert_eq!(
        snap.pods[&nsname("default", "db")].metadata.labels["app"],
        "db",
        "{what}: JSON pod"
    );
    assert_eq!(
        snap.pods[&nsname("mars", "rover")].metadata.labels["app"],
        "rover",
        "{what}: pod"
    );
    let config = &snap.node_configs[&nsname("kube-system", "cfg")];
    assert_eq!(
        config.spec.defaults["ipam-default-ip-pool"], "mars",
        "{what}: node config"
    );
}

#[test]
pub(crate) fn layout_puts_each_document_under_its_key_and_ignores_the_rest() {
    let scratch = Scratch::new();
    put_layout(&scratch);
    put_ignored(&scratch);

    for rel in IGNORED {
        let key = docs::key_of(&scratch.root, &scratch.path(rel));
        assert_eq!(key, None, "{rel} is not a document");
    }
    let key = docs::key_of(&scratch.root, &scratch.path("pods/mars/rover.yaml"))
        .expect("pods/mars/rover.yaml is a document");
    assert_eq!(
        (key.kind, key.namespace.as_str(), key.name.as_str()),
        (docs::Kind::Pod, "mars", "rover")
    );
    let key = docs::key_of(&scratch.root, &scratch.path("ciliumnodes/node3.yml"))
        .expect("ciliumnodes/node3.yml is a document");
    assert_eq!(
        (key.kind, key.namespace.as_str(), key.name.as_str()),
        (docs::Kind::CiliumNode, "", "node3")
    );
    assert_eq!(
        docs::key_of(
            &scratch.root,
            Path::new("/elsewhere/ciliumnodes/node1.yaml")
        ),
        None,
        "a path outside the root is not a document"
    );

    let listed: BTreeSet<PathBuf> = docs::list(&scratch.root)
        .unwrap_or_else(|e| panic!("{}", report(&e)))
        .into_iter()
        .map(|(_, path)| path)
        .collect();
    let expected: BTreeSet<PathBuf> = [
        "ciliumnodes/node1.yaml",
        "ciliumnodes/node2.json",
        "ciliumnodes/node3.yml",
        "ciliumpodippools/default.yaml",
        "ciliumnodeconfigs/kube-system/cfg.yaml",
        "pods/default/web.yaml",
        "pods/default/db.json",
        "pods/mars/rover.yaml",
        "namespaces/default.yaml",
        "namespaces/mars.yaml",
    ]
    .iter()
    .map(|rel| scratch.path(rel))
    .collect();
    assert_eq!(listed, expected, "docs::list");

    let offline = embedded::load_snapshot(&scratch.root, "node1")
        .unwrap_or_else(|e| panic!("{}", report(&e)));
    assert_layout(&offline, "load_snapshot");

    let rt = current_thread();
    rt.block_on(async {
        let store = scratch.open(LONG);
        let snap = store.snapshots().borrow().clone();
        assert_layout(&snap, "the store's first snapshot");
        assert_eq!(snap.nodes, offline.nodes, "store and load_snapshot agree");
        assert_eq!(snap.pods, offline.pods, "store and load_snapshot agree");
    });
}

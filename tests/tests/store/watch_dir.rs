//! 6. inotify.

#[allow(clippy::wildcard_imports, reason = "shared test harness")]
use super::*;

// ---------------------------------------------------------------------------------------------
// 6. inotify.

#[test]
pub(crate) fn inotify_sees_documents_created_changed_and_deleted_while_open() {
    let scratch = Scratch::new();
    scratch.put("namespaces/default.yaml", &namespace_yaml("default"));
    scratch.put("pods/default/web.yaml", &pod_yaml("default", "web", "web"));
    let rt = multi_thread();
    rt.block_on(async {
        let store = scratch.open(LONG);
        let mut rx = store.snapshots();
        let has = |ns: &'static str, name: &'static str| {
            move |s: &Snapshot| s.pods.contains_key(&nsname(ns, name))
        };
        wait_snapshot(&mut rx, "pod default/web", has("default", "web")).await;

        scratch.put("pods/default/api.yaml", &pod_yaml("default", "api", "api"));
        wait_snapshot(&mut rx, "new pod default/api", has("default", "api")).await;

        // A namespace directory that did not exist when the store opened.
        scratch.put("namespaces/late.yaml", &namespace_yaml("late"));
        scratch.put("pods/late/job.json", &pod_json("late", "job", "job"));
        let snap = wait_snapshot(
            &mut rx,
            "pod late/job in a new directory",
            has("late", "job"),
        )
        .await;
        assert!(snap.namespaces.contains_key("late"), "{}", summary(&snap));
        // Only a watch on the new directory sees this one.
        scratch.put("pods/late/job2.yaml", &pod_yaml("late", "job2", "job2"));
        wait_snapshot(
            &mut rx,
            "second pod in the new directory",
            has("late", "job2"),
        )
        .await;

        // A kind directory that did not exist when the store opened.
        scratch.put("ciliumnodeconfigs/kube-system/cfg.yaml", NODE_CONFIG_YAML);
        wait_snapshot(&mut rx, "node config in a new kind directory", |s| {
            s.node_configs.contains_key(&nsname("kube-system", "cfg"))
        })
        .await;

        // Edited in place (truncate and write, as `echo >` does).
        let web = scratch.path("pods/default/web.yaml");
        fs::write(&web, pod_yaml("default", "web", "web2")).expect("rewrite web.yaml");
        wait_snapshot(&mut rx, "the edited pod", |s| {
            s.problems.is_empty()
                && s.pods
                    .get(&nsname("default", "web"))
                    .is_some_and(|p| p.metadata.labels["app"] == "web2")
        })
        .await;

        fs::remove_file(scratch.path("pods/default/api.yaml")).expect("remove api.yaml");
        wait_snapshot(&mut rx, "pod default/api removed", |s| {
            !s.pods.contains_key(&nsname("default", "api"))
        })
        .await;
        fs::rename(web, scratch.path("web.yaml")).expect("move web.yaml out");
        wait_snapshot(&mut rx, "pod default/web moved away", |s| {
            !s.pods.contains_key(&nsname("default", "web"))
        })
        .await;
        fs::remove_dir_all(scratch.path("pods/late")).expect("remove pods/late");
        let snap = wait_snapshot(&mut rx, "the pods of the removed directory gone", |s| {
            !s.pods.keys().any(|(ns, _)| ns == "late")
        })
        .await;
        assert!(snap.pods.is_empty(), "{}", summary(&snap));
        assert!(snap.problems.is_empty(), "{}", summary(&snap));
    });
}

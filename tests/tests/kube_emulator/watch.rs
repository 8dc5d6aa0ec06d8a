//! Lists and watches through kube-rs: pagination, `watcher()` with a field selector, raw
//! watches (bookmarks, selector transitions, dropped connections, 410 Expired, streaming
//! lists), and a `watcher().default_backoff()` surviving 500s, drops and compaction.

use std::time::Duration;

use futures::StreamExt as _;
use kube::{
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    runtime::{
        WatchStreamExt as _,
        watcher::{self, Event},
    },
};
use serde_json::json;
use weft_tests::kube::{Emulator, Verb};

use super::{api_error, ciliumnodes, client, cn, dynamic, is, name_of, next_matching, wait_for};

#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    for i in 0..5 {
        emu.put(cn(&format!("n{i}"), &json!({})));
    }
    let first = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("a continue token");
    emu.put(cn("n9", &json!({})));
    let second = api
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .expect("page 2");
    assert_eq!(
        second.items.len(),
        3,
        "the snapshot of the first page, not n9"
    );
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert!(second.metadata.continue_.is_none());
    let expired = api_error(
        api.list(&ListParams::default().limit(2).continue_token("bogus"))
            .await,
    );
    assert_eq!((expired.code, expired.reason.as_str()), (410, "Expired"));

    let mut stream = watcher::watcher(api, watcher::Config::default().page_size(2))
        .default_backoff()
        .boxed();
    let mut applied = 0;
    wait_for(&mut stream, 10, "paged initial list", |e| {
        applied += usize::from(matches!(e, Ok(Event::InitApply(_))));
        matches!(e, Ok(Event::InitDone))
    })
    .await;
    assert_eq!(applied, 6);
}

#[tokio::test]
async fn watcher_with_a_field_selector_sees_added_modified_deleted() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    emu.put(cn("other", &json!({})));
    let config = watcher::Config::default().fields("metadata.name=n1");
    let mut stream = watcher::watcher(api.clone(), config)
        .default_backoff()
        .boxed();
    wait_for(&mut stream, 10, "initial list", |e| {
        matches!(e, Ok(Event::InitDone))
    })
    .await;
    api.create(&PostParams::default(), &dynamic(cn("n1", &json!({}))))
        .await
        .unwrap();
    api.create(&PostParams::default(), &dynamic(cn("n2", &json!({}))))
        .await
        .unwrap();
    wait_for(&mut stream, 10, "n1 added", |e| is(e, "apply", "n1")).await;
    let patch = json!({"spec": {"bootid": "b"}});
    api.patch("n2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let modified = next_matching(&mut stream, 10, "n1 modified", |e| is(e, "apply", "n1")).await;
    let Ok(Event::Apply(modified)) = modified else {
        unreachable!()
    };
    assert_eq!(modified.data["spec"]["bootid"], "b");
    api.delete("n2", &DeleteParams::default()).await.unwrap();
    api.delete("n1", &DeleteParams::default()).await.unwrap();
    wait_for(&mut stream, 10, "n1 deleted", |e| {
        assert!(
            name_of(e).is_none_or(|(_, n)| n != "n2" && n != "other"),
            "selector leaked {e:?}"
        );
        is(e, "delete", "n1")
    })
    .await;
}

#[tokio::test]
async fn raw_watches_get_bookmarks_selector_transitions_and_410() {
    let emu = Emulator::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    emu.put(cn("n1", &json!({"app": "x"})));
    let rv = emu.resource_version().to_string();
    let wp = WatchParams::default().labels("app=x").timeout(30);
    let mut events = api.watch(&wp, &rv).await.expect("watch").boxed();
    let bookmark = next_matching(&mut events, 5, "a bookmark", |e| {
        matches!(e, Ok(WatchEvent::Bookmark(_)))
    })
    .await;
    let Ok(WatchEvent::Bookmark(bookmark)) = bookmark else {
        unreachable!()
    };
    assert!(bookmark.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse().unwrap());

    // Relabelled out of the selector: DELETED; back in: ADDED.
    let out = json!({"metadata": {"labels": {"app": "y"}}});
    api.patch("n1", &PatchParams::default(), &Patch::Merge(&out))
        .await
        .unwrap();
    wait_for(&mut events, 5, "DELETED on leaving the selector", |e| {
        matches!(e, Ok(WatchEvent::Deleted(_)))
    })
    .await;
    let back = json!({"metadata": {"labels": {"app": "x"}}});
    api.patch("n1", &PatchParams::default(), &Patch::Merge(&back))
        .await
        .unwrap();
    wait_for(&mut events, 5, "ADDED on entering the selector", |e| {
        matches!(e, Ok(WatchEvent::Added(_)))
    })
    .await;

    // A dropped watch ends without its terminating chunk (kube-rs ends the stream).
    emu.faults().drop_watches();
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(event) = events.next().await {
            assert!(matches!(event, Ok(WatchEvent::Bookmark(_))), "{event:?}");
        }
    });
    end.await.expect("the watch ends when dropped");

    // A watch from a compacted version is answered with one ERROR event: 410 Expired.
    emu.compact();
    let mut stale = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let Some(Ok(WatchEvent::Error(status))) = stale.next().await else {
        panic!("expected an ERROR event")
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(stale.next().await.is_none(), "closed after the ERROR event");
    assert_eq!(
        emu.requests().count_code(Verb::Watch, "ciliumnodes", 410),
        1
    );

    // Streaming list: initial ADDED events, then the initial-events-end bookmark.
    let wp = WatchParams::streaming_lists();
    let mut streaming = api.watch(&wp, "").await.expect("streaming list").boxed();
    wait_for(&mut streaming, 5, "n1 in the initial events", |e| {
        matches!(e, Ok(WatchEvent::Added(_)))
    })
    .await;
    let Some(Ok(WatchEvent::Bookmark(end))) = streaming.next().await else {
        panic!("expected a bookmark")
    };
    assert_eq!(
        end.metadata
            .annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );
}

#[tokio::test]
async fn watcher_relists_after_410_and_survives_500s_and_dropped_watches() {
    let emu = Emulator::start();
    let client = client(&emu).await;
    let api = ciliumnodes(&client);
    emu.put(cn("n1", &json!({})));
    emu.faults().fail_next(Verb::List, "ciliumnodes", 1);
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    wait_for(&mut stream, 10, "the list's injected 500", Result::is_err).await;
    wait_for(&mut stream, 10, "initial list after the retry", |e| {
        matches!(e, Ok(Event::InitDone))
    })
    .await;

    // A dropped watch is resumed from the last version: nothing is missed, no relist.
    let lists = emu.requests().count(Verb::List, "ciliumnodes");
    emu.faults().drop_watches();
    emu.put(cn("n2", &json!({})));
    wait_for(&mut stream, 10, "n2 after the drop", |e| {
        is(e, "apply", "n2")
    })
    .await;
    assert_eq!(emu.requests().count(Verb::List, "ciliumnodes"), lists);

    // Cut the watch and fail the re-watch; while the watcher backs off, the history it would
    // resume from is compacted away: its next watch gets 410 and it lists again.
    emu.faults().fail_next(Verb::Watch, "ciliumnodes", 1);
    emu.faults().drop_watches();
    wait_for(
        &mut stream,
        10,
        "the re-watch's injected 500",
        Result::is_err,
    )
    .await;
    emu.put(cn("n3", &json!({})));
    emu.compact();
    wait_for(&mut stream, 20, "a relist", |e| {
        matches!(e, Ok(Event::Init))
    })
    .await;
    let mut names = Vec::new();
    wait_for(&mut stream, 10, "the relist's end", |e| {
        if let Some(("init-apply", n)) = name_of(e) {
            names.push(n);
        }
        matches!(e, Ok(Event::InitDone))
    })
    .await;
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert_eq!(
        emu.requests().count_code(Verb::Watch, "ciliumnodes", 410),
        1
    );
    assert_eq!(
        emu.requests().count_code(Verb::Watch, "ciliumnodes", 500),
        1
    );
    assert_eq!(emu.requests().count(Verb::List, "ciliumnodes"), lists + 1);
}

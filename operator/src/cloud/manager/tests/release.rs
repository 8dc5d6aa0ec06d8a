//! The release handshake (`--azure-release-excess-ips`) against the scripted provider.

use serde_json::Map;

use super::*;

/// The next `release-ips` patch for which `done` holds (panics after 10 s of virtual time,
/// naming `what`).
async fn release_patch(
    rx: &mut mpsc::UnboundedReceiver<NodePatch>,
    what: &str,
    done: impl Fn(&Map<String, Value>) -> bool,
) -> Map<String, Value> {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let p = rx.recv().await.expect("manager alive");
            if let Some(r) = p
                .status
                .as_ref()
                .and_then(|s| s["status"]["ipam"]["release-ips"].as_object().cloned())
                && done(&r)
            {
                return r;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no release-ips patch: {what}"))
}

#[tokio::test(start_paused = true)]
async fn excess_is_released_only_after_the_agent_agrees() {
    let mock = Mock::with(&["i-1"], 100);
    {
        let mut c = mock.0.lock().unwrap();
        let ips: Vec<String> = (1..=12).map(|i| format!("10.0.9.{i}")).collect();
        c.instances.insert("i-1".into(), ips.clone());
        c.cache.insert("i-1".into(), ips);
    }
    let (m, mut rx, _) = start(&mock, true).await;
    let mut view = node("n1", "i-1");
    view.pre_allocate = 8;
    view.used = BTreeSet::from(["10.0.9.1".to_owned()]);
    m.upsert(view.clone());
    // 12 held, 1 used, 8 kept free: 3 in excess, marked for release (never the used one).
    let marks = release_patch(&mut rx, "addresses are marked", |_| true).await;
    assert_eq!(marks.len(), 3, "{marks:?}");
    assert!(!marks.contains_key("10.0.9.1"));
    assert!(
        mock.calls().iter().all(|c| !c.starts_with("release")),
        "nothing released before the agent answers"
    );
    // The agent agrees for two and refuses one.
    let mut answered = view.clone();
    let mut keys = marks.keys();
    let refused = keys.next().unwrap().clone();
    answered
        .release_ips
        .insert(refused.clone(), "do-not-release".into());
    for ip in keys {
        answered
            .release_ips
            .insert(ip.clone(), "ready-for-release".into());
    }
    m.upsert(answered);
    let released =
        release_patch(&mut rx, "released", |r| r.values().any(|v| v == "released")).await;
    assert_eq!(released.values().filter(|v| *v == "released").count(), 2);
    let release_calls: Vec<String> = mock
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("release"))
        .collect();
    assert_eq!(
        release_calls.len(),
        1,
        "one call for both: {release_calls:?}"
    );
    assert!(!release_calls[0].contains(&refused));
}

#[tokio::test(start_paused = true)]
async fn marks_are_withdrawn_when_the_excess_is_gone() {
    let mock = Mock::with(&["i-1"], 100);
    {
        let mut c = mock.0.lock().unwrap();
        let ips: Vec<String> = (1..=10).map(|i| format!("10.0.9.{i}")).collect();
        c.instances.insert("i-1".into(), ips.clone());
        c.cache.insert("i-1".into(), ips);
    }
    let (m, mut rx, _) = start(&mock, true).await;
    let mut view = node("n1", "i-1");
    view.pre_allocate = 8;
    view.pool = (1..=10)
        .map(|i| (format!("10.0.9.{i}"), "nic-i-1".to_owned()))
        .collect();
    m.upsert(view.clone());
    // 10 held, 8 kept free: 2 marked.
    let marked = release_patch(&mut rx, "marked", |_| true).await;
    assert_eq!(marked.len(), 2);
    // Pods start: 4 in use, so nothing is in excess any more; the agent agreed meanwhile.
    view.used = (1..=4).map(|i| format!("10.0.9.{}", 10 - i)).collect();
    for ip in marked.keys() {
        view.release_ips
            .insert(ip.clone(), "ready-for-release".into());
    }
    m.upsert(view);
    let withdrawn = release_patch(&mut rx, "the marks are withdrawn", |r| {
        r.values().all(Value::is_null)
    })
    .await;
    assert_eq!(withdrawn.len(), 2);
    assert!(
        mock.calls().iter().all(|c| !c.starts_with("release")),
        "nothing released: {:?}",
        mock.calls()
    );
}

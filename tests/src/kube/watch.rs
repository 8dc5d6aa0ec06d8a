//! Watches: a chunked HTTP response of newline-delimited JSON events (`ADDED`, `MODIFIED`,
//! `DELETED`, `BOOKMARK`, `ERROR`), one task per watch. Events are filtered by namespace and
//! selectors the way the watch cache filters them: an object that starts matching arrives as
//! ADDED, one that stops matching as DELETED (its previous state at the new resourceVersion).
//! Bookmarks (when `allowWatchBookmarks=true`) come every bookmark interval and carry a
//! version this watch has sent everything up to; `sendInitialEvents=true` ends the initial
//! ADDED events with a bookmark annotated `k8s.io/initial-events-end`. A watch from a version
//! older than the retained history is answered with one ERROR event (Status 410 Expired) and
//! closed. A watch ends cleanly after `timeoutSeconds` and is cut (no terminating chunk) when a
//! test calls `Faults::drop_watches`.

use std::{io, sync::Arc, time::Duration};

use bytes::Bytes;
use hyper::{Response, header};
use serde_json::{Value, json};
use tokio::{
    sync::mpsc,
    time::{Instant, interval_at, sleep},
};

use super::{
    Shared,
    body::Body,
    faults::lock,
    meta::meta_str,
    resources::ResourceDef,
    selectors::Selector,
    store::{Event, EventType, Subscription},
};

/// What a watch request asked for.
#[derive(Debug)]
pub struct WatchParams {
    /// Start after this version; `None`: first the current state as ADDED events.
    pub from: Option<u64>,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: mark the end of the initial events with a bookmark.
    pub initial_events: bool,
    /// `timeoutSeconds`.
    pub timeout: Duration,
}

/// The objects a watch is about.
#[derive(Debug)]
pub struct Scope {
    /// The type.
    pub def: ResourceDef,
    /// The version objects are served at.
    pub version: String,
    /// Only this namespace, if given.
    pub namespace: Option<String>,
    /// Label and field selectors.
    pub selector: Selector,
}

impl Scope {
    fn matches(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta_str(object, "namespace") == ns)
            && self.selector.matches(object)
    }

    fn line(&self, kind: &str, object: &Value) -> Bytes {
        let mut object = object.clone();
        object["apiVersion"] = json!(self.def.api_version(&self.version));
        raw_line(kind, &object)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": self.def.kind, "metadata": metadata});
        self.line("BOOKMARK", &object)
    }

    /// The line this watch sends for `event`, if any.
    fn translate(&self, event: &Event) -> Option<Bytes> {
        let now = self.matches(&event.object);
        let before = event.previous.as_deref().is_some_and(|p| self.matches(p));
        match (event.kind, now, before) {
            (EventType::Added, true, _) | (EventType::Modified, true, false) => {
                Some(self.line("ADDED", &event.object))
            }
            (EventType::Deleted, true, _) => Some(self.line("DELETED", &event.object)),
            (EventType::Modified, true, true) => Some(self.line("MODIFIED", &event.object)),
            (EventType::Modified, false, true) => {
                let mut gone = event.previous.as_deref().cloned().unwrap_or_default();
                gone["metadata"]["resourceVersion"] = json!(event.rv.to_string());
                Some(self.line("DELETED", &gone))
            }
            _ => None,
        }
    }
}

fn raw_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object}))
        .expect("JSON values serialize");
    line.push(b'\n');
    line.into()
}

/// Marks a watch response that carried a 410 ERROR event, for the request counters.
#[derive(Clone, Copy, Debug)]
pub struct Expired;

fn stream_response(body: Body) -> Response<Body> {
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("static response parts")
}

/// Answer a watch request: subscribe now, stream from a task. An expired start is answered in
/// the stream, as the real server does.
pub fn start(shared: &Arc<Shared>, scope: Scope, params: WatchParams) -> Response<Body> {
    let subscription = lock(&shared.store).subscribe(&scope.def, params.from);
    let subscription = match subscription {
        Ok(s) => s,
        Err(e) => {
            let line = raw_line("ERROR", &e.status());
            let mut response = stream_response(Body::full(line));
            response.extensions_mut().insert(Expired);
            return response;
        }
    };
    let (tx, rx) = mpsc::channel(64);
    let shared = Arc::clone(shared);
    tokio::spawn(async move { run(&shared, &scope, &params, subscription, &tx).await });
    stream_response(Body::Stream(rx))
}

type Tx = mpsc::Sender<Result<Bytes, io::Error>>;

/// Send a line; false when the client is gone.
async fn send(tx: &Tx, line: Bytes) -> bool {
    tx.send(Ok(line)).await.is_ok()
}

async fn run(shared: &Shared, scope: &Scope, params: &WatchParams, sub: Subscription, tx: &Tx) {
    let Subscription {
        initial,
        mut events,
        rv,
    } = sub;
    let mut drops = shared.faults.drop_signal();
    for event in &initial {
        if let Some(line) = scope.translate(event)
            && !send(tx, line).await
        {
            return;
        }
    }
    if params.initial_events && !send(tx, scope.bookmark(rv, true)).await {
        return;
    }
    let period = shared.bookmark_interval();
    let mut ticks = interval_at(Instant::now() + period, period);
    let deadline = sleep(params.timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { return };
                if let Some(line) = scope.translate(&event)
                    && !send(tx, line).await
                {
                    return;
                }
            }
            _ = ticks.tick(), if params.bookmarks => {
                // Under the store lock every event up to `now` is already in the channel.
                let (pending, now) = {
                    let store = lock(&shared.store);
                    let mut pending = Vec::new();
                    while let Ok(event) = events.try_recv() {
                        pending.push(event);
                    }
                    (pending, store.rv())
                };
                for event in &pending {
                    if let Some(line) = scope.translate(event)
                        && !send(tx, line).await
                    {
                        return;
                    }
                }
                if !send(tx, scope.bookmark(now, false)).await {
                    return;
                }
            }
            () = &mut deadline => return,
            _ = drops.changed() => {
                let _ = tx.send(Err(io::Error::other("watch dropped by fault injection"))).await;
                return;
            }
            () = tx.closed() => return,
        }
    }
}

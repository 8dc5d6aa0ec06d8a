//! A Kubernetes API server emulator for tests: a test double of kube-apiserver's documented
//! wire behaviour, served over plain HTTP/1.1 (on a loopback port by default), that kube-rs
//! clients and kubectl (the tests, the agent and operator binaries through a kubeconfig) talk
//! to as to a real cluster. It lives only in tests. [`Emulator::start`] (or
//! [`EmulatorBuilder::try_start`]) runs it on its own thread and tokio runtime; the
//! `kube-emulator` program serves it to other processes.
//!
//! **Modelled.** Core v1 `nodes`, `pods`, `namespaces`, `events`; `coordination.k8s.io/v1`
//! `leases` (namespaced, no status subresource, no `generation`: what leader election reads
//! and writes); `cilium.io/v2` `ciliumnodes` (status subresource), `ciliumnodeconfigs` (also
//! served as v2alpha1), `ciliumendpoints` (no status subresource: the fixture CRD declares
//! none), `ciliumidentities` (status subresource); `cilium.io/v2alpha1` `ciliumpodippools`,
//! also served as weft's `v2` (stored as v2alpha1; the versions differ only in `apiVersion`, as
//! with `conversion: None`) — scope, versions and subresources as the fixture CRDs say.
//! Discovery (`/version`, `/api`, `/apis`,
//! group and group-version documents, aggregated discovery). GET, LIST (label selectors with
//! set operations; field selectors on `metadata.name`, `metadata.namespace` and each type's
//! documented fields such as pods' `spec.nodeName`; `limit`/`continue` over a consistent
//! snapshot), WATCH (ADDED/MODIFIED/DELETED/BOOKMARK/ERROR, selector transitions as
//! ADDED/DELETED, periodic bookmarks, `sendInitialEvents`, `timeoutSeconds`, 410 Expired as an
//! ERROR event for a version older than the bounded per-type history), POST (AlreadyExists,
//! `generateName`, name validation, a missing namespace is NotFound), PUT (optimistic
//! concurrency: a stale `resourceVersion` is 409 Conflict, none is unconditional), PATCH
//! (merge and JSON patch; a `resourceVersion` in the patch is a precondition), DELETE
//! (preconditions; finalizers mark `deletionTimestamp` and the last finalizer's removal
//! deletes), DELETE of a collection, and `/status` (status writes keep everything but status —
//! core types also take metadata — and main writes keep status). `uid`, `creationTimestamp`,
//! `generation` (custom resources: bumped when anything but metadata and, with a status
//! subresource, status changes), a global resourceVersion, no-op writes that change nothing,
//! bearer-token authentication (optionally letting in requests without credentials, which is
//! how kubectl comes to a plain-HTTP server: client-go sends a kubeconfig's token only over
//! TLS), and `metav1.Status` errors with the real codes and reasons.
//!
//! **Not modelled.** Schema validation, defaulting and CEL rules of the CRDs; strategic merge
//! patch and server-side apply (415, so managedFields never appear); `dryRun` (400); graceful
//! pod deletion (pods go at once); owner references and garbage collection; admission;
//! RBAC (any valid token may do anything; tests inject 403s as faults); protobuf and table
//! output (kubectl prints its default columns); OpenAPI documents (404: kubectl's `create` and
//! `apply` need `--validate=false`); `resourceVersionMatch=Exact` at an older version;
//! watch-cache progress notifications beyond this type's own writes (bookmarks may lag behind
//! the global version, which is allowed); TLS.

mod body;
mod builder;
mod discovery;
mod faults;
mod meta;
mod pages;
mod patch;
mod resources;
mod route;
mod selectors;
mod server;
mod status;
mod store;
mod verbs;
mod watch;

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use serde_json::Value;

pub use crate::emulator::StartError;

pub use self::{
    builder::EmulatorBuilder,
    faults::{Answer, Faults, RequestKey, Requests, Verb},
    resources::{CreateStatus, ResourceDef},
    status::ApiError,
};
use self::{faults::lock, pages::Pages, store::Store};

/// State shared by the test's handle and the server thread.
#[derive(Debug)]
struct Shared {
    defs: Vec<ResourceDef>,
    store: Mutex<Store>,
    pages: Mutex<Pages>,
    faults: Faults,
    requests: Requests,
    token: Option<String>,
    anonymous: bool,
    bookmark_ms: AtomicU64,
    default_watch_timeout: Duration,
}

impl Shared {
    fn bookmark_interval(&self) -> Duration {
        Duration::from_millis(self.bookmark_ms.load(Ordering::Relaxed).max(1))
    }

    fn def(&self, plural: &str) -> &ResourceDef {
        self.defs
            .iter()
            .find(|d| d.plural == plural)
            .unwrap_or_else(|| panic!("the emulator serves no resource {plural:?}"))
    }
}

/// A running API server emulator; stops (and cuts every connection) on drop.
#[derive(Debug)]
pub struct Emulator {
    shared: Arc<Shared>,
    server: crate::emulator::Server,
}

impl Emulator {
    /// Start with the defaults (built-in types, history 1000, bookmarks every 5 s, a token).
    #[must_use]
    pub fn start() -> Self {
        EmulatorBuilder::default().start()
    }

    /// Settings before starting.
    #[must_use]
    pub fn builder() -> EmulatorBuilder {
        EmulatorBuilder::default()
    }

    /// `http://<address>:<port>`: the address it listens on, or loopback when it listens on
    /// every address (`http://127.0.0.1:<port>` by default).
    #[must_use]
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The address it listens on (as bound: a port 0 asked for is the port chosen).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The port it listens on.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.server.addr().port()
    }

    /// The bearer token requests must carry, if any.
    #[must_use]
    pub fn token(&self) -> Option<&str> {
        self.shared.token.as_deref()
    }

    /// Write a kubeconfig (server URL, the token, namespace `default`) that kube-rs's
    /// `Config::infer` (through `KUBECONFIG`) or `Kubeconfig::read_from` accepts.
    pub fn write_kubeconfig(&self, path: &Path) {
        self.write_kubeconfig_via(path, &self.url());
    }

    /// As [`Emulator::write_kubeconfig`], with `server` as the URL (another route to it).
    pub fn write_kubeconfig_via(&self, path: &Path, server: &str) {
        let text = self.kubeconfig(server);
        std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// The text [`Emulator::write_kubeconfig_via`] writes (context `emulator`, cluster at
    /// `server`, the bearer token if any, namespace `default`), which kube-rs and kubectl read.
    #[must_use]
    pub fn kubeconfig(&self, server: &str) -> String {
        let user = match self.token() {
            Some(token) => format!("    token: {token}\n"),
            None => "    {}\n".to_owned(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: {server}\n\
             contexts:\n- name: emulator\n  context:\n    cluster: emulator\n    user: emulator\n    \
             namespace: default\ncurrent-context: emulator\nusers:\n- name: emulator\n  user:\n{user}"
        )
    }

    /// The resource types served.
    #[must_use]
    pub fn resources(&self) -> &[ResourceDef] {
        &self.shared.defs
    }

    fn def_of(&self, object: &Value) -> &ResourceDef {
        let api_version = object["apiVersion"].as_str().unwrap_or("");
        let kind = object["kind"].as_str().unwrap_or("");
        self.shared
            .defs
            .iter()
            .find(|d| d.kind == kind && d.versions.iter().any(|v| d.api_version(v) == api_version))
            .unwrap_or_else(|| panic!("the emulator serves no {api_version} {kind}"))
    }

    /// Store `object` as given, status included, creating or replacing it (watchers see ADDED
    /// or MODIFIED); the stored object with its new resourceVersion. A namespaced object
    /// without a namespace goes to `default`. No precondition or strategy applies.
    #[expect(
        clippy::must_use_candidate,
        reason = "seeding rarely needs the stored object"
    )]
    pub fn put(&self, object: Value) -> Value {
        let def = self.def_of(&object);
        let stored = lock(&self.shared.store)
            .put(def, object)
            .unwrap_or_else(|e| panic!("emulator put: {e}"));
        (*stored).clone()
    }

    /// One object by plural, namespace (for namespaced types) and name.
    #[must_use]
    pub fn get(&self, plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let def = self.shared.def(plural);
        lock(&self.shared.store)
            .get(def, namespace, name)
            .ok()
            .map(|o| (*o).clone())
    }

    /// Every object of a type.
    #[must_use]
    pub fn list(&self, plural: &str) -> Vec<Value> {
        let def = self.shared.def(plural);
        lock(&self.shared.store)
            .select(def, None, &selectors::Selector::default())
            .into_iter()
            .map(|o| (*o).clone())
            .collect()
    }

    /// Remove an object at once, finalizers or not (watchers see DELETED).
    #[expect(
        clippy::must_use_candidate,
        reason = "removing rarely needs the last state"
    )]
    pub fn remove(&self, plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let def = self.shared.def(plural);
        lock(&self.shared.store)
            .remove(def, namespace, name)
            .map(|o| (*o).clone())
    }

    /// The newest resourceVersion.
    #[must_use]
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).rv()
    }

    /// Compact the history: a watch from any version before now is answered 410 Expired.
    pub fn compact(&self) {
        lock(&self.shared.store).compact();
    }

    /// Change how often watches send bookmarks (takes effect for watches started later).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        self.shared.bookmark_ms.store(ms, Ordering::Relaxed);
    }

    /// Fault injection.
    #[must_use]
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Request counters.
    #[must_use]
    pub fn requests(&self) -> &Requests {
        &self.shared.requests
    }
}

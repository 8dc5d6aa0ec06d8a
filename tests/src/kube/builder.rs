//! Starting an emulator: [`EmulatorBuilder`] holds the settings (served types, history,
//! bookmark interval, token, listen address), binds the socket, seeds the namespaces every
//! cluster has, and runs the server on the shared scaffold ([`crate::emulator`]). Start-up
//! failures are a [`StartError`]; nothing here serves a request.

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex, atomic::AtomicU64},
    time::Duration,
};

use serde_json::{Value, json};

use super::{
    Emulator, Shared, StartError, faults::lock, pages::Pages, resources, resources::ResourceDef,
    server, store::Store,
};

/// Settings for an [`Emulator`] before it starts.
#[derive(Debug)]
pub struct EmulatorBuilder {
    defs: Vec<ResourceDef>,
    history: usize,
    bookmark_interval: Duration,
    token: Option<String>,
    anonymous: bool,
    listen: SocketAddr,
}

impl Default for EmulatorBuilder {
    fn default() -> Self {
        Self {
            defs: resources::builtin(),
            history: 1000,
            bookmark_interval: Duration::from_secs(5),
            token: Some("weft-emulator-token".to_owned()),
            anonymous: false,
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        }
    }
}

impl EmulatorBuilder {
    /// Keep at most `events` events per type for watches to resume from (default 1000).
    #[must_use]
    pub fn history(mut self, events: usize) -> Self {
        self.history = events;
        self
    }

    /// Send watch bookmarks this often (default 5 s; the real server sends about one a minute).
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Require this bearer token (default `weft-emulator-token`); `None`: no authentication.
    #[must_use]
    pub fn token(mut self, token: Option<&str>) -> Self {
        self.token = token.map(str::to_owned);
        self
    }

    /// Also accept requests that carry no credentials, as kube-apiserver with
    /// `--anonymous-auth` and a binding that lets `system:anonymous` do anything; a wrong token
    /// is still 401. kubectl needs it: client-go sends a kubeconfig's token only over TLS, and
    /// the emulator speaks plain HTTP (default: every request must carry the token).
    #[must_use]
    pub fn allow_anonymous(mut self) -> Self {
        self.anonymous = true;
        self
    }

    /// Listen on every address of the namespace it starts in (`0.0.0.0`), so agents in other
    /// network namespaces can reach it through a routed address (default: loopback only).
    #[must_use]
    pub fn all_interfaces(mut self) -> Self {
        self.listen.set_ip(Ipv4Addr::UNSPECIFIED.into());
        self
    }

    /// Listen on `addr` (default `127.0.0.1:0`; port 0 picks a free port).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Also serve the type a CustomResourceDefinition document defines (replacing a built-in
    /// type of the same plural).
    #[must_use]
    pub fn crd(mut self, crd: &Value) -> Self {
        let def = ResourceDef::from_crd(crd).unwrap_or_else(|| panic!("not a served CRD: {crd}"));
        self.defs.retain(|d| d.plural != def.plural);
        self.defs.push(def);
        self
    }

    /// Start serving from a thread of its own; panics if it cannot (see
    /// [`EmulatorBuilder::try_start`]).
    #[must_use]
    pub fn start(self) -> Emulator {
        self.try_start()
            .unwrap_or_else(|e| panic!("emulator: {}", crate::report(&e)))
    }

    /// Start serving from a thread of its own.
    ///
    /// # Errors
    /// The address cannot be bound, or the runtime or thread cannot be created.
    pub fn try_start(self) -> Result<Emulator, StartError> {
        let bound = crate::emulator::bind(self.listen)?;
        let shared = self.shared();
        let server_shared = Arc::clone(&shared);
        let server = bound.serve("kube-emulator", move |req| {
            server::handle(Arc::clone(&server_shared), req)
        })?;
        Ok(Emulator { shared, server })
    }

    /// The state the server and the handle share, with the namespaces every cluster has.
    fn shared(self) -> Arc<Shared> {
        let salt = {
            use std::hash::{BuildHasher as _, Hasher as _};
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        };
        let store = Store::new(&self.defs, self.history, salt);
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            pages: Mutex::<Pages>::default(),
            faults: super::Faults::default(),
            requests: super::Requests::default(),
            token: self.token,
            anonymous: self.anonymous,
            bookmark_ms: AtomicU64::new(
                u64::try_from(self.bookmark_interval.as_millis()).unwrap_or(u64::MAX),
            ),
            default_watch_timeout: Duration::from_mins(30),
            defs: self.defs,
        });
        if shared.defs.iter().any(|d| d.plural == "namespaces") {
            for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
                let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns}, "status": {"phase": "Active"}});
                lock(&shared.store)
                    .put(shared.def("namespaces"), namespace)
                    .expect("a valid namespace");
            }
        }
        shared
    }
}

//! `weft-agent run`: the composition root. It picks the store (`node_store`: the embedded
//! store or the Kubernetes API), ties it, IPAM and the datapath together and serves `weft-cni`.
//!
//! Start-up: load the datapath (adopting pins), open the store, resolve the configuration
//! (file, then CiliumNodeConfig for this node, then flags), restore every endpoint record's
//! addresses before anything new is handed out (reporting those that can never come back),
//! reserve the router addresses, replay DELs queued while the agent was down (again on every
//! tick until they succeed), then serve the CNI socket. After that, every store change (and a
//! one-minute tick, as Cilium's refresh) re-feeds IPAM and writes back what the agent owns in
//! its CiliumNode. Pod operations run side by side: each holds its attachment's lock, and the
//! state lock only for the short IPAM and eBPF map steps (never across netlink); ADD and DEL
//! ask the loop for a write-back instead of waiting for one.

mod add;
mod attachment_lock;
pub mod cloud;
mod del;
mod identities;
mod lock;
mod native_routing;
mod netdev;
mod node_store;
mod observe;
mod ops;
mod pool_ids;
mod pool_masq;
mod queue;
mod records;
mod remote;
mod repeat;
mod restore;
mod result;
mod rewire;
mod router;
mod sanity;
mod startup;
mod tunnel;

use std::{
    collections::BTreeMap,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::sync::Mutex;
use tracing::{info, warn};

pub use self::{
    node_store::NodeStore,
    pool_ids::POOL_IDS_FILE,
    pool_masq::NON_MASQUERADE_CIDRS,
    records::{EndpointRecord, RECORDS_DIR, RecordAddr, RecordError, Records},
    router::{ROUTER_FILE, ROUTER_OWNER},
    sanity::{CheckError, MODE_FILE},
    startup::ipam_config,
};
pub use crate::error::chain;
use crate::{
    cni::{
        proto::{Request, Response},
        server::{self, Handler},
    },
    config::AgentConfig,
    datapath::{AttachMode, Datapath, DatapathConfig},
    faults,
    ipam::manager::IpamManager,
    k8s::K8sError,
    metrics::{Endpoint, Metrics, MetricsError, Readiness, Refresh},
    store::{Snapshot, Store},
};

/// How long the loop lets CNI operations pile up before the sync they asked for.
const SYNC_COALESCE: Duration = Duration::from_millis(50);

/// Where the agent reads the cluster from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSource {
    /// The single-host store in a directory (`--store DIR`).
    Embedded(PathBuf),
    /// The Kubernetes API (in-cluster service account, `KUBECONFIG` or `--kubeconfig`).
    Kubernetes {
        /// An explicit kubeconfig.
        kubeconfig: Option<PathBuf>,
    },
}

/// Where the daemon keeps things and what it was told.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// This node's name (`--node-name` / `NODE_NAME`).
    pub node_name: String,
    /// Where the cluster's objects come from.
    pub store: StoreSource,
    /// Where `/healthz`, `/readyz` and `/metrics` are served (none: not served).
    pub health_addr: Option<SocketAddr>,
    /// Another address for `/metrics` (`--prometheus-serve-addr`; none: the
    /// `prometheus-serve-addr` key, else the health address only).
    pub prometheus_addr: Option<SocketAddr>,
    /// The names `/metrics` serves (`--metrics-naming`).
    pub metrics_naming: crate::metrics::Naming,
    /// State directory (endpoint records, router IPs).
    pub state_dir: PathBuf,
    /// CNI socket.
    pub socket: PathBuf,
    /// Directory of DELs queued by `weft-cni` while the agent was down.
    pub delete_queue: PathBuf,
    /// Datapath pins and attach mode.
    pub datapath: DatapathConfig,
    /// Configuration from the config file or directory.
    pub config_file: BTreeMap<String, String>,
    /// Configuration from flags (wins over everything).
    pub config_flags: BTreeMap<String, String>,
    /// Run although the configuration asks for features weft does not have
    /// (`--allow-unsupported-features`): the feature guard only warns.
    pub allow_unsupported_features: bool,
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The datapath could not be loaded.
    #[error("loading the datapath")]
    Datapath(#[from] crate::datapath::DatapathError),
    /// Another agent runs on the same state or pin directory.
    #[error("one agent per node")]
    Lock(#[from] lock::LockError),
    /// The store could not be opened.
    #[error("opening the store")]
    Store(#[from] crate::store::StoreError),
    /// The Kubernetes API refused or failed (the error names the verb, resource and fix).
    #[error("Kubernetes")]
    K8s(#[source] Arc<K8sError>),
    /// The HTTP endpoint (`/healthz`, `/readyz`, `/metrics`) could not be served.
    #[error("serving /healthz, /readyz and /metrics")]
    Http(#[from] MetricsError),
    /// The configuration is invalid.
    #[error("configuration")]
    Config(#[from] crate::config::ConfigError),
    /// The in-process operator's allocator cannot start (single-host store).
    #[error("configuration")]
    Operator(#[from] crate::store::embedded::operator::OperatorError),
    /// The configuration asks for features weft does not have (the feature guard).
    #[error(transparent)]
    Unsupported(#[from] crate::config::guard::UnsupportedFeatures),
    /// A CiliumNodeConfig for this node is invalid.
    #[error("CiliumNodeConfig for this node")]
    NodeConfig(#[from] crate::crd::nodeconfig::NodeConfigError),
    /// IPAM could not be set up.
    #[error("IPAM")]
    Ipam(#[from] crate::ipam::manager::IpamError),
    /// `router.json` cannot be read.
    #[error("router addresses")]
    Router(#[from] router::RouterError),
    /// `pool-ids.json` cannot be read.
    #[error("pool ids")]
    PoolIds(#[from] pool_ids::PoolIdsError),
    /// The endpoint records could not be read.
    #[error("endpoint records")]
    Records(#[from] RecordError),
    /// The CNI socket could not be served.
    #[error("CNI socket")]
    Socket(#[from] server::ServerError),
    /// Masquerading is on but no native device was given or found.
    #[error(
        "enable-bpf-masquerade is set but there is no native device: set `devices` (there is \
         no IPv4 or IPv6 default route to pick one from)"
    )]
    NoNativeDevice,
    /// A native device named in `devices` does not exist.
    #[error("native device {device} (from `devices`) does not exist")]
    DeviceMissing {
        /// The device.
        device: String,
    },
    /// A start-up check failed: a pod range overlaps the node's networks, or the IPAM mode
    /// changed under existing pods.
    #[error("start-up check failed")]
    Check(#[from] CheckError),
    /// The node's addresses and routes could not be read.
    #[error("reading the node's addresses and routes")]
    NodeNetworks {
        /// The netlink error.
        #[source]
        source: crate::datapath::netlink::NetlinkError,
    },
    /// The tunnel device could not be made or deleted.
    #[error("tunnel device")]
    Tunnel {
        /// The netlink error.
        #[source]
        source: crate::datapath::netlink::NetlinkError,
    },
    /// A native device's addresses (or the default route) could not be read.
    #[error("reading native device {device}")]
    Device {
        /// The device.
        device: String,
        /// The netlink error.
        #[source]
        source: crate::datapath::netlink::NetlinkError,
    },
}

/// The agent's shared state, behind one lock that pod operations hold only for their short
/// IPAM and eBPF map steps (never across netlink or the API server).
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) ipam: IpamManager,
    pub(crate) datapath: Datapath,
    pub(crate) snapshot: Arc<Snapshot>,
    pub(crate) rng: fastrand::Rng,
    /// Router (gateway) address per family, once allocated.
    pub(crate) router: Vec<IpAddr>,
    /// The pool ids of the pinned maps, assigned and persisted.
    pub(crate) pool_ids: pool_ids::PoolIds,
    /// Addresses of records not yet restored (nothing new is handed out until empty).
    pub(crate) unrestored: Vec<(IpAddr, String, String)>,
    /// Native devices and masquerade exclusions.
    pub(crate) net: netdev::NodeNet,
    /// Identities of label sets (single-host store).
    pub(crate) local_ids: crate::identity::LocalAllocator,
    /// The rest of the cluster as applied: IPCache entries and routes to other nodes' pods.
    pub(crate) remote: remote::Remote,
    /// The node's own addresses as last written to the IPCache (`host`).
    pub(crate) host_ips: Option<Vec<IpAddr>>,
    /// The node's own networks (start-up checks; refreshed on every sync).
    pub(crate) node_networks: Vec<crate::ipam::sanity::NodeNetwork>,
    /// Problems of the own CiliumNode already logged: overlaps of pod ranges with the node's
    /// networks, entries that are not addresses.
    pub(crate) reported_overlaps: std::collections::BTreeSet<String>,
}

/// The running agent.
#[derive(Debug)]
pub struct Daemon {
    pub(crate) opts: DaemonOptions,
    pub(crate) config: AgentConfig,
    pub(crate) store: NodeStore,
    pub(crate) records: Records,
    pub(crate) state: Mutex<State>,
    /// Woken when local endpoints or the store change (identities, CiliumEndpoints).
    pub(crate) endpoints_changed: tokio::sync::Notify,
    /// Woken by ADD and DEL: the daemon loop syncs (coalescing a burst into one pass).
    pub(crate) sync_wanted: tokio::sync::Notify,
    /// One operation at a time per CNI attachment.
    pub(crate) attachments: attachment_lock::AttachmentLocks,
    /// One pod interface at a time per (network namespace, ifname): an ADD waits for the
    /// unfinished DEL of the interface it replaces.
    pub(crate) pod_ifaces: attachment_lock::AttachmentLocks,
    /// Where an answered DEL goes to be finished.
    pub(crate) finisher: del::Finisher,
    /// The ENI device configurator (eni mode).
    pub(crate) devices: cloud::devices::Devices,
    /// Every metric; operations count into it, scrapes refresh it ([`Refresh`]).
    pub(crate) metrics: Arc<Metrics>,
    /// The tunnel in force (`routing-mode: tunnel`).
    pub(crate) tunnel: Option<tunnel::Tunnel>,
    /// How the datapath attaches (read once, so status and scrapes need no lock).
    pub(crate) attach_mode: AttachMode,
    /// When start-up began.
    pub(crate) started: Instant,
    /// This agent's hold on its state and pin directories, for as long as it runs.
    pub(crate) _locks: lock::Locks,
}

impl Handler for Daemon {
    async fn handle(&self, request: Request) -> Response {
        let started = Instant::now();
        let (command, response) = match request {
            Request::Add(pod) => ("ADD", self.add(&pod).await),
            Request::Del(pod) => ("DEL", self.del(&pod, del::Finish::InBackground).await),
            Request::Check(pod) => ("CHECK", self.check(&pod).await),
            Request::Status { cni_version } => ("STATUS", self.status(&cni_version).await),
            Request::Gc { cni_version, valid } => ("GC", self.gc(&cni_version, &valid).await),
            Request::Explain { owner } => ("EXPLAIN", self.explain(&owner).await),
            Request::AgentStatus => (
                "AGENT_STATUS",
                Response::Status(Box::new(self.agent_status().await)),
            ),
        };
        let outcome = if matches!(response, Response::Error(_)) {
            crate::metrics::Outcome::Failure
        } else {
            crate::metrics::Outcome::Success
        };
        self.metrics
            .cni
            .request(command, outcome, started.elapsed());
        response
    }
}

impl Daemon {
    /// Start the agent and serve until `shutdown` resolves; then flush the store.
    ///
    /// # Errors
    /// Start-up failed (the error names what and how to fix it).
    pub async fn run(
        opts: DaemonOptions,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), DaemonError> {
        // A bad value stops the agent before it says it serves anything; the checks across
        // keys wait for this node's CiliumNodeConfig defaults (read with the store).
        let values = AgentConfig::resolve_values([&opts.config_file, &opts.config_flags])?;
        let mut shutdown = std::pin::pin!(shutdown);
        let ready = Readiness::default();
        let metrics = Arc::new(Metrics::new(&opts.node_name, opts.metrics_naming));
        let endpoint = Endpoint::new(Arc::clone(&metrics), ready.clone());
        if let Some(addr) = opts.health_addr {
            let bound = endpoint.serve(addr).await?;
            info!(addr = %bound, "serving /healthz and /readyz, and /metrics");
        }
        // The flag wins over the cilium-config key.
        if let Some(addr) = opts.prometheus_addr.or(values.prometheus_serve_addr) {
            let bound = endpoint.serve(addr).await?;
            info!(addr = %bound, "serving Prometheus /metrics");
        }
        let daemon = tokio::select! {
            daemon = startup::start(opts, metrics) => Arc::new(daemon?),
            () = shutdown.as_mut() => return Ok(()),
        };
        endpoint.set_source(Arc::clone(&daemon) as Arc<dyn Refresh>);
        let listener = server::bind(&daemon.opts.socket)?;
        let socket = server::SocketFile::new(&daemon.opts.socket);
        tokio::spawn(server::serve(listener, Arc::clone(&daemon)));
        tokio::spawn(identities::run(Arc::clone(&daemon)));
        tokio::spawn(del::finish_deletes(Arc::clone(&daemon)));
        daemon.endpoints_changed.notify_one();
        ready.set(true);
        if let NodeStore::Kube(store) = &daemon.store
            && daemon.config.remove_node_taints
            && !daemon.config.not_ready_taint_key.is_empty()
        {
            tokio::spawn(crate::k8s::taint::clear(
                store.client(),
                daemon.opts.node_name.clone(),
                daemon.config.not_ready_taint_key.clone(),
            ));
        }
        info!(socket = %daemon.opts.socket.display(), node = %daemon.opts.node_name, "weft-agent ready");
        let mut snapshots = daemon.store.snapshots();
        let mut tick = tokio::time::interval(Duration::from_mins(1));
        let masq_file = daemon.masq_watch().await;
        let kube = match &daemon.store {
            NodeStore::Kube(store) => Some(store.clone()),
            NodeStore::Embedded(_) => None,
        };
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                error = refused(kube.as_ref()) => {
                    ready.set(false);
                    return Err(DaemonError::K8s(error));
                }
                changed = snapshots.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                () = daemon.sync_wanted.notified() => {
                    // A burst of ADDs and DELs is one sync (its dumps of the node's links,
                    // addresses and routes grow with the pods): let it settle.
                    tokio::time::sleep(SYNC_COALESCE).await;
                }
                () = notified(masq_file.as_deref()) => {
                    netdev::reload_masq(&mut *daemon.state.lock().await);
                    continue;
                }
                _ = tick.tick() => {
                    // Beside the loop: a retry waits for the attachments' locks, and a finish
                    // still running holds its lock for as long as the kernel takes.
                    tokio::spawn({
                        let daemon = Arc::clone(&daemon);
                        async move {
                            daemon.retry_finishes().await;
                            daemon.repair_pod_routing().await;
                        }
                    });
                    queue::replay_deletes(&daemon).await;
                    netdev::reload_masq(&mut *daemon.state.lock().await);
                }
            }
            snapshots.borrow_and_update();
            if faults::hit_async(faults::Point::Loop).await.is_err() {
                continue; // this pass is dropped; the next change, request or tick syncs
            }
            daemon.sync().await;
        }
        // No socket once shutting down: the plugin queues DELs instead of finding a stale one.
        drop(socket);
        info!("shutting down; pinned datapath and endpoint records stay for the next start");
        if let Some(store) = &kube {
            store.close();
        }
        if let Err(error) = daemon.store.flush().await {
            warn!(error = %chain(&error), "final CiliumNode write");
        }
        Ok(())
    }

    /// Watch the ip-masq-agent file, if masquerading reads one (a watch that cannot be set
    /// up is logged; the one-minute tick still re-reads the file).
    async fn masq_watch(&self) -> Option<Arc<tokio::sync::Notify>> {
        let state = self.state.lock().await;
        let path = state
            .net
            .masq
            .as_ref()?
            .config()
            .ip_masq_agent_config
            .clone()?;
        match crate::masq::watch_file(&path) {
            Ok(notify) => Some(notify),
            Err(error) => {
                warn!(error = %chain(&error), "ip-masq-agent changes are picked up every minute");
                None
            }
        }
    }

    /// Feed the store's newest snapshot to IPAM, finish restores, and queue the CiliumNode
    /// write-back; keep the node's addresses in the IPCache, and the masquerade exclusions of
    /// the pools and of the native-routing CIDR (eni, azure: detected from the CiliumNode). (The
    /// ip-masq-agent file is re-read by its watch and the tick, not here.)
    pub(crate) async fn sync(&self) {
        let networks = sanity::read_node_networks().await;
        let mut state = self.state.lock().await;
        // The snapshot is read under the state lock, never before it: two syncs side by side
        // (the loop's and an ADD's waiting for its pod) then install reads in the order they
        // were taken, and the state never goes back to a read without a pod already seen.
        let snapshot = self.store.snapshots().borrow().clone();
        state.snapshot = Arc::clone(&snapshot);
        // A test can hold the lock here (a failure injected here is only logged).
        let _held = faults::hit_async(faults::Point::Sync).await;
        state.ipam.observe_node(snapshot.own_node());
        match networks {
            Ok(networks) => state.node_networks = networks,
            Err(error) => warn!(error = %chain(&error), "re-reading the node's networks"),
        }
        let st = &mut *state;
        sanity::warn_new_overlaps(
            self.config.ipam,
            snapshot.own_node(),
            &st.node_networks,
            &mut st.reported_overlaps,
        );
        sanity::warn_new_node_problems(
            self.config.ipam,
            snapshot.own_node(),
            &mut st.reported_overlaps,
        );
        startup::finish_restore(&mut state, &self.opts, &self.records);
        netdev::sync_host_ips(&mut state, snapshot.own_node());
        pool_masq::sync(&mut state, &snapshot.pools, &self.config.default_pool);
        native_routing::sync(
            &mut state,
            self.config.ipam,
            self.config.ipv4_native_routing_cidr,
            snapshot.own_node(),
        );
        let own_ips: std::collections::BTreeSet<IpAddr> =
            netdev::host_ips(&state, snapshot.own_node())
                .into_iter()
                .collect();
        let routing = match self.tunnel {
            Some(tunnel) => remote::Routing::Tunnel {
                oif: tunnel.device.index,
                mtu: tunnel.pod_mtu(),
            },
            None if self.config.auto_direct_node_routes => remote::Routing::Direct,
            None => remote::Routing::None,
        };
        remote::sync(&mut state, &snapshot, &own_ips, routing).await;
        if self.config.ipam == crate::ipam::mode::IpamMode::Eni {
            self.devices.observe(state.ipam.cloud());
        }
        let mut write = state.ipam.node_write(snapshot.own_node(), Instant::now());
        write.cilium_internal_ips = router::write_back(&state.router, snapshot.own_node());
        drop(state);
        if write != crate::store::NodeWrite::default() {
            self.store.write_node(write, &snapshot.write_base());
        }
        self.endpoints_changed.notify_one();
    }
}

/// Resolves with the Kubernetes store's fatal error; never for the embedded store.
async fn refused(store: Option<&crate::k8s::KubeStore>) -> Arc<K8sError> {
    match store {
        Some(s) => s.failed().await,
        None => std::future::pending().await,
    }
}

/// Resolves when `notify` fires; never without one.
async fn notified(notify: Option<&tokio::sync::Notify>) {
    match notify {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

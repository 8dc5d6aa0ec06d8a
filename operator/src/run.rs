//! The composition root: resolve the configuration, plan the mode (`plan`: a block
//! allocator, or a cloud provider), connect, serve `/healthz` (and `/metrics`), wait for
//! leadership, create the configured pools (or, in a cloud mode, set up the provider and start
//! the cloud manager with its first resync), then run
//! the event loop and the writer until SIGTERM/SIGINT or lost leadership. Only the leader
//! watches and writes, so a replica that is not leading mutates nothing.
//!
//! `/healthz` answers 503 with the reason while the API server cannot be used (unreachable,
//! the credential rejected, a permission missing), whether or not this replica leads. After
//! SIGTERM/SIGINT the operator returns within [`GRACE`] whatever it was waiting on (the lease,
//! the pool probe, the first resync, the writer's drain). A 401 or 403 is not fatal: it is
//! retried, as RBAC applied after the Deployment or a rotated token mends it, and logged once
//! when it starts and once when it ends.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use kube::{Client, api::ListParams};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};
use weft_cluster_ipam::clusterpool::ClusterPoolError;
use weft_k8s::{
    Resource,
    client::{ConnectError, status_code},
    config_values::{ConfigDirError, read_config_dir},
    reach::ApiReach,
};

use crate::{
    chain,
    cli::Cli,
    cloud::{
        CloudProvider,
        manager::{CloudManager, NodePatch, Settings},
    },
    config::{ConfigError, IpamMode, LEASE_NAME, OperatorConfig},
    http::{self, ListenError},
    k8s::{OperatorK8sError, controller, pools, writer},
    leader::Elector,
    metrics::{CloudObserver, Metrics},
};

mod plan;
use plan::Plan;

/// How long the writer may take to finish queued writes at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after SIGTERM/SIGINT the operator may take to stop (the writer's drain, the lease's
/// release); it then returns whatever it was doing. Well inside Kubernetes' default 30 s.
pub const GRACE: Duration = Duration::from_secs(10);
/// How long the runtime may keep tasks that still run after [`run`] returned.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(1);
/// Where a 403's fix points.
const RBAC_HINT: &str = "; deploy/operator/rbac.yaml has the rules weft-operator needs";

/// Why the operator stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The config directory could not be read.
    #[error(transparent)]
    ConfigDir(#[from] ConfigDirError),
    /// A setting is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The cluster pool's CIDRs are refused (Cilium's texts).
    #[error("cluster-pool")]
    ClusterPool(#[from] ClusterPoolError),
    /// No Kubernetes client.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A listener could not be opened.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The Kubernetes side failed for good.
    #[error(transparent)]
    K8s(#[from] OperatorK8sError),
    /// The leader could not renew its lease in time; exiting so that another replica (or this
    /// one, restarted) takes over cleanly.
    #[error("leader election lost")]
    LeadershipLost,
    /// The cloud provider could not be set up (its settings, metadata service, credentials).
    #[error(transparent)]
    CloudSetup(Box<dyn std::error::Error + Send + Sync>),
    /// The cloud node manager could not start (its first resync failed).
    #[error(transparent)]
    Cloud(Box<dyn std::error::Error + Send + Sync>),
}

fn identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "weft-operator".to_owned());
    let suffix: String = std::iter::repeat_with(fastrand::alphanumeric)
        .take(10)
        .collect();
    format!("{base}-{}", suffix.to_ascii_lowercase())
}

/// The pool resource to watch: `v2` where it is served (weft's CRD), else `v2alpha1`
/// (Cilium's CRD, where v2 is not served). Only a 404 means "not served": other failures are
/// retried, because reading v2 pools through v2alpha1 would lose their `reservedRanges`.
async fn pool_resource(client: &Client) -> Resource {
    let mut wait = Duration::from_millis(200);
    loop {
        match Resource::CiliumPodIpPoolV2
            .all(client)
            .list_metadata(&ListParams::default().limit(1))
            .await
        {
            Ok(_) => return Resource::CiliumPodIpPoolV2,
            Err(e) if status_code(&e) == Some(404) => {
                info!(
                    "cilium.io/v2 CiliumPodIPPool is not served; using v2alpha1 (reservedRanges need weft's CRD)"
                );
                return Resource::CiliumPodIpPool;
            }
            Err(error) => {
                // The client's ApiReach logs a change of reachability or permission once.
                debug!(error = %chain(&error), "probing cilium.io/v2 CiliumPodIPPool failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn signalled() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Sets the cloud manager's gauges before a scrape, once the manager runs.
type CloudRefresh = Arc<OnceLock<Box<dyn Fn() + Send + Sync>>>;

/// `/healthz`, and `/metrics` with `--enable-metrics` (the gauges of state are set from the
/// block modes' `manager`, or the cloud manager once it runs, before each scrape).
async fn serve_http(
    config: &OperatorConfig,
    metrics: &Metrics,
    manager: Option<&controller::SharedManager>,
    cloud: &CloudRefresh,
    reach: &ApiReach,
) -> Result<(), ListenError> {
    let reach = reach.clone();
    let health: http::Health = Arc::new(move || reach.problem());
    http::serve(
        config.api_addr,
        "--operator-api-serve-addr",
        http::Serves::Health(health),
    )
    .await?;
    if config.enable_metrics {
        let (m, shared, cloud) = (metrics.clone(), manager.map(Arc::clone), Arc::clone(cloud));
        let refresh: http::Refresh = Arc::new(move || {
            if let Some(shared) = &shared {
                m.observe(&controller::lock(shared));
            } else if let Some(observe) = cloud.get() {
                observe();
            }
        });
        http::serve(
            config.prometheus_addr,
            "--operator-prometheus-serve-addr",
            http::Serves::Metrics(metrics.registry(), Box::new(metrics.clone()), refresh),
        )
        .await?;
    }

    Ok(())
}

/// How often a mounted config directory is read again.
const CONFIG_POLL: Duration = Duration::from_secs(2);

/// Re-reads `--config-dir` (a ConfigMap volume changes in place) and hands a changed
/// configuration to the node manager; a refused change is logged and changes nothing.
async fn watch_config(
    cli: Cli,
    mut last: BTreeMap<String, String>,
    manager: controller::SharedManager,
    writes: mpsc::UnboundedSender<writer::Op>,
) {
    let Some(dir) = cli.config_dir.clone() else {
        return;
    };
    loop {
        tokio::time::sleep(CONFIG_POLL).await;
        let file = match read_config_dir(&dir) {
            Ok(file) if file != last => file,
            Ok(_) => continue,
            Err(error) => {
                warn!(%error, "re-reading the configuration failed; keeping the running one");
                continue;
            }
        };
        last.clone_from(&file);
        let config = match OperatorConfig::resolve(&cli, &file) {
            Ok(config) => config,
            Err(error) => {
                warn!(error = %chain(&error), "configuration change refused; nothing changed");
                continue;
            }
        };
        match controller::lock(&manager).reconfigure(&config.cluster_pool) {
            Ok(out) => {
                info!(dir = %dir.display(), "configuration changed; applied");
                for write in out {
                    let _ = writes.send(writer::Op::Write(write));
                }
            }
            Err(error) => {
                warn!(error = %chain(&error), "configuration change refused; nothing changed");
            }
        }
    }
}

/// Multi-pool: the pool resource to watch, after creating the configured pools.
async fn pools_for(
    client: &Client,
    config: &OperatorConfig,
) -> Result<Option<Resource>, OperatorK8sError> {
    if config.ipam != IpamMode::MultiPool {
        return Ok(None);
    }
    let resource = pool_resource(client).await;
    pools::auto_create(client, resource, &config.auto_create_pools).await?;
    Ok(Some(resource))
}

/// What the leader runs once elected: the event loop over `manager`, the writer, and for
/// the cloud manager its resync loop; until a signal or lost leadership.
struct Leading<'a> {
    client: Client,
    config: &'a OperatorConfig,
    metrics: &'a Metrics,
    stop: watch::Receiver<bool>,
    cloud_refresh: CloudRefresh,
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Run the operator over the config directory's keys `file` (read by the caller, whose
/// logging set-up reads them too) until SIGTERM/SIGINT; after the signal it returns within
/// [`GRACE`] whatever it is waiting on.
///
/// # Errors
/// See [`RunError`]; [`RunError::LeadershipLost`] means exit non-zero and be restarted.
pub async fn run(cli: Cli, file: BTreeMap<String, String>) -> Result<(), RunError> {
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        signalled().await;
        info!("signal received; shutting down");
        let _ = stop_tx.send(true);
    });
    let deadline = {
        let stop = stop.clone();
        async move {
            stopped(stop).await;
            tokio::time::sleep(GRACE).await;
        }
    };
    tokio::select! {
        outcome = operate(cli, file, stop) => outcome,
        () = deadline => {
            warn!(grace = ?GRACE, "not stopped in time after the signal; exiting anyway");
            Ok(())
        }
    }
}

/// [`run`] but for the bound on the shutdown.
async fn operate(
    cli: Cli,
    file: BTreeMap<String, String>,
    stop: watch::Receiver<bool>,
) -> Result<(), RunError> {
    let config = OperatorConfig::resolve(&cli, &file)?;
    if config.ipam == IpamMode::Eni {
        for (key, why) in crate::config::eni_not_supported(&file) {
            warn!(%key, "a cilium-config key weft-operator does not act on: {why}");
        }
    }
    let plan = Plan::of(&config)?;
    info!(ipam = ?config.ipam, ipv4 = config.enable_ipv4, ipv6 = config.enable_ipv6, leader_election = config.leader_election, "weft-operator starting");
    let metrics = Metrics::with_naming(cli.metrics_naming);
    let (client, reach) = weft_k8s::client::connect_watched(
        cli.kubeconfig.as_deref(),
        Some(metrics.kube.clone()),
        "",
        RBAC_HINT,
    )
    .await?;
    // The identity garbage collection's permissions: missing, they stop the collection (and are
    // logged), not the IPAM, so /healthz stays 200 and the liveness probe does not restart it.
    reach.set_side_resources(&["ciliumidentities", "ciliumendpoints", "events"]);

    let cloud_refresh = CloudRefresh::default();
    serve_http(&config, &metrics, plan.blocks(), &cloud_refresh, &reach).await?;

    let mut leadership = if config.leader_election {
        let elector = Elector::new(
            client.clone(),
            &config.lease_namespace,
            LEASE_NAME,
            &identity(),
            config.leader,
        );
        tokio::select! {
            l = elector.acquire() => Some(l),
            () = stopped(stop.clone()) => return Ok(()),
        }
    } else {
        None
    };
    metrics.leader.set(1);
    // Aborted on every way out of the leading phase, early errors included.
    let identity_gc = AbortOnDrop(tokio::spawn(crate::identitygc::run(
        client.clone(),
        config.identity_gc,
        metrics.identity_gc.clone(),
        stopped(stop.clone()),
    )));
    let lost = async {
        match leadership.as_mut() {
            Some(l) => l.lost().await,
            None => std::future::pending().await,
        }
    };
    let leading = Leading {
        client: client.clone(),
        config: &config,
        metrics: &metrics,
        stop: stop.clone(),
        cloud_refresh,
    };
    let outcome = match plan {
        Plan::Blocks(manager) => {
            let pool_resource = tokio::select! {
                r = pools_for(&client, &config) => r?,
                () = stopped(stop.clone()) => return Ok(()),
            };
            let pass = crate::migrate::pass(&client, &config, pool_resource);
            let serve = leading.blocks(cli, file, manager, pool_resource, lost);
            crate::migrate::before(pass, stopped(stop.clone()), serve)
                .await
                .unwrap_or(Ok(()))
        }
        Plan::Cloud(start) => start(&leading, Box::pin(lost)).await,
    };
    drop(identity_gc);
    metrics.leader.set(0);
    let lost_leadership = matches!(outcome, Err(RunError::LeadershipLost));
    if !lost_leadership && let Some(l) = leadership {
        l.release().await;
    }
    outcome?;
    info!("weft-operator stopped");
    Ok(())
}

impl Leading<'_> {
    /// Runs the event loop over `manager` and the writer; `extra` runs beside them (the cloud
    /// manager's resync loop) until the shutdown.
    async fn serve<M: controller::Nodes>(
        &self,
        manager: Arc<Mutex<M>>,
        pool_resource: Option<Resource>,
        writes: mpsc::UnboundedSender<writer::Op>,
        ops: mpsc::UnboundedReceiver<writer::Op>,
        lost: impl Future<Output = ()>,
        extra: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        let writer_task = tokio::spawn(writer::run(self.client.clone(), ops, self.metrics.clone()));
        let mut lost_leadership = false;
        let outcome = {
            let shutdown = async {
                tokio::select! {
                    () = stopped(self.stop.clone()) => {}
                    () = lost => lost_leadership = true,
                }
            };
            let event_loop = controller::run(
                self.client.clone(),
                manager,
                pool_resource,
                writes,
                self.metrics.clone(),
                self.config.nodes_gc_interval,
                shutdown,
            );
            tokio::pin!(event_loop, extra);
            tokio::select! {
                r = &mut event_loop => r,
                () = &mut extra => event_loop.await,
            }
        };
        if lost_leadership {
            // Stop at once: another replica may take over after the lease duration.
            writer_task.abort();
            return Err(RunError::LeadershipLost);
        }
        if tokio::time::timeout(DRAIN_TIMEOUT, writer_task)
            .await
            .is_err()
        {
            warn!("queued CiliumNode writes did not finish in time");
        }
        Ok(outcome?)
    }

    /// Cluster-pool and multi-pool.
    async fn blocks(
        &self,
        cli: Cli,
        file: BTreeMap<String, String>,
        manager: controller::SharedManager,
        pool_resource: Option<Resource>,
        lost: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        let (writes, ops) = mpsc::unbounded_channel();
        let watcher = tokio::spawn(watch_config(
            cli,
            file,
            Arc::clone(&manager),
            writes.clone(),
        ));
        let outcome = self
            .serve(
                manager,
                pool_resource,
                writes,
                ops,
                lost,
                std::future::pending(),
            )
            .await;
        watcher.abort();
        outcome
    }

    /// A cloud provider behind the cloud node manager.
    async fn cloud<P: CloudProvider>(
        &self,
        provider: P,
        lost: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        let (writes, ops) = mpsc::unbounded_channel();
        let (patch_tx, mut patch_rx) = mpsc::unbounded_channel::<NodePatch>();
        let settings = Settings {
            parallel_workers: self.config.cloud.parallel_alloc_workers,
            release_excess: self.config.cloud.release_excess_ips,
            release_delay: self.config.cloud.release_delay,
        };
        let observer = Box::new(CloudObserver(self.metrics.clone()));
        let manager = tokio::select! {
            m = CloudManager::start(provider, settings, patch_tx, observer) => {
                m.map_err(|e| RunError::Cloud(Box::new(e)))?
            }
            () = stopped(self.stop.clone()) => return Ok(()),
        };
        let for_scrape = manager.clone();
        let _ = self
            .cloud_refresh
            .set(Box::new(move || for_scrape.observe()));
        let forward = {
            let writes = writes.clone();
            tokio::spawn(async move {
                while let Some(mut patch) = patch_rx.recv().await {
                    for event in std::mem::take(&mut patch.events) {
                        let _ = writes.send(writer::Op::Event {
                            object: serde_json::json!({
                                "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                                "metadata": {"name": patch.node},
                            }),
                            reason: event.reason,
                            message: event.message,
                        });
                    }
                    if patch.spec.is_some() || patch.status.is_some() {
                        let _ = writes.send(writer::Op::Patch(patch));
                    }
                }
            })
        };
        let resync = manager.run(stopped(self.stop.clone()));
        let outcome = self
            .serve(
                Arc::new(Mutex::new(manager.clone())),
                None,
                writes,
                ops,
                lost,
                resync,
            )
            .await;
        forward.abort();
        outcome
    }
}

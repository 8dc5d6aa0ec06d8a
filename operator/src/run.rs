//! The composition root: resolve the configuration, build the mode's allocator, connect,
//! serve `/healthz` (and `/metrics`), wait for leadership, create the configured pools, then
//! run the event loop and the writer until SIGTERM/SIGINT or lost leadership. Only the leader
//! watches and writes, so a replica that is not leading mutates nothing.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use kube::{Client, api::ListParams};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};
use weft_k8s::{
    Resource,
    client::{ConnectError, status_code},
    config_values::{ConfigDirError, read_config_dir},
};

use crate::{
    cli::Cli,
    config::{ConfigError, IpamMode, LEASE_NAME, OperatorConfig},
    http::{self, ListenError},
    ipam::clusterpool::ClusterPoolError,
    k8s::{OperatorK8sError, controller, pools, writer},
    leader::Elector,
    manager::{Allocator, ClusterPoolAllocator, MultiPoolAllocator, NodeManager},
    metrics::Metrics,
};

/// How long the writer may take to finish queued writes at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

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
    #[error("cluster-pool: {0}")]
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
                warn!(%error, "probing cilium.io/v2 CiliumPodIPPool failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
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

/// `/healthz`, and `/metrics` with `--enable-metrics`.
async fn serve_http(
    config: &OperatorConfig,
    metrics: &Metrics,
    manager: &controller::SharedManager,
) -> Result<(), ListenError> {
    http::serve(config.api_addr, "--operator-api-serve-addr", None).await?;
    if config.enable_metrics {
        let (m, shared) = (metrics.clone(), Arc::clone(manager));
        let refresh: http::Refresh = Arc::new(move || m.observe(&controller::lock(&shared)));
        http::serve(
            config.prometheus_addr,
            "--operator-prometheus-serve-addr",
            Some((metrics.registry(), refresh)),
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
        let result = OperatorConfig::resolve(&cli, &file)
            .map_err(|e| e.to_string())
            .and_then(|config| controller::lock(&manager).reconfigure(&config));
        match result {
            Ok(out) => {
                info!(dir = %dir.display(), "configuration changed; applied");
                for write in out {
                    let _ = writes.send(writer::Op::Write(write));
                }
            }
            Err(error) => warn!(%error, "configuration change refused; nothing changed"),
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

/// The mode's allocator, built from the configuration.
fn allocator(config: &OperatorConfig) -> Result<Box<dyn Allocator>, RunError> {
    Ok(match config.ipam {
        IpamMode::ClusterPool => Box::new(ClusterPoolAllocator::new(&config.cluster_pool)?),
        IpamMode::MultiPool => Box::new(MultiPoolAllocator::new(
            config.enable_ipv4,
            config.enable_ipv6,
        )),
    })
}

/// Run the operator.
///
/// # Errors
/// See [`RunError`]; [`RunError::LeadershipLost`] means exit non-zero and be restarted.
pub async fn run(cli: Cli) -> Result<(), RunError> {
    let file = match &cli.config_dir {
        Some(dir) => read_config_dir(dir)?,
        None => BTreeMap::new(),
    };
    let config = OperatorConfig::resolve(&cli, &file)?;
    let allocator = allocator(&config)?;
    info!(ipam = ?config.ipam, ipv4 = config.enable_ipv4, ipv6 = config.enable_ipv6, leader_election = config.leader_election, "weft-operator starting");
    let metrics = Metrics::default();
    let manager = Arc::new(Mutex::new(NodeManager::new(allocator)));
    let client =
        weft_k8s::client::connect(cli.kubeconfig.as_deref(), Some(metrics.kube.clone()), "")
            .await?;

    serve_http(&config, &metrics, &manager).await?;

    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        signalled().await;
        info!("signal received; shutting down");
        let _ = stop_tx.send(true);
    });
    let stopped = |mut stop: watch::Receiver<bool>| async move {
        let _ = stop.wait_for(|s| *s).await;
    };

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

    let pool_resource = pools_for(&client, &config).await?;

    let (writes, ops) = mpsc::unbounded_channel();
    tokio::spawn(watch_config(
        cli.clone(),
        file,
        Arc::clone(&manager),
        writes.clone(),
    ));
    let writer_task = tokio::spawn(writer::run(client.clone(), ops, metrics.clone()));
    let lost = async {
        match leadership.as_mut() {
            Some(l) => l.lost().await,
            None => std::future::pending().await,
        }
    };
    let mut lost_leadership = false;
    let outcome = {
        let shutdown = async {
            tokio::select! {
                () = stopped(stop.clone()) => {}
                () = lost => lost_leadership = true,
            }
        };
        controller::run(
            client,
            Arc::clone(&manager),
            pool_resource,
            writes,
            metrics.clone(),
            config.nodes_gc_interval,
            shutdown,
        )
        .await
    };
    metrics.leader.set(0);
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
    if let Some(l) = leadership {
        l.release().await;
    }
    outcome?;
    info!("weft-operator stopped");
    Ok(())
}

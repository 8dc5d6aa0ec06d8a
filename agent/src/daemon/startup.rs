//! Daemon start-up: datapath, store, configuration, and the restore of every address an
//! endpoint record holds (plus the router addresses) before any new address is handed out.

use std::{net::IpAddr, sync::Arc, time::Instant};

use tokio::sync::Mutex;
use tracing::{info, warn};

use super::{Daemon, DaemonError, DaemonOptions, NodeStore, Records, State, sanity};
use crate::{
    config::AgentConfig,
    crd::nodeconfig::resolve_node_config,
    datapath::Datapath,
    ipam::manager::{IpamConfig, IpamManager},
    k8s::{KubeStore, discovery},
    metrics::Metrics,
    store::{
        Store as _,
        embedded::{
            EmbeddedStore,
            operator::{InProcessOperator, OperatorConfig, OperatorError},
        },
    },
};

pub(super) async fn start(
    opts: DaemonOptions,
    metrics: Arc<Metrics>,
) -> Result<Daemon, DaemonError> {
    let started = Instant::now();
    crate::datapath::prepare_pin_dir(&opts.datapath.pin_dir)?;
    let locks = super::lock::take(&opts.state_dir, &opts.datapath.pin_dir)?;
    let mut datapath = Datapath::load(&opts.datapath)?;
    let attach_mode = datapath.attach_mode();
    let early = AgentConfig::resolve([&opts.config_file, &opts.config_flags])?;
    let store = open_store(&opts, &early, &metrics).await?;
    let snapshot = store.snapshots().borrow().clone();
    let labels = snapshot
        .own_node()
        .map(|n| n.metadata.labels.clone())
        .unwrap_or_default();
    let configs: Vec<_> = snapshot.node_configs.values().cloned().collect();
    let per_node = resolve_node_config(&configs, &labels)?;
    // The feature guard judges the keys as resolved: a CiliumNodeConfig may override the file.
    crate::config::guard::review([
        ("config file", &opts.config_file),
        ("CiliumNodeConfig", &per_node),
    ])
    .enforce(opts.allow_unsupported_features)?;
    let config = AgentConfig::resolve([&opts.config_file, &per_node, &opts.config_flags])?;
    info!(ipam = %config.ipam, default_pool = %config.default_pool, ipv4 = config.enable_ipv4, ipv6 = config.enable_ipv6, "configuration");
    start_operator(&store, &config, &opts.node_name)?;
    let records = Records::open(&opts.state_dir)?;
    sanity::check_mode(&opts.state_dir, config.ipam, &records)?;
    sanity::check_restorable(&opts.state_dir, &config, &records)?;
    super::router::load(&opts.state_dir)?;
    let node_networks = sanity::read_node_networks().await?;
    sanity::check_overlaps(config.ipam, snapshot.own_node(), &node_networks)?;
    let net = super::netdev::setup(&mut datapath, &config).await?;
    let tunnel = super::tunnel::setup(&mut datapath, &config).await?;
    let remote =
        super::remote::Remote::inherit(&mut datapath)?.with_underlay(tunnel.map(|t| t.underlay_v6));
    let mut ipam = IpamManager::new(ipam_config(&config))?;
    ipam.observe_node(snapshot.own_node());
    let mut state = State {
        ipam,
        datapath,
        snapshot,
        rng: fastrand::Rng::new(),
        router: Vec::new(),
        pool_ids: super::pool_ids::PoolIds::open(&opts.state_dir)?,
        unrestored: Vec::new(),
        net,
        local_ids: crate::identity::LocalAllocator::default(),
        remote,
        host_ips: None,
        node_networks,
        reported_overlaps: std::collections::BTreeSet::new(),
    };
    state.unrestored = unrestored(&records, &mut state, &config).await?;
    finish_restore(&mut state, &opts, &records);
    let devices = super::cloud::devices::Devices::new(&opts.state_dir);
    let daemon = Daemon {
        devices,
        opts,
        config,
        store,
        records,
        state: Mutex::new(state),
        endpoints_changed: tokio::sync::Notify::new(),
        sync_wanted: tokio::sync::Notify::new(),
        attachments: super::attachment_lock::AttachmentLocks::default(),
        pod_ifaces: super::attachment_lock::AttachmentLocks::default(),
        finisher: super::del::Finisher::default(),
        metrics,
        tunnel,
        attach_mode,
        started,
        _locks: locks,
    };
    super::queue::replay_deletes(&daemon).await;
    daemon.sync().await;
    Ok(daemon)
}

/// Open the store; against Kubernetes, first make sure the own CiliumNode exists and is
/// seeded, then wait until every watch has listed (retrying while the API server is away).
async fn open_store(
    opts: &DaemonOptions,
    early: &AgentConfig,
    metrics: &Metrics,
) -> Result<NodeStore, DaemonError> {
    match &opts.store {
        super::StoreSource::Embedded(dir) => Ok(NodeStore::Embedded(EmbeddedStore::open(
            dir,
            &opts.node_name,
            early.node_update_rate,
        )?)),
        super::StoreSource::Kubernetes { kubeconfig } => {
            let fail = |e| DaemonError::K8s(Arc::new(e));
            let client = crate::k8s::connect(kubeconfig.as_deref(), Some(metrics.kube.clone()))
                .await
                .map_err(fail)?;
            let seeded = discovery::ensure_cilium_node(
                &client,
                &opts.node_name,
                early.ipam,
                &early.node_seed,
            )
            .await
            .map_err(fail)?;
            // auto-create-cilium-node-resource: create it again if it is deleted.
            let seeded = early.node_seed.auto_create.then_some(seeded);
            let store = KubeStore::open(client, &opts.node_name, early.node_update_rate, seeded);
            info!("Waiting until all pre-existing resources have been received");
            store.wait_synced().await.map_err(DaemonError::K8s)?;
            Ok(NodeStore::Kube(store))
        }
    }
}

/// On the single-host store, run the operator's allocator of the mode in-process (nothing
/// answers the own CiliumNode otherwise); against Kubernetes the real operator does.
fn start_operator(
    store: &NodeStore,
    config: &AgentConfig,
    node_name: &str,
) -> Result<(), OperatorError> {
    let NodeStore::Embedded(embedded) = store else {
        return Ok(());
    };
    let Some(operator) = OperatorConfig::for_agent(config) else {
        return Ok(());
    };
    match &operator {
        OperatorConfig::ClusterPool(pool) => info!(
            ipv4 = ?pool.ipv4.cidrs, ipv4_mask = pool.ipv4.mask_size,
            ipv6 = ?pool.ipv6.cidrs, ipv6_mask = pool.ipv6.mask_size,
            "the cluster-pool allocator runs in-process: it hands this node's podCIDRs out of the cluster-pool CIDRs"
        ),
        OperatorConfig::MultiPool { .. } => info!(
            "the multi-pool allocator runs in-process: it carves the store's CiliumPodIPPools into spec.ipam.pools.allocated"
        ),
    }
    embedded.start_operator(InProcessOperator::new(&operator, node_name)?);
    Ok(())
}

/// The IPAM part of the agent configuration.
#[must_use]
pub fn ipam_config(config: &AgentConfig) -> IpamConfig {
    IpamConfig {
        mode: config.ipam,
        default_pool: config.default_pool.clone(),
        pre_allocation: config.multi_pool_pre_allocation.clone(),
        ipv4: config.enable_ipv4,
        ipv6: config.enable_ipv6,
        health_checking: config.health_checking,
        only_masquerade_default_pool: config.only_masquerade_default_pool,
        bypass_ip_availability_upon_restore: config.bypass_ip_availability_upon_restore,
    }
}

/// Addresses to restore: every record whose pod still exists, its datapath rebuilt whatever
/// survived in bpffs; records of pods that vanished while the agent was down are unwired and
/// dropped (their addresses were never restored, so they are simply free).
async fn unrestored(
    records: &Records,
    state: &mut State,
    config: &AgentConfig,
) -> Result<Vec<(IpAddr, String, String)>, DaemonError> {
    let default_pool = config.default_pool.as_str();
    let cloud = super::cloud::routes_pods(config.ipam);
    let mut live = std::collections::BTreeSet::new();
    let (all, corrupt) = records.all()?;
    for error in corrupt {
        warn!(error = %super::chain(&error), "skipping endpoint record");
    }
    let mut out = Vec::new();
    for record in all {
        if !record.netns.exists() || record.result.is_none() {
            // The pod vanished while the agent was down, its ADD was interrupted (the runtime
            // retries it) or its DEL was answered and not finished: unwire; the addresses were
            // never restored, so they are simply free.
            info!(container = %record.container_id, finished = record.result.is_some(), deleting = record.deleting, "cleaning up a gone or unfinished attachment");
            if let Err(error) = state
                .datapath
                .remove_pod(&record.container_id, &record.ifname)
                .await
            {
                warn!(%error, container = %record.container_id, "unwiring a vanished pod");
            }
            // Its veth may be gone with its netns: drop its map entries by address.
            if let Err(error) = super::ops::purge_endpoints(&mut state.datapath, &record.addrs) {
                warn!(error = %super::chain(&error), container = %record.container_id, "removing a vanished pod's map entries");
            }
            records.remove(&record.container_id, &record.ifname)?;
            continue;
        }
        live.extend(record.addrs.iter().map(|a| a.ip));
        // The pod's source routing, before the socket serves (rules survive a restart, but
        // not a reboot of the node's network or a hand's `ip rule flush`).
        if cloud && let Err(error) = super::cloud::install(config, &record.routing).await {
            warn!(error = %super::chain(&error), pod = %record.owner, "rebuilding the pod's source routing failed; a repeated ADD retries");
        }
        match super::rewire::rewire(
            &mut state.datapath,
            &mut state.pool_ids,
            &record,
            default_pool,
        )
        .await
        {
            Ok(true) => {}
            Ok(false) => warn!(
                container = %record.container_id, pod = %record.owner, host_ifname = %record.host_ifname,
                "the pod's host interface is gone while its sandbox lives; it has no network until it is added again"
            ),
            Err(error) => warn!(
                error = %super::chain(&error), pod = %record.owner,
                "rebuilding a pod's datapath failed; CNI CHECK reports it, and a repeated ADD retries"
            ),
        }
        let owner = format!("{} [restored]", record.owner);
        out.extend(
            record
                .addrs
                .iter()
                .map(|a| (a.ip, owner.clone(), a.pool.clone())),
        );
    }
    if cloud {
        super::cloud::sweep(&live).await;
    }
    Ok(out)
}

/// Retry restoring recorded addresses (pools may appear later); an address that can never
/// come back is reported and its record marked ([`super::restore`]) instead of holding up new
/// pods. Once none waits, mark the restore finished and make sure the router addresses exist.
pub(super) fn finish_restore(state: &mut State, opts: &DaemonOptions, records: &Records) {
    use super::restore::Outcome;
    let now = Instant::now();
    let pending = std::mem::take(&mut state.unrestored);
    let had_pending = !pending.is_empty();
    let mut decided = Vec::new();
    for (ip, owner, pool) in pending {
        match super::restore::try_restore(state, ip, &owner, &pool, now) {
            Outcome::Restored => decided.push((ip, owner, None)),
            Outcome::Bypassed => {
                warn!(%ip, pod = %owner, "Bypassing IP not available error on endpoint restore (bypass-ip-availability-upon-restore)");
                decided.push((ip, owner, None));
            }
            Outcome::Wait(reason) => {
                warn!(%ip, pod = %owner, %reason, "cannot restore yet; new allocations wait");
                state.unrestored.push((ip, owner, pool));
            }
            Outcome::Lost(reason) => {
                warn!(%ip, pod = %owner, %pool, %reason, "address not restored: it can never be held again here; new pods proceed, the pod keeps it until it is deleted");
                decided.push((ip, owner, Some(reason)));
            }
        }
    }
    super::restore::mark_records(records, &decided);
    if state.unrestored.is_empty() {
        if had_pending {
            info!("all endpoint addresses restored (or reported)");
        }
        state.ipam.restore_finished();
        super::router::ensure_router(state, &opts.state_dir);
    }
}

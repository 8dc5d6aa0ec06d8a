//! The mode match: what the configured IPAM mode runs once this replica leads. The one place
//! that names each mode's code: a block mode's allocator under the node manager, or a cloud
//! provider's set-up under the cloud node manager. Adding a cloud provider adds its folder and
//! one arm here.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
};

use weft_cluster_ipam::manager::{
    Allocator, ClusterPoolAllocator, MultiPoolAllocator, NodeManager,
};

use super::{Leading, RunError, stopped};
use crate::{
    cloud::CloudProvider,
    config::{IpamMode, OperatorConfig},
    k8s::controller::SharedManager,
    metrics::Metrics,
};

/// Resolves when leadership is lost.
pub(super) type Lost<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;
/// A leading phase's outcome.
type Leads<'a> = Pin<Box<dyn Future<Output = Result<(), RunError>> + 'a>>;
/// A cloud mode's leading phase: build the provider (which may call the cloud), then run the
/// cloud node manager over it.
pub(super) type CloudStart = Box<dyn for<'a> FnOnce(&'a Leading<'a>, Lost<'a>) -> Leads<'a>>;

/// What the configured mode runs.
pub(super) enum Plan {
    /// Cluster-pool and multi-pool: the block allocator under the node manager (built before
    /// connecting, so a refused cluster pool stops the operator at once).
    Blocks(SharedManager),
    /// A cloud mode.
    Cloud(CloudStart),
}

impl Plan {
    /// The plan of `config`'s mode.
    ///
    /// # Errors
    /// [`RunError::ClusterPool`] when the cluster pool's CIDRs are refused.
    pub(super) fn of(config: &OperatorConfig) -> Result<Self, RunError> {
        let allocator: Box<dyn Allocator> = match config.ipam {
            IpamMode::ClusterPool => Box::new(ClusterPoolAllocator::new(&config.cluster_pool)?),
            IpamMode::MultiPool => Box::new(MultiPoolAllocator::new(
                config.enable_ipv4,
                config.enable_ipv6,
            )),
            IpamMode::Azure => {
                let (azure, limits) = (config.azure.clone(), config.cloud.clone());
                return Ok(cloud(move |metrics| async move {
                    crate::azure::setup::provider(&azure, &limits, &metrics).await
                }));
            }
            IpamMode::Eni => {
                let (eni, limits) = (config.eni.clone(), config.cloud.clone());
                return Ok(cloud(move |metrics| async move {
                    let env = |key: &str| std::env::var(key).ok();
                    crate::eni::setup::provider(&eni, &limits, &metrics, env).await
                }));
            }
        };
        Ok(Self::Blocks(Arc::new(Mutex::new(NodeManager::new(
            allocator,
        )))))
    }

    /// The block mode's node manager (`None` in a cloud mode).
    pub(super) fn blocks(&self) -> Option<&SharedManager> {
        match self {
            Self::Blocks(manager) => Some(manager),
            Self::Cloud(_) => None,
        }
    }
}

/// A cloud mode whose provider `setup` builds; a set-up error stops the operator.
fn cloud<P, E, F>(setup: impl FnOnce(Metrics) -> F + 'static) -> Plan
where
    P: CloudProvider,
    E: std::error::Error + Send + Sync + 'static,
    F: Future<Output = Result<P, E>> + 'static,
{
    Plan::Cloud(Box::new(move |leading, lost| {
        Box::pin(async move {
            let provider = tokio::select! {
                p = setup(leading.metrics.clone()) => {
                    p.map_err(|e| RunError::CloudSetup(Box::new(e)))?
                }
                () = stopped(leading.stop.clone()) => return Ok(()),
            };
            leading.cloud(provider, lost).await
        })
    }))
}

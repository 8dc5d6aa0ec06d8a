//! What the manager adds to [`crate::ipam::problems`]: the pool checks that need the mode, the
//! enabled families and the selection context it holds. Reads only.

use super::{IpamManager, family_word};
use crate::{
    crd::pool::CiliumPodIPPool,
    ipam::{
        multipool::MultiPoolManager,
        problems::{self, IpamProblem},
        selection::ObjectLookup,
    },
};

/// Cilium's "Waiting for cidr pool to become available", then each pool and family it waits
/// for (`pool blue has no IPv6 CIDR`).
pub(super) fn waiting_for_pools(multi: &MultiPoolManager) -> String {
    let waits: Vec<String> = multi
        .pools_not_ready()
        .iter()
        .map(|w| {
            let family = family_word(w.family);
            if w.has_cidrs {
                format!("pool {} has no free {family} address", w.pool)
            } else {
                format!("pool {} has no {family} CIDR", w.pool)
            }
        })
        .collect();
    format!(
        "Waiting for cidr pool to become available: {}",
        waits.join(", ")
    )
}

impl IpamManager {
    /// Whether `pool` is one no `CiliumPodIPPool` of `pools` defines (multi-pool only).
    #[must_use]
    pub fn pool_missing(&self, pool: &str, pools: &[CiliumPodIPPool]) -> bool {
        problems::pool_missing(self.config.mode.as_str(), pool, pools)
    }

    /// The pods of `owners` whose pool does not exist, for `weft-agent status`.
    #[must_use]
    pub fn missing_pools<'a>(
        &self,
        owners: impl IntoIterator<Item = &'a str>,
        objects: &dyn ObjectLookup,
        pools: &[CiliumPodIPPool],
    ) -> Vec<IpamProblem> {
        problems::missing_pools(owners, &self.families(), &self.selection(objects, pools))
    }
}

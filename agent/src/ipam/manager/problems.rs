//! What the manager adds to [`crate::ipam::problems`]: the pool checks that need the mode, the
//! enabled families and the selection context it holds. Reads only.

use super::IpamManager;
use crate::ipam::{
    input::PoolInput,
    problems::{self, IpamProblem},
    selection::ObjectLookup,
};

impl IpamManager {
    /// Whether `pool` is one no `CiliumPodIPPool` of `pools` defines (multi-pool only).
    #[must_use]
    pub fn pool_missing(&self, pool: &str, pools: &[PoolInput]) -> bool {
        problems::pool_missing(self.config.mode.as_str(), pool, pools)
    }

    /// The pods of `owners` whose pool does not exist, for `weft-agent status`.
    #[must_use]
    pub fn missing_pools<'a>(
        &self,
        owners: impl IntoIterator<Item = &'a str>,
        objects: &dyn ObjectLookup,
        pools: &[PoolInput],
    ) -> Vec<IpamProblem> {
        problems::missing_pools(owners, &self.families(), &self.selection(objects, pools))
    }
}

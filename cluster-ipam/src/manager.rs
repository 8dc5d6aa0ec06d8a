//! The node manager of the block modes (cluster-pool, multi-pool): the one owner and the one
//! driver of the block allocators. It keeps the latest view of every CiliumNode, hands each
//! change to the mode's [`Allocator`], and answers with the [`Write`]s that bring the object in
//! line (only the parts that differ from what the node holds). It is pure and synchronous: the
//! operator's Kubernetes loop and the agent's single-host store feed it and carry out its
//! writes. The cloud modes (Azure IPAM) are not an [`Allocator`]: their manager, with its own
//! cloud API calls, lives in the operator (`weft_operator::cloud`).
//!
//! Writes are applied to the manager's view as soon as they are handed out and remembered as
//! expected until a watch event shows them (or [`EXPECT_FOR`] has passed): an event that was
//! already on its way when the write went out still lacks the written part, and must neither
//! write the same again nor make the allocator release the blocks it just gave (the written
//! part is what the operator owns, so its own word wins over a stale event).

mod clusterpool;
mod multipool;
mod patch;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use ipnet::IpNet;
use tracing::{info, warn};

pub use self::{
    clusterpool::ClusterPoolAllocator, multipool::MultiPoolAllocator, patch::status_patch,
};
use crate::{
    Family,
    clusterpool::{ClusterPoolConfig, ClusterPoolError},
    multipool::{Allocated, MultiPoolError, PoolSpec},
    node::NodeView,
    pool::{PoolSpecError, PoolView},
};

/// Why a pool was refused; the allocator then changes nothing.
#[derive(Debug, thiserror::Error)]
pub enum PoolRefused {
    /// The pool object does not convert (names the field).
    #[error(transparent)]
    Unusable(#[from] PoolSpecError),
    /// One of its CIDRs overlaps a CIDR of another pool.
    #[error(
        "CiliumPodIPPool {pool} not applied: spec.{family}.cidrs {cidr} overlaps {clash} of pool \
         {other}; give each pool CIDRs of its own"
    )]
    Overlap {
        /// The refused pool.
        pool: String,
        /// `ipv4` or `ipv6`.
        family: &'static str,
        /// Its CIDR.
        cidr: IpNet,
        /// The other pool's CIDR it overlaps.
        clash: IpNet,
        /// The other pool.
        other: String,
    },
    /// The allocator refused the change (an immutable field changed, a bad mask, …).
    #[error("CiliumPodIPPool {pool} not applied")]
    Rejected {
        /// The refused pool.
        pool: String,
        /// The allocator's refusal (Cilium's text).
        #[source]
        source: MultiPoolError,
    },
}

/// Why a configuration change was refused; the allocator then runs on as it was.
#[derive(Debug, thiserror::Error)]
pub enum ReconfigureError {
    /// The cluster pool cannot take the new CIDRs or mask sizes (Cilium's text is the source).
    #[error("the running allocator keeps its cluster pool as it was")]
    ClusterPool {
        /// The cluster pool's refusal.
        #[source]
        source: ClusterPoolError,
    },
}

/// The part of `spec.ipam` the operator owns in a mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecPart {
    /// `spec.ipam.podCIDRs` (cluster-pool).
    PodCidrs(Vec<String>),
    /// `spec.ipam.pools.allocated` (multi-pool).
    PoolsAllocated(Vec<Allocated>),
}

/// What an allocator wants one CiliumNode to hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// The spec part (`None`: leave it as it is).
    pub spec: Option<SpecPart>,
    /// `status.ipam.operator-status.error` (empty: none).
    pub error: String,
    /// Lines to log at warning level (Cilium's texts).
    pub warnings: Vec<String>,
    /// The node waits for the restore to finish.
    pub postponed: bool,
}

/// One write to carry out: the parts of a CiliumNode to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The CiliumNode.
    pub node: String,
    /// New spec part, if it changes.
    pub spec: Option<SpecPart>,
    /// New `operator-status.error`, if it changes (empty clears it).
    pub error: Option<String>,
}

/// Addresses of one node as the allocator sees them (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// Addresses in the node's blocks.
    pub available: u64,
    /// Addresses the node asks for beyond what it holds (multi-pool demand).
    pub needed: u64,
}

/// Blocks of one pool and family (for metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockUsage {
    /// The pool (`cluster-pool` in cluster-pool mode).
    pub pool: String,
    /// The family.
    pub family: Family,
    /// Blocks held by nodes.
    pub in_use: u64,
    /// Blocks that can still be handed out.
    pub free: u64,
}

/// A mode's allocation policy, driven by the [`NodeManager`].
pub trait Allocator: Send + std::fmt::Debug {
    /// A CiliumNode was added or changed: what it should hold.
    fn upsert(&mut self, node: &NodeView) -> Desired;
    /// A CiliumNode this manager does not answer (another node's, in the agent's single-host
    /// store, which never writes it) was added or changed: hold exactly the blocks it lists,
    /// and never hand it more.
    fn occupy(&mut self, node: &NodeView);
    /// A CiliumNode is gone: release what it held.
    fn release(&mut self, node: &str);
    /// Every existing CiliumNode was passed once; returns the nodes to pass again.
    fn restore_finished(&mut self) -> Vec<String>;
    /// A usable pool was added or changed; returns lines to log, or why the pool is refused
    /// (it then changes nothing). Modes without pools ignore it.
    ///
    /// # Errors
    /// The refusal, naming the field and the fix.
    fn pool_upsert(&mut self, _name: &str, _spec: &PoolSpec) -> Result<Vec<String>, PoolRefused> {
        Ok(Vec::new())
    }
    /// A pool was deleted; returns lines to log.
    fn pool_delete(&mut self, _name: &str) -> Vec<String> {
        Vec::new()
    }
    /// The configuration changed at runtime (a mounted ConfigMap was edited): apply what may
    /// change of the cluster pool's settings, or refuse and change nothing. Modes with nothing
    /// to reconfigure accept.
    ///
    /// # Errors
    /// Why the change is refused.
    fn reconfigure(&mut self, _cluster_pool: &ClusterPoolConfig) -> Result<(), ReconfigureError> {
        Ok(())
    }
    /// The node's usage.
    fn usage(&self, node: &NodeView) -> NodeUsage;
    /// Block counts per pool and family.
    fn blocks(&self) -> Vec<BlockUsage>;
}

/// Node counts by Cilium's `ipam_nodes` categories.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounts {
    /// Every managed node.
    pub total: u64,
    /// Nodes that still need blocks (or whose allocation failed).
    pub in_deficit: u64,
    /// Nodes that need blocks while no block is free.
    pub at_capacity: u64,
}

/// How long a handed-out write overrides what watch events show of its parts.
pub const EXPECT_FOR: Duration = Duration::from_secs(30);

/// Parts written but not yet seen in an event.
#[derive(Debug)]
struct Expected {
    spec: Option<SpecPart>,
    error: Option<String>,
    at: Instant,
}

impl Expected {
    /// Drops what `view` shows; overlays the rest onto it. Returns whether anything is left.
    fn settle(&mut self, view: &mut NodeView) -> bool {
        match &self.spec {
            Some(SpecPart::PodCidrs(c)) if *c == view.pod_cidrs => self.spec = None,
            Some(SpecPart::PoolsAllocated(p)) if *p == view.allocated => self.spec = None,
            Some(SpecPart::PodCidrs(c)) => view.pod_cidrs.clone_from(c),
            Some(SpecPart::PoolsAllocated(p)) => view.allocated.clone_from(p),
            None => {}
        }
        match &self.error {
            Some(e) if *e == view.operator_error => self.error = None,
            Some(e) => view.operator_error.clone_from(e),
            None => {}
        }
        self.spec.is_some() || self.error.is_some()
    }
}

/// The node manager.
#[derive(Debug)]
pub struct NodeManager {
    allocator: Box<dyn Allocator>,
    nodes: BTreeMap<String, NodeView>,
    expected: BTreeMap<String, Expected>,
    pools: BTreeSet<String>,
    postponed: BTreeSet<String>,
    /// Nodes whose last pass ended in an error: passed again when blocks are released.
    failed: BTreeSet<String>,
    restored: bool,
    /// Nodes only observed ([`NodeManager::observe`]): their blocks are held, never changed.
    observed: BTreeSet<String>,
}

impl NodeManager {
    /// A manager over `allocator`, before the restore.
    #[must_use]
    pub fn new(allocator: Box<dyn Allocator>) -> Self {
        Self {
            allocator,
            nodes: BTreeMap::new(),
            expected: BTreeMap::new(),
            pools: BTreeSet::new(),
            failed: BTreeSet::new(),
            postponed: BTreeSet::new(),
            restored: false,
            observed: BTreeSet::new(),
        }
    }

    /// Whether the restore finished.
    #[must_use]
    pub const fn restored(&self) -> bool {
        self.restored
    }

    /// Names of the CiliumNodes the manager knows.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// Names of the pools the manager was told of.
    #[must_use]
    pub fn pool_names(&self) -> Vec<String> {
        self.pools.iter().cloned().collect()
    }

    /// A CiliumNode was added or changed.
    pub fn upsert(&mut self, mut view: NodeView) -> Option<Write> {
        if let Some(expected) = self.expected.get_mut(&view.name)
            && (expected.at.elapsed() > EXPECT_FOR || !expected.settle(&mut view))
        {
            self.expected.remove(&view.name);
        }
        if view.ignored {
            // Left alone, as Cilium's node watcher does; forget what we knew of it.
            if self.nodes.remove(&view.name).is_some() {
                info!(node = %view.name, "CiliumNode is annotated ipam.cilium.io/ignore; leaving it alone");
            }
            return None;
        }
        let name = view.name.clone();
        self.nodes.insert(name.clone(), view);
        self.reconcile(&name)
    }

    /// The CiliumNode as it is now (read under its only writer's lock, so it cannot lag a
    /// write handed out earlier): what it shows wins over what was handed out, then as
    /// [`NodeManager::upsert`].
    pub fn upsert_current(&mut self, view: NodeView) -> Option<Write> {
        self.expected.remove(&view.name);
        self.upsert(view)
    }

    /// A CiliumNode this manager does not answer was added or changed: its blocks are held as
    /// it lists them (see [`Allocator::occupy`]); no write is ever handed out for it.
    pub fn observe(&mut self, view: &NodeView) {
        self.observed.insert(view.name.clone());
        self.allocator.occupy(view);
    }

    /// Names of the CiliumNodes only observed.
    pub fn observed_names(&self) -> impl Iterator<Item = &str> {
        self.observed.iter().map(String::as_str)
    }

    /// The manager's view of a node it answers (with the writes it handed out applied).
    #[must_use]
    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.nodes.get(name)
    }

    /// A CiliumNode was deleted: its blocks go back to the pool, and the nodes whose
    /// allocation failed are passed again (the blocks may be what they wait for).
    pub fn delete(&mut self, name: &str) -> Vec<Write> {
        if self.observed.remove(name) {
            self.allocator.release(name);
        }
        self.postponed.remove(name);
        self.expected.remove(name);
        self.failed.remove(name);
        if self.nodes.remove(name).is_none() {
            return Vec::new();
        }
        self.allocator.release(name);
        info!(node = %name, "CiliumNode deleted; its blocks are released");
        let failed: Vec<String> = self.failed.iter().cloned().collect();
        failed.iter().filter_map(|n| self.reconcile(n)).collect()
    }

    /// Every existing CiliumNode has been seen: hand out fresh blocks from now on.
    pub fn restore_finished(&mut self) -> Vec<Write> {
        self.restored = true;
        let again: BTreeSet<String> = self
            .allocator
            .restore_finished()
            .into_iter()
            .chain(std::mem::take(&mut self.postponed))
            .collect();
        again
            .iter()
            .filter_map(|name| self.reconcile(name))
            .collect()
    }

    /// The configuration changed: the allocator applies it (or refuses, changing nothing), and
    /// every node is looked at again.
    ///
    /// # Errors
    /// The allocator's refusal.
    pub fn reconfigure(
        &mut self,
        cluster_pool: &ClusterPoolConfig,
    ) -> Result<Vec<Write>, ReconfigureError> {
        self.allocator.reconfigure(cluster_pool)?;
        Ok(self.reconcile_all())
    }

    /// A pool changed: every node is looked at again. The second value is why the pool was
    /// refused, if it was (for an Event on the pool).
    pub fn pool_upsert(&mut self, pool: PoolView) -> (Vec<Write>, Option<PoolRefused>) {
        self.pools.insert(pool.name.clone());
        let result = match pool.spec {
            Ok(ref spec) => self.allocator.pool_upsert(&pool.name, spec),
            Err(error) => Err(PoolRefused::from(error)),
        };
        match result {
            Ok(lines) => {
                for line in lines {
                    warn!(pool = %pool.name, "{line}");
                }
                (self.reconcile_all(), None)
            }
            Err(refused) => {
                warn!(pool = %pool.name, error = %weft_k8s::error::chain(&refused), "pool refused");
                (self.reconcile_all(), Some(refused))
            }
        }
    }

    /// A pool was deleted.
    pub fn pool_delete(&mut self, name: &str) -> Vec<Write> {
        self.pools.remove(name);
        for line in self.allocator.pool_delete(name) {
            warn!(pool = %name, "{line}");
        }
        self.reconcile_all()
    }

    fn reconcile_all(&mut self) -> Vec<Write> {
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        names.iter().filter_map(|n| self.reconcile(n)).collect()
    }

    fn reconcile(&mut self, name: &str) -> Option<Write> {
        let view = self.nodes.get(name)?;
        let desired = self.allocator.upsert(view);
        for line in &desired.warnings {
            warn!(node = %name, "{line}");
        }
        if desired.postponed {
            self.postponed.insert(name.to_owned());
        }
        if desired.error.is_empty() {
            self.failed.remove(name);
        } else {
            self.failed.insert(name.to_owned());
        }
        let view = self.nodes.get_mut(name)?;
        let spec = match desired.spec {
            Some(SpecPart::PodCidrs(cidrs)) if cidrs != view.pod_cidrs => {
                view.pod_cidrs.clone_from(&cidrs);
                Some(SpecPart::PodCidrs(cidrs))
            }
            Some(SpecPart::PoolsAllocated(pools)) if pools != view.allocated => {
                view.allocated.clone_from(&pools);
                Some(SpecPart::PoolsAllocated(pools))
            }
            _ => None,
        };
        let error = (desired.error != view.operator_error).then(|| {
            view.operator_error.clone_from(&desired.error);
            desired.error
        });
        if let Some(e) = error.as_deref().filter(|e| !e.is_empty()) {
            warn!(node = %name, error = %e, "allocation for CiliumNode failed");
        }
        if spec.is_none() && error.is_none() {
            return None;
        }
        let expected = self.expected.entry(name.to_owned()).or_insert(Expected {
            spec: None,
            error: None,
            at: Instant::now(),
        });
        expected.at = Instant::now();
        if spec.is_some() {
            expected.spec.clone_from(&spec);
        }
        if error.is_some() {
            expected.error.clone_from(&error);
        }
        Some(Write {
            node: name.to_owned(),
            spec,
            error,
        })
    }

    /// Node counts and per-node usage, for metrics.
    #[must_use]
    pub fn usage(&self) -> (NodeCounts, Vec<(String, NodeUsage, u64)>) {
        let free: u64 = self.allocator.blocks().iter().map(|b| b.free).sum();
        let mut counts = NodeCounts::default();
        let mut per_node = Vec::with_capacity(self.nodes.len());
        for (name, view) in &self.nodes {
            let usage = self.allocator.usage(view);
            counts.total += 1;
            let deficit = usage.needed > 0
                || !view.operator_error.is_empty()
                || self.postponed.contains(name);
            if deficit {
                counts.in_deficit += 1;
                if free == 0 {
                    counts.at_capacity += 1;
                }
            }
            per_node.push((name.clone(), usage, view.used as u64));
        }
        (counts, per_node)
    }

    /// Block counts, for metrics.
    #[must_use]
    pub fn blocks(&self) -> Vec<BlockUsage> {
        self.allocator.blocks()
    }
}

#[cfg(test)]
mod tests;

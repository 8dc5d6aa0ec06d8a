//! [`ClusterPool`]: Cilium's cluster-pool operator allocator (`clusterpool` + `podcidr`). It
//! owns the per-family lists of [`CidrSet`](super::cidrset::CidrSet)s built from the `cluster-pool-*` settings, which
//! node holds which pod CIDRs, and the restore gate (no fresh block before every existing
//! CiliumNode was seen). It never reads or writes a CiliumNode: the caller passes
//! `spec.ipam.podCIDRs` in and writes the [`NodeResult`] out.
//!
//! The settings and their checks live in `config`, the per-node flow (Cilium
//! `allocateNode`/`reuseIPNets`) in `node`.

mod config;
mod node;

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;
use thiserror::Error;

use self::config::FamilyPool;
pub use self::config::{
    ClusterPoolConfig, DEFAULT_IPV4_MASK_SIZE, DEFAULT_IPV6_MASK_SIZE, FamilyConfig,
};
use crate::{
    Family,
    cidrset::{BlockStats, CidrSetError},
    family::go_list,
};

/// Errors of the cluster-pool allocator: configuration, per-node allocation, runtime change.
/// The per-node ones are meant for `status.ipam.operator-status.error`.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ClusterPoolError {
    /// The family is enabled but has no CIDR.
    #[error("cluster-pool-{}-cidr must be provided when using ClusterPool", family.flag_name())]
    CidrRequired {
        /// The family.
        family: Family,
    },
    /// The family is disabled but has CIDRs.
    #[error("cluster-pool-{}-cidr must not be set if {family} is disabled", family.flag_name())]
    CidrForbidden {
        /// The family.
        family: Family,
    },
    /// A family's CIDR list does not make sets (collision, family, mask).
    #[error("unable to initialize {family} allocator: {source}")]
    InitAllocator {
        /// The family.
        family: Family,
        /// What the CIDR set builder said.
        #[source]
        source: CidrSetError,
    },
    /// A runtime change tried to change the mask size.
    #[error(
        "cluster-pool-{}-mask-size cannot be changed (was {was}, now {now}); restore it",
        family.flag_name()
    )]
    MaskSizeChanged {
        /// The family.
        family: Family,
        /// The mask size in use.
        was: u8,
        /// The mask size asked for.
        now: u8,
    },
    /// A runtime change tried to enable or disable a family.
    #[error(
        "{family} cannot be {} at runtime; restore the setting or restart the operator",
        if *enabled { "enabled" } else { "disabled" }
    )]
    FamilyToggled {
        /// The family.
        family: Family,
        /// Whether the change would enable it.
        enabled: bool,
    },
    /// A runtime change dropped, changed or moved an existing CIDR.
    #[error(
        "cluster-pool-{}-cidr cannot drop or change {cidr}: keep the existing CIDRs in place \
         and append new ones at the end",
        family.flag_name()
    )]
    CidrRemoved {
        /// The family.
        family: Family,
        /// The first existing CIDR not found in place.
        cidr: IpNet,
    },
    /// A `spec.ipam.podCIDRs` entry is not a CIDR.
    #[error("invalid spec.ipam.podCIDRs entry {value:?}: {source}")]
    InvalidPodCidr {
        /// The entry as written.
        value: String,
        /// The parser's complaint.
        #[source]
        source: ipnet::AddrParseError,
    },
    /// The node lists CIDRs of a family that has no sets (Cilium `ErrAllocatorNotFound`).
    #[error(
        "unable to allocate CIDR {} since allocator for {family} addresses does not exist",
        go_list(cidrs)
    )]
    AllocatorNotFound {
        /// The family.
        family: Family,
        /// The node's CIDRs of that family.
        cidrs: Vec<IpNet>,
    },
    /// The node lists CIDRs it was not given.
    #[error(
        "node has CIDRs allocated ({}) that conflict with requested CIDRs {}",
        go_list(held),
        go_list(requested)
    )]
    Conflict {
        /// What the node holds in that family.
        held: Vec<IpNet>,
        /// What its spec lists in that family.
        requested: Vec<IpNet>,
    },
    /// No set covers the CIDR.
    #[error("allocator not configured for the requested CIDR {cidr}")]
    NotConfigured {
        /// The CIDR.
        cidr: IpNet,
    },
    /// The set covering the CIDR is full.
    #[error("allocator clusterCIDR: {cluster}, nodeMask: {mask} full")]
    SetFull {
        /// The set's cluster CIDR.
        cluster: IpNet,
        /// The set's mask size.
        mask: u8,
    },
    /// Another node holds (part of) the CIDR (Cilium `ErrCIDRAllocated`).
    #[error("requested CIDR ({cidr}) is already allocated")]
    AlreadyAllocated {
        /// The CIDR.
        cidr: IpNet,
    },
    /// Every set of the family is full (Cilium `ErrAllocatorFull`).
    #[error("allocator full")]
    AllocatorFull {
        /// The family.
        family: Family,
    },
    /// Neither family has sets (Cilium `ErrNoAllocators`).
    #[error(
        "Unable to allocate node CIDR for node {node}. IPAMInfo: {{IPv4: [], IPv6: []}}. \
         Please check that your configuration is correct."
    )]
    NoAllocators {
        /// The node.
        node: String,
    },
    /// A set refused the CIDR.
    #[error(transparent)]
    CidrSet {
        /// The set's error.
        #[from]
        source: CidrSetError,
    },
}

/// Something the caller should log; the allocator logs nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// "Duplicate v4 CIDR, will be released from this node": the node listed a CIDR another
    /// node holds; it is dropped from this node's podCIDRs.
    DuplicateCidr {
        /// The family of the CIDR.
        family: Family,
        /// The node that listed it.
        node: String,
        /// The conflict ([`ClusterPoolError::AlreadyAllocated`]).
        error: ClusterPoolError,
    },
}

impl std::fmt::Display for Warning {
    /// Cilium's log message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::DuplicateCidr { family, .. } => write!(
                f,
                "Duplicate {} CIDR, will be released from this node",
                family.short_name()
            ),
        }
    }
}

/// What to do with one CiliumNode after [`ClusterPool::allocate_node`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeResult {
    /// `Some`: write these to `spec.ipam.podCIDRs` (v4 first, then v6). `None`: leave the
    /// spec as it is.
    pub pod_cidrs: Option<Vec<String>>,
    /// The value for `status.ipam.operator-status.error` (`None` clears it). Ignored when
    /// [`NodeResult::postponed`] and nothing else is set.
    pub error: Option<ClusterPoolError>,
    /// To log.
    pub warnings: Vec<Warning>,
    /// The node needs a fresh block but the allocator is not ready: call again after
    /// [`ClusterPool::restore_finished`] (which names it).
    pub postponed: bool,
}

/// The CIDRs one node holds, per family, in the order they were given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct NodeCidrs {
    v4: Vec<IpNet>,
    v6: Vec<IpNet>,
}

impl NodeCidrs {
    fn family(&self, family: Family) -> &Vec<IpNet> {
        match family {
            Family::V4 => &self.v4,
            Family::V6 => &self.v6,
        }
    }

    fn family_mut(&mut self, family: Family) -> &mut Vec<IpNet> {
        match family {
            Family::V4 => &mut self.v4,
            Family::V6 => &mut self.v6,
        }
    }

    /// v4 then v6, as strings for `spec.ipam.podCIDRs`.
    fn strings(&self) -> Vec<String> {
        self.v4
            .iter()
            .chain(&self.v6)
            .map(ToString::to_string)
            .collect()
    }
}

/// Block counts per family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterPoolStats {
    /// IPv4 blocks.
    pub ipv4: BlockStats,
    /// IPv6 blocks.
    pub ipv6: BlockStats,
}

/// The cluster-pool allocator.
#[derive(Clone, Debug)]
pub struct ClusterPool {
    v4: FamilyPool,
    v6: FamilyPool,
    nodes: BTreeMap<String, NodeCidrs>,
    postponed: BTreeSet<String>,
    ready: bool,
}

impl ClusterPool {
    /// Validates `config` and builds the sets (Cilium `AllocatorOperator.Init`), not ready.
    ///
    /// # Errors
    /// [`ClusterPoolError::CidrRequired`], [`ClusterPoolError::CidrForbidden`] or
    /// [`ClusterPoolError::InitAllocator`], IPv4 checked before IPv6.
    pub fn new(config: &ClusterPoolConfig) -> Result<Self, ClusterPoolError> {
        Ok(Self {
            v4: FamilyPool::new(Family::V4, &config.ipv4)?,
            v6: FamilyPool::new(Family::V6, &config.ipv6)?,
            nodes: BTreeMap::new(),
            postponed: BTreeSet::new(),
            ready: false,
        })
    }

    const fn family(&self, family: Family) -> &FamilyPool {
        match family {
            Family::V4 => &self.v4,
            Family::V6 => &self.v6,
        }
    }

    const fn family_mut(&mut self, family: Family) -> &mut FamilyPool {
        match family {
            Family::V4 => &mut self.v4,
            Family::V6 => &mut self.v6,
        }
    }

    /// Whether [`ClusterPool::restore_finished`] was called.
    #[must_use]
    pub const fn is_ready(&self) -> bool {
        self.ready
    }

    /// Every existing CiliumNode was passed once (Cilium's first `Resync`): fresh blocks may
    /// now be handed out. Returns the postponed nodes, to pass again.
    pub fn restore_finished(&mut self) -> Vec<String> {
        self.ready = true;
        std::mem::take(&mut self.postponed).into_iter().collect()
    }

    /// The CIDRs `node` holds, v4 first, or `None` for a node holding nothing.
    #[must_use]
    pub fn node_cidrs(&self, node: &str) -> Option<Vec<IpNet>> {
        self.nodes
            .get(node)
            .map(|held| held.v4.iter().chain(&held.v6).copied().collect())
    }

    /// Releases every CIDR of `node` (CiliumNode deleted); `false` if it held none.
    pub fn release_node(&mut self, node: &str) -> bool {
        self.postponed.remove(node);
        let Some(held) = self.nodes.remove(node) else {
            return false;
        };
        for family in [Family::V4, Family::V6] {
            self.release_all(family, held.family(family));
        }
        true
    }

    /// Applies changed settings at runtime: families and mask sizes must stay, existing CIDRs
    /// must stay in place, new ones are appended ([`ClusterPool::update_cidrs`]).
    ///
    /// # Errors
    /// [`ClusterPoolError::FamilyToggled`], [`ClusterPoolError::MaskSizeChanged`] or an
    /// error of [`ClusterPool::update_cidrs`]; nothing changes then.
    pub fn reconfigure(&mut self, config: &ClusterPoolConfig) -> Result<(), ClusterPoolError> {
        for (family, wanted) in [(Family::V4, &config.ipv4), (Family::V6, &config.ipv6)] {
            let current = self.family(family);
            if current.enabled != wanted.enabled {
                return Err(ClusterPoolError::FamilyToggled {
                    family,
                    enabled: wanted.enabled,
                });
            }
            if current.enabled && current.mask != wanted.mask_size {
                return Err(ClusterPoolError::MaskSizeChanged {
                    family,
                    was: current.mask,
                    now: wanted.mask_size,
                });
            }
        }
        self.update_cidrs(config.ipv4.cidrs.clone(), config.ipv6.cidrs.clone())
    }

    /// Appends the CIDRs new in `v4`/`v6` as sets; existing sets are untouched.
    ///
    /// # Errors
    /// [`ClusterPoolError::CidrRemoved`] when an existing CIDR is not at its place,
    /// [`ClusterPoolError::CidrRequired`]/[`ClusterPoolError::CidrForbidden`], or
    /// [`ClusterPoolError::InitAllocator`] for a new CIDR; nothing changes then.
    pub fn update_cidrs(&mut self, v4: Vec<IpNet>, v6: Vec<IpNet>) -> Result<(), ClusterPoolError> {
        let new_v4 = self.v4.appended(Family::V4, &v4)?;
        let new_v6 = self.v6.appended(Family::V6, &v6)?;
        for (family, cidrs, sets) in [(Family::V4, v4, new_v4), (Family::V6, v6, new_v6)] {
            let pool = self.family_mut(family);
            pool.cidrs = cidrs.iter().map(IpNet::trunc).collect();
            pool.sets.extend(sets);
        }
        Ok(())
    }

    /// Held, reserved and free blocks per family.
    #[must_use]
    pub fn stats(&self) -> ClusterPoolStats {
        ClusterPoolStats {
            ipv4: self.v4.stats(),
            ipv6: self.v6.stats(),
        }
    }
}

#[cfg(test)]
mod tests;

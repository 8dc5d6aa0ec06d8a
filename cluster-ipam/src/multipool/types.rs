//! The multi-pool allocator's own input and output types (converted from and to the
//! CiliumPodIPPool and CiliumNode wire types by the caller) and its [`Warning`]s. No logic
//! beyond their display.

use std::fmt;

use ipnet::IpNet;

use super::{MultiPoolError, ReservedRange};
use crate::cidrset::BlockStats;

/// Something the caller should log; the allocator logs nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// A cluster CIDR left the pool while a node holds a block in it: now an orphan.
    CidrStillInUse {
        /// The node's block.
        cidr: IpNet,
        /// The pool.
        pool: String,
        /// The node.
        node: String,
    },
    /// An orphan is inside the pool again and allocated to its node (Cilium: info level).
    Readopted {
        /// The node's block.
        cidr: IpNet,
        /// The pool.
        pool: String,
        /// The node.
        node: String,
    },
    /// An orphan inside the pool again could not be allocated (Cilium returns this as the
    /// upsert's error after applying the pool); it stays an orphan.
    ReadoptFailed {
        /// The node's block.
        cidr: IpNet,
        /// The pool.
        pool: String,
        /// The node.
        node: String,
        /// Why.
        error: MultiPoolError,
    },
    /// A deleted pool still had blocks on a node: now orphans.
    PoolStillInUse {
        /// The pool.
        pool: String,
        /// The node.
        node: String,
    },
}

impl Warning {
    /// Whether Cilium logs this at info level rather than warning.
    #[must_use]
    pub const fn is_info(&self) -> bool {
        matches!(self, Self::Readopted { .. })
    }
}

impl fmt::Display for Warning {
    /// Cilium's log message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CidrStillInUse { .. } => f.write_str("CIDR from pool still in use by node"),
            Self::Readopted { .. } => {
                f.write_str("CIDR from pool already in use by node, marking it as allocated")
            }
            Self::ReadoptFailed { cidr, node, .. } => write!(
                f,
                "unable to mark orphaned CIDR {cidr} still used by node {node} as allocated"
            ),
            Self::PoolStillInUse { .. } => f.write_str("pool still in use by node"),
        }
    }
}

/// One family of a pool spec (`spec.ipv4`/`spec.ipv6`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FamilySpec {
    /// The cluster CIDRs.
    pub cidrs: Vec<IpNet>,
    /// The block mask size.
    pub mask_size: u8,
}

/// A CiliumPodIPPool spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolSpec {
    /// IPv4, if any.
    pub ipv4: Option<FamilySpec>,
    /// IPv6, if any.
    pub ipv6: Option<FamilySpec>,
    /// The first address of a block is usable.
    pub allow_first_ip: bool,
    /// The last address of a block is usable.
    pub allow_last_ip: bool,
    /// Address ranges no new block may overlap, both families.
    pub reserved: Vec<ReservedRange>,
}

/// A `spec.ipam.pools.requested[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requested {
    /// The pool.
    pub pool: String,
    /// IPv4 addresses needed.
    pub ipv4_addrs: u64,
    /// IPv6 addresses needed.
    pub ipv6_addrs: u64,
}

/// A `spec.ipam.pools.allocated[]` entry. The flags are written out from the pool and
/// ignored on input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allocated {
    /// The pool.
    pub pool: String,
    /// The node's blocks of that pool.
    pub cidrs: Vec<String>,
    /// The pool's `allowFirstIP`.
    pub allow_first_ip: bool,
    /// The pool's `allowLastIP`.
    pub allow_last_ip: bool,
}

/// Block counts of one pool, for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// The pool.
    pub pool: String,
    /// IPv4 blocks.
    pub ipv4: BlockStats,
    /// IPv6 blocks.
    pub ipv6: BlockStats,
}

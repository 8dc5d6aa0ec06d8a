//! [`CidrSet`]: Cilium's `cidrset` (`pkg/ipam/cidrset`), the carver of one cluster CIDR into
//! node blocks of one mask size. It owns which blocks are used and which are reserved, the
//! round-robin cursor, and the building of a family's list of sets (Cilium `NewCIDRSets`,
//! with its collision and family checks). It knows neither nodes nor pools.
//!
//! Used and reserved blocks are kept as index ranges (`intervals`), never as a bitmap, so a
//! v4 `/0` carved into `/32`s costs no more than a `/16` carved into `/24`s.

mod intervals;

use std::{fmt, net::IpAddr};

use ipnet::IpNet;
use thiserror::Error;

use self::intervals::Intervals;
use crate::{
    Family,
    family::{addr_to_u128, u128_to_addr},
};

/// The largest `mask - clusterBits` Cilium accepts for IPv6 (`clusterSubnetMaxDiff`).
const MAX_V6_MASK_DIFF: u8 = 16;

/// Errors of [`CidrSet`] and of [`build_sets`] (Cilium's `cidrset`/`cidralloc` texts, except
/// [`CidrSetError::MaskShorterThanCluster`] and [`CidrSetError::ReservedRangeOutside`]).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CidrSetError {
    /// The mask is longer than the address (`ErrSubNetMaskSizeInvalid`).
    #[error("SubNetMask is invalid, should be lower or equal to 32 for IPv4 and to 128 for IPv6")]
    MaskSizeInvalid {
        /// The cluster CIDR.
        cluster: IpNet,
        /// The node mask size asked for.
        mask: u8,
    },
    /// IPv6 only: more than 2^16 blocks (`ErrCIDRSetSubNetTooBig`).
    #[error("New CIDR set failed; the node CIDR size is too big")]
    SubnetTooBig {
        /// The cluster CIDR.
        cluster: IpNet,
        /// The node mask size asked for.
        mask: u8,
    },
    /// The node mask is shorter than the cluster prefix (Cilium silently makes an empty set).
    #[error(
        "New CIDR set failed; the node mask size {mask} is shorter than the cluster CIDR \
         {cluster}: use a mask size of at least /{}", cluster.prefix_len()
    )]
    MaskShorterThanCluster {
        /// The cluster CIDR.
        cluster: IpNet,
        /// The node mask size asked for.
        mask: u8,
    },
    /// Every block is used or reserved (`ErrCIDRRangeNoCIDRsRemaining`).
    #[error(
        "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
    )]
    NoCidrsRemaining {
        /// The cluster CIDR.
        cluster: IpNet,
    },
    /// The prefix does not overlap the cluster CIDR (Cilium's wording, typo included).
    #[error("cidr {cidr} is out the range of cluster cidr {cluster}")]
    OutOfRange {
        /// The prefix given.
        cidr: IpNet,
        /// The cluster CIDR.
        cluster: IpNet,
    },
    /// A reserved range is reversed, of the other family or not inside the cluster CIDR.
    #[error("reserved range {range} is not an ordered range inside CIDR {cluster}")]
    ReservedRangeOutside {
        /// The range given.
        range: ReservedRange,
        /// The cluster CIDR.
        cluster: IpNet,
    },
    /// Two CIDRs of one list overlap (`ErrCIDRCollision`).
    #[error("requested CIDR {cidr} collides with clusterCIDR: {cluster}, nodeMask: {mask}")]
    Collision {
        /// The CIDR as given.
        cidr: IpNet,
        /// The earlier set's cluster CIDR.
        cluster: IpNet,
        /// The earlier set's node mask size.
        mask: u8,
    },
    /// A CIDR of the other family in a family's list.
    #[error("CIDR is not {} family: {cidr}", family.short_name())]
    WrongFamily {
        /// The family the list is for.
        family: Family,
        /// The CIDR as given.
        cidr: IpNet,
    },
}

/// An inclusive address range no new block may overlap (CiliumPodIPPool v2
/// `reservedRanges[{start, end}]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReservedRange {
    /// The first reserved address.
    pub start: IpAddr,
    /// The last reserved address.
    pub end: IpAddr,
}

impl fmt::Display for ReservedRange {
    /// `start-end`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

/// Block counts of one set (or a sum of sets), for stats and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Blocks held (allocated or occupied), reserved or not.
    pub in_use: u64,
    /// Blocks reserved by a range and not in use: never handed out.
    pub reserved: u64,
    /// Blocks that [`CidrSet::allocate_next`] can still hand out.
    pub free: u64,
}

impl std::ops::AddAssign for BlockStats {
    fn add_assign(&mut self, other: Self) {
        self.in_use += other.in_use;
        self.reserved += other.reserved;
        self.free += other.free;
    }
}

/// One cluster CIDR carved into blocks of one mask size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CidrSet {
    /// The masked cluster CIDR.
    cluster: IpNet,
    /// The node (block) mask size.
    mask: u8,
    /// How many blocks: `2^(mask - clusterBits)`.
    capacity: u64,
    /// Where the next round-robin scan starts.
    next_candidate: u64,
    used: Intervals,
    reserved: Intervals,
}

impl fmt::Display for CidrSet {
    /// Cilium's `String()`: `clusterCIDR: 10.0.0.0/16, nodeMask: 24`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "clusterCIDR: {}, nodeMask: {}", self.cluster, self.mask)
    }
}

impl CidrSet {
    /// A set carving `cluster` (masked first) into `/mask` blocks (Cilium `NewCIDRSet`).
    ///
    /// # Errors
    /// [`CidrSetError::MaskSizeInvalid`] (mask longer than the address),
    /// [`CidrSetError::SubnetTooBig`] (IPv6, more than 16 bits of blocks) or
    /// [`CidrSetError::MaskShorterThanCluster`].
    pub fn new(cluster: IpNet, mask: u8) -> Result<Self, CidrSetError> {
        let cluster = cluster.trunc();
        let family = Family::of(&cluster);
        let cluster_bits = cluster.prefix_len();
        if mask > family.bits() {
            return Err(CidrSetError::MaskSizeInvalid { cluster, mask });
        }
        if family == Family::V6 && mask > cluster_bits && mask - cluster_bits > MAX_V6_MASK_DIFF {
            return Err(CidrSetError::SubnetTooBig { cluster, mask });
        }
        if mask < cluster_bits {
            return Err(CidrSetError::MaskShorterThanCluster { cluster, mask });
        }
        Ok(Self {
            cluster,
            mask,
            capacity: 1 << (mask - cluster_bits),
            next_candidate: 0,
            used: Intervals::default(),
            reserved: Intervals::default(),
        })
    }

    /// The masked cluster CIDR.
    #[must_use]
    pub const fn cluster(&self) -> IpNet {
        self.cluster
    }

    /// The block mask size.
    #[must_use]
    pub const fn mask_size(&self) -> u8 {
        self.mask
    }

    /// How many blocks the set has.
    #[must_use]
    pub const fn capacity(&self) -> u64 {
        self.capacity
    }

    /// How many blocks are held.
    #[must_use]
    pub const fn used(&self) -> u64 {
        self.used.len()
    }

    /// Blocks neither held nor reserved.
    #[must_use]
    pub fn free(&self) -> u64 {
        self.capacity - self.unavailable()
    }

    /// Whether no block can be handed out any more.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.free() == 0
    }

    /// Held, reserved and free block counts.
    #[must_use]
    pub fn stats(&self) -> BlockStats {
        let unavailable = self.unavailable();
        BlockStats {
            in_use: self.used.len(),
            reserved: unavailable - self.used.len(),
            free: self.capacity - unavailable,
        }
    }

    /// Blocks held or reserved (each counted once).
    fn unavailable(&self) -> u64 {
        let reserved_and_used: u64 = self
            .reserved
            .iter()
            .map(|(lo, hi)| self.used.count_in(lo, hi))
            .sum();
        self.used.len() + self.reserved.len() - reserved_and_used
    }

    /// Whether `cidr` is exactly this set's cluster CIDR (after masking).
    #[must_use]
    pub fn is_cluster_cidr(&self, cidr: &IpNet) -> bool {
        cidr.trunc() == self.cluster
    }

    /// Whether `cidr` overlaps the cluster CIDR (Cilium `InRange`: the cluster holds its
    /// address or it holds the cluster's).
    #[must_use]
    pub fn in_range(&self, cidr: &IpNet) -> bool {
        self.cluster.contains(&cidr.addr()) || cidr.contains(&self.cluster.addr())
    }

    /// Hands out the first free block at or after the round-robin cursor, wrapping once
    /// (Cilium `AllocateNext`); reserved blocks are skipped.
    ///
    /// # Errors
    /// [`CidrSetError::NoCidrsRemaining`] when every block is held or reserved.
    pub fn allocate_next(&mut self) -> Result<IpNet, CidrSetError> {
        if self.is_full() {
            return Err(CidrSetError::NoCidrsRemaining {
                cluster: self.cluster,
            });
        }
        let index = self
            .first_free_from(self.next_candidate)
            .or_else(|| self.first_free_from(0))
            .ok_or(CidrSetError::NoCidrsRemaining {
                cluster: self.cluster,
            })?;
        self.next_candidate = (index + 1) % self.capacity;
        self.used.insert(index, index);
        Ok(self.block(index))
    }

    /// The first index `>= from` neither used nor reserved.
    fn first_free_from(&self, from: u64) -> Option<u64> {
        let mut candidate = from;
        loop {
            let next = self.reserved.skip(self.used.skip(candidate));
            if next >= self.capacity {
                return None;
            }
            if next == candidate {
                return Some(candidate);
            }
            candidate = next;
        }
    }

    /// Marks every block `cidr` covers as held (Cilium `Occupy`; held blocks stay held,
    /// reserved ones may be held).
    ///
    /// # Errors
    /// [`CidrSetError::OutOfRange`].
    pub fn occupy(&mut self, cidr: &IpNet) -> Result<(), CidrSetError> {
        let (lo, hi) = self.index_range(cidr)?;
        self.used.insert(lo, hi);
        Ok(())
    }

    /// Marks every block `cidr` covers as free again (Cilium `Release`); a reserved block
    /// stays unavailable.
    ///
    /// # Errors
    /// [`CidrSetError::OutOfRange`].
    pub fn release(&mut self, cidr: &IpNet) -> Result<(), CidrSetError> {
        let (lo, hi) = self.index_range(cidr)?;
        self.used.remove(lo, hi);
        Ok(())
    }

    /// Whether every block `cidr` covers is held (Cilium `IsAllocated`).
    ///
    /// # Errors
    /// [`CidrSetError::OutOfRange`].
    pub fn is_allocated(&self, cidr: &IpNet) -> Result<bool, CidrSetError> {
        let (lo, hi) = self.index_range(cidr)?;
        Ok(self.used.covers(lo, hi))
    }

    /// Whether any block `cidr` covers is held: the check that keeps a prefix larger than a
    /// block from being occupied over another holder's block (Cilium checks
    /// [`CidrSet::is_allocated`], all blocks, only).
    ///
    /// # Errors
    /// [`CidrSetError::OutOfRange`].
    pub fn overlaps_allocated(&self, cidr: &IpNet) -> Result<bool, CidrSetError> {
        let (lo, hi) = self.index_range(cidr)?;
        Ok(self.used.count_in(lo, hi) > 0)
    }

    /// Replaces the reserved ranges: no block overlapping one is handed out again, while
    /// held blocks stay held.
    ///
    /// # Errors
    /// [`CidrSetError::ReservedRangeOutside`] for a reversed range, one of the other family
    /// or one not inside the cluster CIDR; the set is then unchanged.
    pub fn set_reserved_ranges(&mut self, ranges: &[ReservedRange]) -> Result<(), CidrSetError> {
        let mut reserved = Intervals::default();
        for range in ranges {
            if !self.contains_range(range) {
                return Err(CidrSetError::ReservedRangeOutside {
                    range: *range,
                    cluster: self.cluster,
                });
            }
            reserved.insert(self.index_of(range.start), self.index_of(range.end));
        }
        self.reserved = reserved;
        Ok(())
    }

    /// Whether `range` lies inside the cluster CIDR, in order.
    #[must_use]
    pub fn contains_range(&self, range: &ReservedRange) -> bool {
        self.cluster.contains(&range.start)
            && self.cluster.contains(&range.end)
            && range.start <= range.end
    }

    /// The block indices `cidr` covers (Cilium `getBeginningAndEndIndices`): all of them for
    /// a prefix at least as large as the cluster, else those of its first and last address
    /// (one block for a prefix smaller than a block).
    fn index_range(&self, cidr: &IpNet) -> Result<(u64, u64), CidrSetError> {
        if !self.in_range(cidr) {
            return Err(CidrSetError::OutOfRange {
                cidr: *cidr,
                cluster: self.cluster,
            });
        }
        if cidr.prefix_len() <= self.cluster.prefix_len() {
            return Ok((0, self.capacity - 1));
        }
        Ok((
            self.index_of(cidr.network()),
            self.index_of(cidr.broadcast()),
        ))
    }

    /// Bits below the block mask.
    fn host_bits(&self) -> u32 {
        u32::from(Family::of(&self.cluster).bits() - self.mask)
    }

    /// The index of the block holding `addr` (an address inside the cluster).
    fn index_of(&self, addr: IpAddr) -> u64 {
        let offset = addr_to_u128(addr) ^ addr_to_u128(self.cluster.network());
        let index = offset.checked_shr(self.host_bits()).unwrap_or(0);
        u64::try_from(index).unwrap_or(u64::MAX)
    }

    /// The block at `index`: cluster base | index << host bits.
    fn block(&self, index: u64) -> IpNet {
        let offset = u128::from(index).checked_shl(self.host_bits()).unwrap_or(0);
        let base = addr_to_u128(self.cluster.network());
        let addr = u128_to_addr(Family::of(&self.cluster), base | offset);
        IpNet::new(addr, self.mask).unwrap_or(self.cluster)
    }
}

/// Builds one set per CIDR of `cidrs`, in order, for `family` (Cilium `NewCIDRSets`): each
/// CIDR is checked for a collision with `existing` and the sets built before it, then for
/// its family, then carved with `mask`.
///
/// # Errors
/// [`CidrSetError::Collision`], [`CidrSetError::WrongFamily`] or an error of
/// [`CidrSet::new`]; nothing is built then.
pub fn build_sets(
    existing: &[CidrSet],
    family: Family,
    cidrs: &[IpNet],
    mask: u8,
) -> Result<Vec<CidrSet>, CidrSetError> {
    let mut built: Vec<CidrSet> = Vec::with_capacity(cidrs.len());
    for cidr in cidrs {
        if let Some(other) = existing.iter().chain(&built).find(|set| set.in_range(cidr)) {
            return Err(CidrSetError::Collision {
                cidr: *cidr,
                cluster: other.cluster,
                mask: other.mask,
            });
        }
        if Family::of(cidr) != family {
            return Err(CidrSetError::WrongFamily {
                family,
                cidr: *cidr,
            });
        }
        built.push(CidrSet::new(*cidr, mask)?);
    }
    Ok(built)
}

#[cfg(test)]
mod tests;

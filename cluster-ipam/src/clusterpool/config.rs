//! The cluster-pool settings ([`ClusterPoolConfig`], Cilium's `cluster-pool-*` flags) and
//! one family's validated sets ([`FamilyPool`]): the checks Cilium's `Init` makes, and the
//! append-only rule for a runtime change. It knows no nodes.

use ipnet::IpNet;

use super::ClusterPoolError;
use crate::{
    Family,
    cidrset::{BlockStats, CidrSet, build_sets},
};

/// Cilium's default `cluster-pool-ipv4-mask-size`.
pub const DEFAULT_IPV4_MASK_SIZE: u8 = 24;
/// Cilium's default `cluster-pool-ipv6-mask-size`.
pub const DEFAULT_IPV6_MASK_SIZE: u8 = 112;

/// One family's settings (`enable-ipv4`, `cluster-pool-ipv4-cidr`, `…-mask-size`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyConfig {
    /// Whether the family is enabled.
    pub enabled: bool,
    /// The cluster CIDRs, in order.
    pub cidrs: Vec<IpNet>,
    /// The node block mask size.
    pub mask_size: u8,
}

/// The cluster-pool settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterPoolConfig {
    /// IPv4 (enabled by default, /24 blocks).
    pub ipv4: FamilyConfig,
    /// IPv6 (disabled by default, /112 blocks).
    pub ipv6: FamilyConfig,
}

impl Default for ClusterPoolConfig {
    fn default() -> Self {
        Self {
            ipv4: FamilyConfig {
                enabled: true,
                cidrs: Vec::new(),
                mask_size: DEFAULT_IPV4_MASK_SIZE,
            },
            ipv6: FamilyConfig {
                enabled: false,
                cidrs: Vec::new(),
                mask_size: DEFAULT_IPV6_MASK_SIZE,
            },
        }
    }
}

/// One family: its settings and its sets, in configuration order.
#[derive(Clone, Debug)]
pub(super) struct FamilyPool {
    pub(super) enabled: bool,
    pub(super) mask: u8,
    pub(super) cidrs: Vec<IpNet>,
    pub(super) sets: Vec<CidrSet>,
}

impl FamilyPool {
    /// Validates one family's settings and builds its sets (Cilium `Init`).
    pub(super) fn new(family: Family, config: &FamilyConfig) -> Result<Self, ClusterPoolError> {
        let sets = if config.enabled {
            if config.cidrs.is_empty() {
                return Err(ClusterPoolError::CidrRequired { family });
            }
            build_sets(&[], family, &config.cidrs, config.mask_size)
                .map_err(|source| ClusterPoolError::InitAllocator { family, source })?
        } else if config.cidrs.is_empty() {
            Vec::new()
        } else {
            return Err(ClusterPoolError::CidrForbidden { family });
        };
        Ok(Self {
            enabled: config.enabled,
            mask: config.mask_size,
            cidrs: config.cidrs.iter().map(IpNet::trunc).collect(),
            sets,
        })
    }

    /// The sets to append for `cidrs` (which must keep the existing ones as a prefix).
    pub(super) fn appended(
        &self,
        family: Family,
        cidrs: &[IpNet],
    ) -> Result<Vec<CidrSet>, ClusterPoolError> {
        if !self.enabled && !cidrs.is_empty() {
            return Err(ClusterPoolError::CidrForbidden { family });
        }
        if self.enabled && cidrs.is_empty() {
            return Err(ClusterPoolError::CidrRequired { family });
        }
        let new: Vec<IpNet> = cidrs.iter().map(IpNet::trunc).collect();
        let moved = (self.cidrs.iter().enumerate()).find(|&(i, old)| new.get(i) != Some(old));
        if let Some((_, old)) = moved {
            return Err(ClusterPoolError::CidrRemoved { family, cidr: *old });
        }
        build_sets(&self.sets, family, &cidrs[self.cidrs.len()..], self.mask)
            .map_err(|source| ClusterPoolError::InitAllocator { family, source })
    }

    /// Held, reserved and free blocks over all sets.
    pub(super) fn stats(&self) -> BlockStats {
        let mut stats = BlockStats::default();
        for set in &self.sets {
            stats += set.stats();
        }
        stats
    }
}

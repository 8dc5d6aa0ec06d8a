//! The instance-type limits EC2 reports (`DescribeInstanceTypes`: interfaces per instance,
//! addresses per interface, hypervisor, bare metal) and Cilium's formulas over them: how many
//! addresses an ENI holds, the node's capacity, the default `max-allocate` and
//! `pre-allocate`, the size of a new ENI, and when prefix delegation applies. Pure: the
//! limits cache that fills [`Limits`] and the node code that calls these live elsewhere.

use crate::cloud::needed::DEFAULT_PRE_ALLOCATE as DEFAULT_PRE_ALLOCATE_I64;

/// Addresses in one delegated IPv4 prefix (a /28).
pub const PD_BLOCK: u64 = 16;

/// The limits of one instance type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Limits {
    /// `maximumNetworkInterfaces`: interfaces per instance (all network cards).
    pub adapters: u64,
    /// `ipv4AddressesPerInterface`, the primary address included.
    pub ipv4: u64,
    /// `ipv6AddressesPerInterface`.
    pub ipv6: u64,
    /// `hypervisor` (`nitro`, `xen`, or empty for bare metal).
    pub hypervisor: String,
    /// `bareMetal`.
    pub bare_metal: bool,
}

/// What the formulas need to know of one ENI of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EniShape {
    /// Its IPv4 addresses, the primary and every address of its prefixes included.
    pub addresses: u64,
    /// Its delegated IPv4 prefixes.
    pub prefixes: u64,
    /// Excluded from allocation (below `first-interface-index`, or matching all
    /// `exclude-interface-tags`).
    pub excluded: bool,
}

impl Limits {
    /// Whether the instance type can take delegated prefixes (nitro or bare metal).
    #[must_use]
    pub fn prefix_capable(&self) -> bool {
        self.hypervisor == "nitro" || self.bare_metal
    }

    /// Secondary addresses an ENI holds without prefixes (the primary is not handed out).
    fn secondaries(&self) -> u64 {
        self.ipv4.saturating_sub(1)
    }

    /// Addresses one ENI can hand out: its secondaries (and the primary with
    /// `use-primary-address`), ×16 with prefix delegation, else plus 15 for each prefix it
    /// already holds (a prefix takes one slot and gives 16 addresses).
    #[must_use]
    pub fn effective(&self, use_primary: bool, pd: bool, prefixes: u64) -> u64 {
        let base = self.secondaries() + u64::from(use_primary);
        if pd {
            base.saturating_mul(PD_BLOCK)
        } else {
            base.saturating_add(prefixes.saturating_mul(PD_BLOCK - 1))
        }
    }

    /// The node's capacity (the `available_ips` metric): every interface slot at its
    /// effective size, less the excluded ENIs, plus what the prefixes of the others add.
    #[must_use]
    pub fn capacity(&self, use_primary: bool, pd: bool, enis: &[EniShape]) -> u64 {
        let empty = self.effective(use_primary, pd, 0);
        let mut capacity = self.adapters.saturating_mul(empty);
        for eni in enis {
            let effective = self.effective(use_primary, pd, eni.prefixes);
            if eni.excluded {
                capacity = capacity.saturating_sub(effective);
            } else {
                capacity = capacity.saturating_add(effective - empty);
            }
        }
        capacity
    }

    /// The size of a new ENI: what is still to allocate, at most what one ENI holds.
    #[must_use]
    pub fn new_eni_size(&self, pd: bool, to_allocate: u64) -> u64 {
        let room = if pd {
            self.secondaries().saturating_mul(PD_BLOCK)
        } else {
            self.secondaries()
        };
        to_allocate.min(room)
    }
}

/// The default `max-allocate`: the addresses of every interface from `first_index` on
/// (`None`: unlimited, when the limits are unknown or the index is past the last interface).
#[must_use]
pub fn max_allocatable(limits: Option<&Limits>, first_index: u64, pd: bool) -> Option<u64> {
    let limits = limits?;
    let interfaces = limits.adapters.checked_sub(first_index)?;
    let per = if pd {
        limits.secondaries().saturating_mul(PD_BLOCK)
    } else {
        limits.secondaries()
    };
    Some(interfaces.saturating_mul(per)).filter(|&n| n > 0)
}

/// Why a node of `instance_type` holds no more than [`max_allocatable`]: the type's
/// interfaces from `first_index` on, times the addresses each hands out.
#[must_use]
pub fn limit_reason(instance_type: &str, limits: &Limits, first_index: u64, pd: bool) -> String {
    let pd = if pd { " × 16 (/28 prefixes)" } else { "" };
    format!(
        "instance type {instance_type}: ENIs {first_index} to {} of its {}, {} addresses each \
         beside the ENI's primary{pd}",
        limits.adapters.saturating_sub(1),
        limits.adapters,
        limits.secondaries(),
    )
}

/// `pre-allocate`'s default, as a count.
const DEFAULT_PRE_ALLOCATE: u64 = DEFAULT_PRE_ALLOCATE_I64.unsigned_abs();

/// The default `pre-allocate`: 8, or fewer when the interfaces from `first_index` on hold
/// fewer (0 when there are none; 8 when the limits are unknown).
#[must_use]
pub fn min_allocatable(limits: Option<&Limits>, first_index: u64) -> u64 {
    let Some(limits) = limits else {
        return DEFAULT_PRE_ALLOCATE;
    };
    let interfaces = limits.adapters.saturating_sub(first_index);
    interfaces
        .saturating_mul(limits.secondaries())
        .min(DEFAULT_PRE_ALLOCATE)
}

/// Whether a node allocates prefixes: the operator's flag, known limits of a capable type,
/// not disabled on the node, and no ENI holding secondary addresses outside prefixes (an ENI
/// with only its primary address does not count).
#[must_use]
pub fn prefix_delegation(
    enabled: bool,
    limits: Option<&Limits>,
    disabled_on_node: bool,
    enis: &[EniShape],
) -> bool {
    enabled
        && limits.is_some_and(Limits::prefix_capable)
        && !disabled_on_node
        && !enis.iter().any(|e| e.prefixes == 0 && e.addresses > 1)
}

#[cfg(test)]
mod tests;

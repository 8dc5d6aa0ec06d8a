//! Why an IPAM call failed, typed. [`IpamError`] says what the daemon must do (try again
//! later, fail the ADD, mark a record lost); its source says why, keeping the allocator's own
//! error ([`AllocatorError`]) rather than its text. The texts are Cilium's, and an error
//! written with [`crate::error::chain`] reads as it always did.

use super::family_word;
use crate::ipam::{
    Family,
    crdalloc::CrdError,
    hostscope::HostScopeError,
    multipool::{MultiPoolError, PoolWait},
    prealloc::PreAllocError,
    selection::SelectionError,
};

/// Why an IPAM call failed.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// The node has no usable addresses yet (CNI: try again later).
    #[error(transparent)]
    NotReady {
        /// What the node waits for.
        source: Waiting,
    },
    /// The allocation failed for good (exhausted, no matching pool, …).
    #[error(transparent)]
    Failed {
        /// Why.
        source: Failure,
    },
    /// A recorded address cannot be taken again, and never will be under this configuration
    /// and CiliumNode (it left the pool or the pod CIDR, or is taken twice).
    #[error(transparent)]
    Unrestorable {
        /// The allocator's refusal.
        source: AllocatorError,
    },
    /// The configuration cannot work (bad pre-allocation flag).
    #[error(transparent)]
    Config(#[from] PreAllocError),
}

/// What a node that cannot hand out addresses yet waits for (Cilium's wording).
#[derive(Debug, thiserror::Error)]
pub enum Waiting {
    /// The own CiliumNode has not been seen.
    #[error("Waiting for CiliumNode custom resource to become available...")]
    NoNode,
    /// Host-scope: the pod CIDR of an enabled family is not in the CiliumNode yet.
    #[error(
        "{} allocation CIDR is not configured. Please specify --ipv{}-range",
        family_word(*family),
        family_number(*family)
    )]
    NoRange {
        /// The family.
        family: Family,
    },
    /// Host-scope: a recorded address's family has no pod CIDR yet (restore).
    #[error("{} allocation CIDR is not configured", family_word(*family))]
    NoCidr {
        /// The family.
        family: Family,
    },
    /// CRD modes: `spec.ipam.pool` holds fewer addresses than the minimum.
    #[error("Waiting for IPs to become available in CRD-backed allocation pool")]
    CrdMinimum,
    /// Multi-pool: pre-allocation pools without a free address.
    #[error("Waiting for cidr pool to become available: {}", describe_waits(waits))]
    Pools {
        /// Each pool and family waited for.
        waits: Vec<PoolWait>,
    },
    /// A static IP was requested (`static-ip-tags`) and the operator has not assigned it.
    #[error(
        "Waiting for the operator to assign a static IP (static-ip-tags {tags}): \
         status.ipam.assigned-static-ip is empty"
    )]
    StaticIp {
        /// The requested tags, `key=value` joined by commas.
        tags: String,
    },
    /// The allocator cannot serve the address or pool yet (the CRD pool or the CiliumNode, a
    /// multi-pool pool's CIDRs of the family).
    #[error(transparent)]
    Allocator(#[from] AllocatorError),
}

/// Why an allocation failed for good.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The mode has no allocator in the agent (`delegated-plugin`).
    #[error("Operation not supported")]
    NotSupported,
    /// The family has no allocator (host-scope without its CIDR).
    #[error("{} allocation disabled", family_word(*family))]
    FamilyDisabled {
        /// The family.
        family: Family,
    },
    /// No pool could be chosen for the owner.
    #[error("unable to determine IPAM pool for owner \"{owner}\"")]
    Selection {
        /// The IPAM owner.
        owner: String,
        /// Why the selection failed.
        #[source]
        source: SelectionError,
    },
    /// The pool has no free address.
    #[error("pool {pool:?} ({family}, {size} addresses) is exhausted")]
    Exhausted {
        /// The pool (`spec.ipam.pool` in the CRD modes).
        pool: String,
        /// The family.
        family: Family,
        /// How many addresses the pool holds.
        size: u128,
        /// The allocator's error.
        #[source]
        source: AllocatorError,
    },
    /// The allocator refused otherwise.
    #[error(transparent)]
    Allocator(#[from] AllocatorError),
}

/// The error of the allocator a mode runs.
#[derive(Debug, thiserror::Error)]
pub enum AllocatorError {
    /// A host-scope range (`kubernetes`, `cluster-pool`).
    #[error(transparent)]
    HostScope(#[from] HostScopeError),
    /// The CRD allocator (`crd`, `azure`, `alibabacloud`).
    #[error(transparent)]
    Crd(#[from] CrdError),
    /// The multi-pool manager (`multi-pool`, `eni`).
    #[error(transparent)]
    MultiPool(#[from] MultiPoolError),
}

impl From<Waiting> for IpamError {
    fn from(source: Waiting) -> Self {
        Self::NotReady { source }
    }
}

impl From<Failure> for IpamError {
    fn from(source: Failure) -> Self {
        Self::Failed { source }
    }
}

const fn family_number(family: Family) -> u8 {
    match family {
        Family::V4 => 4,
        Family::V6 => 6,
    }
}

/// `pool blue has no IPv6 CIDR, pool red has no free IPv4 address`.
fn describe_waits(waits: &[PoolWait]) -> String {
    let waits: Vec<String> = waits
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
    waits.join(", ")
}

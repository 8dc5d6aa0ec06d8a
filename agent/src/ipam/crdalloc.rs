//! The CRD allocator of the `crd`, `azure` and `alibabacloud` modes (Cilium `pkg/ipam/crd.go`):
//! addresses come from the own `CiliumNode`'s `spec.ipam.pool`, allocations go back as
//! `status.ipam.used` (both families in one map), and the agent answers the operator's
//! `status.ipam.release-ips` handshake. One value serves both families, like Cilium's shared
//! node store. It does not build the mode-specific result metadata (MAC, gateway, CIDRs) nor
//! write anything: callers read [`CrdAllocator::used`] and [`CrdAllocator::release_ips`] and
//! do the status write.

use std::{collections::BTreeMap, net::IpAddr};

use thiserror::Error;

use super::{Family, Random, mode::IpamMode};
use crate::crd::ipam::{AllocationIp, ReleaseState};

/// Errors of the CRD allocator, with Cilium's texts.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CrdError {
    /// The address is already allocated here.
    #[error("IP already in use")]
    AlreadyInUse {
        /// The address.
        ip: IpAddr,
    },
    /// The own `CiliumNode` has not been seen yet, or was deleted.
    #[error("CiliumNode for own node is not available")]
    NodeUnavailable,
    /// `spec.ipam.pool` is absent.
    #[error("No IPs available")]
    NoPool,
    /// The operator is releasing the address (`marked-for-release`, `ready-for-release`,
    /// `released`).
    #[error("IP not available, marked or ready for release")]
    InReleaseHandshake {
        /// The address.
        ip: IpAddr,
    },
    /// The address is not in `spec.ipam.pool` (Cilium `ErrIPNotAvailableInPool`).
    #[error("IP {ip} is not available")]
    NotInPool {
        /// The address.
        ip: IpAddr,
    },
    /// Nothing is left to hand out, `crd` mode.
    #[error(
        "no IPs currently available on the node, allocation will be retried once IPs are added to CiliumNode spec.ipam.pool"
    )]
    ExhaustedCrd {
        /// The family asked for.
        family: Family,
    },
    /// Nothing is left to hand out, operator-managed modes.
    #[error(
        "no IPs currently available on the node, allocation will be retried once Cilium Operator allocates more IPs"
    )]
    Exhausted {
        /// The family asked for.
        family: Family,
    },
    /// Release of an address that is not allocated.
    #[error("IP {ip} is not allocated")]
    NotAllocated {
        /// The address.
        ip: IpAddr,
    },
}

impl CrdError {
    /// Whether this is Cilium's `ErrIPNotAvailableInPool` for `ip` (what
    /// `--bypass-ip-availability-upon-restore` ignores).
    #[must_use]
    pub fn is_not_in_pool(&self, ip: IpAddr) -> bool {
        matches!(self, Self::NotInPool { ip: got } if *got == ip)
    }
}

/// A successful allocation: the address and its `status.ipam.used` entry (the pool entry with
/// `owner` set, `resource` kept) from which the caller builds the mode's result metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrdAllocation {
    /// The address.
    pub ip: IpAddr,
    /// The pool entry, owner set.
    pub info: AllocationIp,
}

/// What the allocator knows of the own `CiliumNode`.
#[derive(Clone, Debug, Default)]
struct NodeView {
    /// `spec.ipam.pool` with parsable keys; `None` when the field is absent.
    pool: Option<BTreeMap<IpAddr, AllocationIp>>,
    /// Number of raw `spec.ipam.pool` keys, unparsable ones included.
    raw_pool_len: usize,
    /// `status.ipam.release-ips`, with the agent's answers applied.
    release_ips: BTreeMap<String, ReleaseState>,
}

/// The CRD allocator state for both families.
#[derive(Clone, Debug)]
pub struct CrdAllocator {
    /// `crd` mode: static owner pins and the `crd` exhaustion text.
    crd_mode: bool,
    node: Option<NodeView>,
    allocated: BTreeMap<IpAddr, AllocationIp>,
}

/// `required` of the startup wait: `min-allocate` if set, else `pre-allocate` if set, else 2
/// with health checking, else 1.
#[must_use]
pub fn required_ips(min_allocate: u32, pre_allocate: u32, health_checking: bool) -> usize {
    let n = match (min_allocate, pre_allocate) {
        (0, 0) => return if health_checking { 2 } else { 1 },
        (0, pre) => pre,
        (min, _) => min,
    };
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl CrdAllocator {
    /// An allocator for `mode` (`crd`, `azure` or `alibabacloud`); only `crd` pins owners.
    /// No node has been seen yet.
    #[must_use]
    pub fn new(mode: IpamMode) -> Self {
        Self {
            crd_mode: mode == IpamMode::Crd,
            node: None,
            allocated: BTreeMap::new(),
        }
    }

    /// An Add or a changed Update of the own `CiliumNode`: refreshes the pool (keys that don't
    /// parse as IPs are ignored) and answers the release handshake in `release_ips`. Returns
    /// whether an answer changed `release_ips`, i.e. whether a status sync is due
    /// (`excess IP release`). Allocations of addresses that left the pool are kept.
    pub fn update_node(
        &mut self,
        pool: Option<BTreeMap<String, AllocationIp>>,
        release_ips: BTreeMap<String, ReleaseState>,
    ) -> bool {
        let raw_pool_len = pool.as_ref().map_or(0, BTreeMap::len);
        let pool = pool.map(|raw| {
            raw.into_iter()
                .filter_map(|(key, info)| key.parse::<IpAddr>().ok().map(|ip| (ip, info)))
                .collect::<BTreeMap<_, _>>()
        });
        let mut view = NodeView {
            pool,
            raw_pool_len,
            release_ips,
        };
        let changed = self.answer_release_handshake(&mut view);
        self.node = Some(view);
        changed
    }

    /// The agent side of the handshake (`updateLocalNodeResource`); no-op without a pool.
    fn answer_release_handshake(&self, view: &mut NodeView) -> bool {
        let Some(pool) = &view.pool else {
            return false;
        };
        let mut changed = false;
        view.release_ips.retain(|key, state| {
            if matches!(
                state,
                ReleaseState::ReadyForRelease | ReleaseState::DoNotRelease
            ) {
                return true;
            }
            let ip = key.parse::<IpAddr>().ok();
            let in_pool = ip.is_some_and(|ip| pool.contains_key(&ip));
            let answer = match (*state, in_pool) {
                (ReleaseState::Released, false) => {
                    changed = true;
                    return false;
                }
                (ReleaseState::MarkedForRelease, false) => ReleaseState::DoNotRelease,
                (ReleaseState::MarkedForRelease, true)
                    if ip.is_some_and(|ip| self.allocated.contains_key(&ip)) =>
                {
                    ReleaseState::DoNotRelease
                }
                (ReleaseState::MarkedForRelease, true) => ReleaseState::ReadyForRelease,
                _ => return true,
            };
            *state = answer;
            changed = true;
            true
        });
        changed
    }

    /// The own `CiliumNode` was deleted: allocations fail until the next [`Self::update_node`].
    pub fn remove_node(&mut self) {
        self.node = None;
    }

    /// `status.ipam.release-ips` as answered by the agent (empty without a node).
    #[must_use]
    pub fn release_ips(&self) -> BTreeMap<String, ReleaseState> {
        self.node
            .as_ref()
            .map(|n| n.release_ips.clone())
            .unwrap_or_default()
    }

    /// `status.ipam.used`: every allocation of both families, `owner` set and `resource`
    /// kept, including addresses that have since left the pool.
    #[must_use]
    pub fn used(&self) -> BTreeMap<String, AllocationIp> {
        self.allocated
            .iter()
            .map(|(ip, info)| (ip.to_string(), info.clone()))
            .collect()
    }

    /// Reserves `ip` for `owner` (restore, explicit request), checked in Cilium's order.
    ///
    /// # Errors
    /// [`CrdError::AlreadyInUse`], [`CrdError::NodeUnavailable`], [`CrdError::NoPool`],
    /// [`CrdError::InReleaseHandshake`], [`CrdError::NotInPool`].
    pub fn allocate(&mut self, ip: IpAddr, owner: &str) -> Result<CrdAllocation, CrdError> {
        if self.allocated.contains_key(&ip) {
            return Err(CrdError::AlreadyInUse { ip });
        }
        let node = self.node.as_ref().ok_or(CrdError::NodeUnavailable)?;
        let pool = node.pool.as_ref().ok_or(CrdError::NoPool)?;
        if in_release_handshake(node, ip) {
            return Err(CrdError::InReleaseHandshake { ip });
        }
        let info = pool.get(&ip).cloned().ok_or(CrdError::NotInPool { ip })?;
        Ok(self.mark_allocated(ip, info, owner))
    }

    /// Reserves `ip` for `owner` although `spec.ipam.pool` does not hold it
    /// (`bypass-ip-availability-upon-restore`): it stays in `status.ipam.used` and is never
    /// handed to another pod, should it come back to the pool.
    pub fn allocate_outside_pool(&mut self, ip: IpAddr, owner: &str) {
        self.mark_allocated(ip, AllocationIp::default(), owner);
    }

    /// Reserves an address of `family` for `owner`. In `crd` mode a pool entry whose `owner`
    /// equals a non-empty `owner` is a static pin and is returned as is (allocated and
    /// handshake state are not checked). Otherwise a random entry among those not allocated,
    /// not in the handshake and without an `owner`.
    ///
    /// # Errors
    /// [`CrdError::NodeUnavailable`], [`CrdError::ExhaustedCrd`] / [`CrdError::Exhausted`].
    pub fn allocate_next(
        &mut self,
        owner: &str,
        family: Family,
        rng: &mut (impl Random + ?Sized),
    ) -> Result<CrdAllocation, CrdError> {
        let node = self.node.as_ref().ok_or(CrdError::NodeUnavailable)?;
        let pool = node.pool.as_ref();
        let entries = || {
            pool.into_iter()
                .flatten()
                .filter(|(ip, _)| Family::of(ip) == family)
        };
        let pinned = (self.crd_mode && !owner.is_empty())
            .then(|| entries().find(|(_, info)| info.owner == owner))
            .flatten();
        if let Some((ip, info)) = pinned {
            let (ip, info) = (*ip, info.clone());
            return Ok(self.mark_allocated(ip, info, owner));
        }
        let candidates: Vec<_> = entries()
            .filter(|(ip, info)| {
                info.owner.is_empty()
                    && !self.allocated.contains_key(ip)
                    && !in_release_handshake(node, **ip)
            })
            .collect();
        let len = u64::try_from(candidates.len()).unwrap_or(u64::MAX);
        if len == 0 {
            return Err(if self.crd_mode {
                CrdError::ExhaustedCrd { family }
            } else {
                CrdError::Exhausted { family }
            });
        }
        let pick = usize::try_from(rng.below(len)).unwrap_or(0);
        let (ip, info) = candidates
            .get(pick)
            .map(|(ip, info)| (**ip, (*info).clone()))
            .ok_or(CrdError::Exhausted { family })?;
        Ok(self.mark_allocated(ip, info, owner))
    }

    /// Frees `ip`.
    ///
    /// # Errors
    /// [`CrdError::NotAllocated`].
    pub fn release(&mut self, ip: IpAddr) -> Result<(), CrdError> {
        self.allocated
            .remove(&ip)
            .map(drop)
            .ok_or(CrdError::NotAllocated { ip })
    }

    /// Whether `len(spec.ipam.pool) >= required`, counting raw entries (handshake and
    /// unparsable ones included). False without a node or a pool.
    #[must_use]
    pub fn minimum_reached(&self, required: usize) -> bool {
        self.node
            .as_ref()
            .is_some_and(|n| n.pool.is_some() && n.raw_pool_len >= required)
    }

    /// Pool entries not in a release handshake (only logged by Cilium).
    #[must_use]
    pub fn num_available(&self) -> usize {
        self.node.as_ref().map_or(0, |n| {
            n.pool
                .iter()
                .flatten()
                .filter(|(ip, _)| !in_release_handshake(n, **ip))
                .count()
        })
    }

    /// `Capacity()`: the number of pool entries of `family`.
    #[must_use]
    pub fn capacity(&self, family: Family) -> usize {
        self.node.as_ref().map_or(0, |n| {
            n.pool
                .iter()
                .flatten()
                .filter(|(ip, _)| Family::of(ip) == family)
                .count()
        })
    }

    /// Number of allocations of `family`.
    #[must_use]
    pub fn allocated_count(&self, family: Family) -> usize {
        self.allocated
            .keys()
            .filter(|ip| Family::of(ip) == family)
            .count()
    }

    /// The `Dump` status of `family`: `"<allocated>/<poolsize> allocated"`.
    #[must_use]
    pub fn status(&self, family: Family) -> String {
        format!(
            "{}/{} allocated",
            self.allocated_count(family),
            self.capacity(family)
        )
    }

    fn mark_allocated(&mut self, ip: IpAddr, mut info: AllocationIp, owner: &str) -> CrdAllocation {
        owner.clone_into(&mut info.owner);
        self.allocated.insert(ip, info.clone());
        CrdAllocation { ip, info }
    }
}

/// Whether `release-ips[ip]` is `marked-for-release`, `ready-for-release` or `released`.
fn in_release_handshake(node: &NodeView, ip: IpAddr) -> bool {
    node.release_ips.get(&ip.to_string()).is_some_and(|state| {
        matches!(
            state,
            ReleaseState::MarkedForRelease | ReleaseState::ReadyForRelease | ReleaseState::Released
        )
    })
}

#[cfg(test)]
mod tests;

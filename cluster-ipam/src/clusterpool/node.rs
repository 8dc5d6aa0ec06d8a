//! The per-node flow of [`ClusterPool`] (Cilium `allocateNode`, `reuseIPNets`,
//! `allocateIPNet`, `allocateFirstFreeCIDR`): re-occupy what the node lists, strip what
//! another node holds, hand out one block per missing family. It owns no state of its own.
//!
//! Where it departs from Cilium, on purpose:
//! - a listed prefix that overlaps any block held elsewhere is a duplicate (Cilium only
//!   looks at whether *all* its blocks are held), and that check comes before "set full";
//! - a duplicate is always stripped from the node's podCIDRs, also when both families are
//!   duplicates (Cilium then leaves the spec as written);
//! - no fresh block is handed out before [`ClusterPool::restore_finished`], also not the
//!   missing family of a node seen for the first time (Cilium allocates that one at once);
//! - a node left holding nothing is forgotten, so its next empty spec gets fresh blocks.

use ipnet::IpNet;

use super::{ClusterPool, ClusterPoolError, NodeCidrs, NodeResult, Warning};
use crate::Family;

/// What [`ClusterPool::reuse`] did when it did not fail outright.
struct Reused {
    /// Something was occupied or allocated.
    allocated: bool,
    /// A listed CIDR was held elsewhere and stripped (v4's if both).
    duplicate: Option<ClusterPoolError>,
    /// A family still needs a fresh block, after the restore.
    needs_later: bool,
}

/// Splits `spec.ipam.podCIDRs` by family, masked (Cilium `parsePodCIDRs`).
fn parse_pod_cidrs(pod_cidrs: &[String]) -> Result<NodeCidrs, ClusterPoolError> {
    let mut cidrs = NodeCidrs::default();
    for value in pod_cidrs {
        let net: IpNet = value
            .parse()
            .map_err(|source| ClusterPoolError::InvalidPodCidr {
                value: value.clone(),
                source,
            })?;
        cidrs.family_mut(Family::of(&net)).push(net.trunc());
    }
    Ok(cidrs)
}

impl ClusterPool {
    /// Reconciles one CiliumNode: `pod_cidrs` is its `spec.ipam.podCIDRs`. An empty list
    /// gets one block per enabled family (v4 handed back if v6 fails); listed CIDRs are
    /// occupied for the node, a CIDR held by another node is stripped with a
    /// [`Warning::DuplicateCidr`] and the conflict as error; a known node listing CIDRs it
    /// was not given gets [`ClusterPoolError::Conflict`] and keeps what it holds.
    pub fn allocate_node(&mut self, node: &str, pod_cidrs: &[String]) -> NodeResult {
        if pod_cidrs.is_empty() {
            return self.allocate_fresh(node);
        }
        let listed = match parse_pod_cidrs(pod_cidrs) {
            Ok(listed) => listed,
            Err(error) => return self.failed(node, error, Vec::new()),
        };
        let mut warnings = Vec::new();
        match self.reuse(node, &listed, &mut warnings) {
            Err(error) => self.failed(node, error, warnings),
            Ok(reused) => self.finish(node, &reused, warnings, false),
        }
    }

    /// The empty-spec path (Cilium `allocateNext`).
    fn allocate_fresh(&mut self, node: &str) -> NodeResult {
        if !self.ready {
            self.postponed.insert(node.to_owned());
            return NodeResult {
                postponed: true,
                ..NodeResult::default()
            };
        }
        if self.v4.sets.is_empty() && self.v6.sets.is_empty() {
            let error = ClusterPoolError::NoAllocators {
                node: node.to_owned(),
            };
            return self.failed(node, error, Vec::new());
        }
        let mut warnings = Vec::new();
        match self.reuse(node, &NodeCidrs::default(), &mut warnings) {
            Err(error) => self.failed(node, error, warnings),
            Ok(reused) => self.finish(node, &reused, warnings, true),
        }
    }

    /// A failure: the spec is rewritten to what the node holds, if it holds anything.
    fn failed(&self, node: &str, error: ClusterPoolError, warnings: Vec<Warning>) -> NodeResult {
        NodeResult {
            pod_cidrs: self.nodes.get(node).map(NodeCidrs::strings),
            error: Some(error),
            warnings,
            postponed: false,
        }
    }

    /// Turns a [`Reused`] into the node's result.
    fn finish(
        &mut self,
        node: &str,
        reused: &Reused,
        warnings: Vec<Warning>,
        write_anyway: bool,
    ) -> NodeResult {
        if reused.needs_later {
            self.postponed.insert(node.to_owned());
        }
        let held = || {
            Some(
                self.nodes
                    .get(node)
                    .map(NodeCidrs::strings)
                    .unwrap_or_default(),
            )
        };
        if reused.duplicate.is_some() {
            return NodeResult {
                pod_cidrs: held(),
                error: reused.duplicate.clone(),
                warnings,
                postponed: reused.needs_later,
            };
        }
        if !reused.allocated && !write_anyway {
            if !self.ready {
                self.postponed.insert(node.to_owned());
            }
            return NodeResult {
                warnings,
                postponed: !self.ready,
                ..NodeResult::default()
            };
        }
        NodeResult {
            pod_cidrs: held(),
            error: None,
            warnings,
            postponed: reused.needs_later,
        }
    }

    /// Occupies the listed CIDRs for `node` and allocates a block for each family it lacks
    /// (Cilium `reuseIPNets`).
    fn reuse(
        &mut self,
        node: &str,
        listed: &NodeCidrs,
        warnings: &mut Vec<Warning>,
    ) -> Result<Reused, ClusterPoolError> {
        for family in [Family::V4, Family::V6] {
            let cidrs = listed.family(family);
            if !cidrs.is_empty() && self.family(family).sets.is_empty() {
                return Err(ClusterPoolError::AllocatorNotFound {
                    family,
                    cidrs: cidrs.clone(),
                });
            }
        }
        let mut held = self.nodes.get(node).cloned().unwrap_or_default();
        for family in [Family::V4, Family::V6] {
            let (have, want) = (held.family(family), listed.family(family));
            if !have.is_empty() && !want.iter().all(|cidr| have.contains(cidr)) {
                return Err(ClusterPoolError::Conflict {
                    held: have.clone(),
                    requested: want.clone(),
                });
            }
        }

        let mut reused = Reused {
            allocated: false,
            duplicate: None,
            needs_later: false,
        };
        let mut taken_v4: Vec<IpNet> = Vec::new();
        for family in [Family::V4, Family::V6] {
            if !held.family(family).is_empty() || self.family(family).sets.is_empty() {
                continue;
            }
            let want = listed.family(family);
            let result = if !want.is_empty() {
                self.occupy_all(family, want).map(Some)
            } else if self.ready {
                self.allocate_first_free(family)
                    .map(|cidr| Some(vec![cidr]))
            } else {
                reused.needs_later = true;
                Ok(None)
            };
            match result {
                Ok(Some(taken)) => {
                    if family == Family::V4 {
                        taken_v4.clone_from(&taken);
                    }
                    *held.family_mut(family) = taken;
                    reused.allocated = true;
                }
                Ok(None) => {}
                Err(error @ ClusterPoolError::AlreadyAllocated { .. }) => {
                    warnings.push(Warning::DuplicateCidr {
                        family,
                        node: node.to_owned(),
                        error: error.clone(),
                    });
                    reused.duplicate.get_or_insert(error);
                }
                Err(error) => {
                    self.release_all(Family::V4, &taken_v4);
                    return Err(error);
                }
            }
        }
        if held == NodeCidrs::default() {
            self.nodes.remove(node);
        } else {
            self.nodes.insert(node.to_owned(), held);
        }
        Ok(reused)
    }

    /// Occupies every CIDR of `cidrs` in the set covering it, all or none (Cilium
    /// `allocateIPNet`).
    fn occupy_all(
        &mut self,
        family: Family,
        cidrs: &[IpNet],
    ) -> Result<Vec<IpNet>, ClusterPoolError> {
        let mut done = Vec::with_capacity(cidrs.len());
        for cidr in cidrs {
            if let Err(error) = self.occupy_one(family, cidr) {
                self.release_all(family, &done);
                return Err(error);
            }
            done.push(*cidr);
        }
        Ok(done)
    }

    /// Occupies `cidr` in the first set covering it.
    fn occupy_one(&mut self, family: Family, cidr: &IpNet) -> Result<(), ClusterPoolError> {
        let Some(set) = self
            .family_mut(family)
            .sets
            .iter_mut()
            .find(|set| set.in_range(cidr))
        else {
            return Err(ClusterPoolError::NotConfigured { cidr: *cidr });
        };
        if set.overlaps_allocated(cidr)? {
            return Err(ClusterPoolError::AlreadyAllocated { cidr: *cidr });
        }
        if set.is_full() {
            return Err(ClusterPoolError::SetFull {
                cluster: set.cluster(),
                mask: set.mask_size(),
            });
        }
        set.occupy(cidr)?;
        Ok(())
    }

    /// One block from the first set that is not full (Cilium `allocateFirstFreeCIDR`).
    fn allocate_first_free(&mut self, family: Family) -> Result<IpNet, ClusterPoolError> {
        let set = self
            .family_mut(family)
            .sets
            .iter_mut()
            .find(|set| !set.is_full())
            .ok_or(ClusterPoolError::AllocatorFull { family })?;
        Ok(set.allocate_next()?)
    }

    /// Hands `cidrs` back to the sets covering them (Cilium `releaseCIDRs`).
    pub(super) fn release_all(&mut self, family: Family, cidrs: &[IpNet]) {
        for cidr in cidrs {
            let sets = &mut self.family_mut(family).sets;
            if let Some(set) = sets.iter_mut().find(|set| set.in_range(cidr)) {
                // In range, so it cannot fail.
                let _ = set.release(cidr);
            }
        }
    }
}

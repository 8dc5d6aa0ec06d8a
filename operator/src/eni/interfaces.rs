//! One node's ENIs as the allocator sees them (Cilium's `pkg/aws/ipam/node.go`, the parts that
//! decide without calling EC2): which addresses the node may hand out, what it can still hold,
//! where the next addresses go, whether it allocates prefixes, and which free addresses a
//! 1.19 agent's release handshake gives back. Pure: the instances cache supplies the ENIs,
//! subnets and limits; the node operations execute what is decided here.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use weft_k8s::crd::eni::{Eni, EniSpec};

use super::{
    limits::{EniShape, Limits, PD_BLOCK, prefix_delegation},
    vpc::Subnet,
};
use crate::cloud::{AllocationAction, Available, InterfaceStats, ReleaseAction};

/// A node whose ENIs cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterfacesError {
    /// The instance type's limits are unknown (not in `DescribeInstanceTypes`' answer).
    #[error(
        "unable to determine limits of instance type {instance_type:?}: EC2 does not list it in \
         DescribeInstanceTypes; check spec.eni.instance-type"
    )]
    UnknownLimits {
        /// `spec.eni.instance-type`.
        instance_type: String,
    },
    /// The instance has no ENI at all (gone, or not yet listed).
    #[error("unable to retrieve ENIs of instance {instance}")]
    NoEnis {
        /// `spec.instance-id`.
        instance: String,
    },
}

/// The ENIs of one node under its `spec.eni`.
#[derive(Debug, Clone, Copy)]
pub struct NodeEnis<'a> {
    /// `spec.instance-id`.
    pub instance: &'a str,
    /// `spec.eni`.
    pub spec: &'a EniSpec,
    /// Every ENI of the instance (excluded ones too), by ID.
    pub enis: &'a BTreeMap<String, Eni>,
    /// The instance type's limits (`None`: unknown).
    pub limits: Option<&'a Limits>,
    /// `--aws-enable-prefix-delegation`.
    pub pd_enabled: bool,
}

impl NodeEnis<'_> {
    /// `spec.eni.use-primary-address` (unset: false).
    fn use_primary(&self) -> bool {
        self.spec.use_primary_address == Some(true)
    }

    /// `spec.eni.first-interface-index` (unset or negative: 0).
    #[must_use]
    pub fn first_index(&self) -> u64 {
        self.spec
            .first_interface_index
            .and_then(|i| u64::try_from(i).ok())
            .unwrap_or(0)
    }

    /// The addresses of `eni` the node may hand out: all of them, less the ENI's primary
    /// address unless `use-primary-address`.
    #[must_use]
    pub fn addresses(&self, eni: &Eni) -> Vec<IpAddr> {
        let primary = (!self.use_primary()).then_some(eni.ip).flatten();
        eni.addresses
            .iter()
            .copied()
            .filter(|a| Some(*a) != primary)
            .collect()
    }

    fn shape(&self, eni: &Eni) -> EniShape {
        EniShape {
            addresses: u64::try_from(eni.addresses.len()).unwrap_or(u64::MAX),
            prefixes: u64::try_from(eni.prefixes.len()).unwrap_or(u64::MAX),
            excluded: eni.is_excluded_by_spec(self.spec),
        }
    }

    /// Whether the node allocates /28 prefixes.
    #[must_use]
    pub fn prefix_delegation(&self) -> bool {
        let shapes: Vec<EniShape> = self.enis.values().map(|e| self.shape(e)).collect();
        prefix_delegation(
            self.pd_enabled,
            self.limits,
            self.spec.disable_prefix_delegation == Some(true),
            &shapes,
        )
    }

    fn limits(&self) -> Result<&Limits, InterfacesError> {
        self.limits.ok_or_else(|| InterfacesError::UnknownLimits {
            instance_type: self.spec.instance_type.clone(),
        })
    }

    /// Addresses `eni` can still take.
    fn room(&self, limits: &Limits, pd: bool, eni: &Eni) -> u64 {
        let held = u64::try_from(self.addresses(eni).len()).unwrap_or(u64::MAX);
        let prefixes = u64::try_from(eni.prefixes.len()).unwrap_or(u64::MAX);
        limits
            .effective(self.use_primary(), pd, prefixes)
            .saturating_sub(held)
    }

    /// Single addresses the ENI `id` can still take (each of its prefixes takes a slot);
    /// 0 when unknown.
    #[must_use]
    pub fn address_room(&self, id: &str) -> u64 {
        match (self.limits, self.enis.get(id)) {
            (Some(limits), Some(eni)) => self.room(limits, false, eni),
            _ => 0,
        }
    }

    /// Interface slots of the instance no ENI takes.
    fn empty_slots(limits: &Limits, enis: usize) -> u64 {
        limits
            .adapters
            .saturating_sub(u64::try_from(enis).unwrap_or(u64::MAX))
    }

    /// The node's ENIs that are not excluded, by device index (then ID).
    fn usable(&self) -> Vec<&Eni> {
        let mut usable: Vec<&Eni> = (self.enis.values())
            .filter(|e| !e.is_excluded_by_spec(self.spec))
            .collect();
        usable.sort_by(|a, b| a.number.cmp(&b.number).then(a.id.cmp(&b.id)));
        usable
    }

    /// What the node holds (address → ENI ID, excluded ENIs left out) and can still hold.
    ///
    /// # Errors
    /// The limits are unknown, or the instance has no ENI.
    pub fn resync(&self) -> Result<(Available, InterfaceStats), InterfacesError> {
        let limits = self.limits()?;
        if self.enis.is_empty() {
            return Err(InterfacesError::NoEnis {
                instance: self.instance.to_owned(),
            });
        }
        let pd = self.prefix_delegation();
        let mut available = Available::new();
        let mut with_room = 0;
        for eni in self.usable() {
            for address in self.addresses(eni) {
                available.insert(address.to_string(), eni.id.clone());
            }
            if self.room(limits, pd, eni) > 0 {
                with_room += 1;
            }
        }
        let shapes: Vec<EniShape> = self.enis.values().map(|e| self.shape(e)).collect();
        let stats = InterfaceStats {
            node_capacity: limits.capacity(self.use_primary(), pd, &shapes),
            remaining_interfaces: with_room + Self::empty_slots(limits, self.enis.len()),
        };
        Ok((available, stats))
    }

    /// Where the next addresses go: the first usable ENI (by device index) with room whose
    /// subnet has a free address, and how many the ENI and subnet take; also the candidates
    /// and the interface slots still empty (a new ENI goes there when no ENI has room).
    ///
    /// # Errors
    /// The limits are unknown.
    pub fn allocation(
        &self,
        subnets: &BTreeMap<String, Subnet>,
    ) -> Result<AllocationAction, InterfacesError> {
        let limits = self.limits()?;
        let pd = self.prefix_delegation();
        let mut action = AllocationAction {
            empty_interface_slots: Self::empty_slots(limits, self.enis.len()),
            ..AllocationAction::default()
        };
        for eni in self.usable() {
            let room = self.room(limits, pd, eni);
            if room == 0 {
                continue;
            }
            action.interface_candidates += 1;
            let subnet_id = eni.subnet.as_ref().map_or("", |s| s.id.as_str());
            let Some(subnet) = subnets.get(subnet_id).filter(|s| s.available > 0) else {
                continue;
            };
            if action.interface_id.is_empty() {
                action.interface_id.clone_from(&eni.id);
                action.pool_id.clone_from(&subnet.id);
                action.available_for_allocation = room.min(subnet.available);
            }
        }
        Ok(action)
    }

    /// A 1.19 agent's release: at most `excess` free addresses (never one in `used`, never an
    /// ENI's primary) from one ENI. ENIs with prefixes first (by ID): whole prefixes with no
    /// used address while `excess` is 16 or more, then single addresses; otherwise the ENI
    /// that can give back the most.
    #[must_use]
    pub fn release(&self, excess: u64, used: &BTreeSet<String>) -> Release {
        let mut enis: Vec<&Eni> = self.usable();
        enis.sort_by(|a, b| a.id.cmp(&b.id));
        let free = |eni: &Eni| -> Vec<IpAddr> {
            (eni.addresses.iter().copied())
                .filter(|a| Some(*a) != eni.ip && !used.contains(&a.to_string()))
                .collect()
        };
        for eni in enis.iter().filter(|e| !e.prefixes.is_empty()) {
            let mut left = excess;
            let mut prefixes = Vec::new();
            for prefix in &eni.prefixes {
                if left < PD_BLOCK {
                    break;
                }
                let busy = (eni.addresses.iter())
                    .any(|a| prefix.contains(a) && used.contains(&a.to_string()));
                if !busy {
                    prefixes.push(*prefix);
                    left -= PD_BLOCK;
                }
            }
            let singles: Vec<String> = (free(eni).into_iter())
                .filter(|a| !eni.prefixes.iter().any(|p| p.contains(a)))
                .take(usize::try_from(left).unwrap_or(usize::MAX))
                .map(|a| a.to_string())
                .collect();
            if !prefixes.is_empty() || !singles.is_empty() {
                let mut ips: Vec<String> = (eni.addresses.iter())
                    .filter(|a| prefixes.iter().any(|p| p.contains(*a)))
                    .map(ToString::to_string)
                    .collect();
                ips.extend(singles);
                return Release {
                    action: release_action(eni, ips),
                    prefixes: prefixes.iter().map(ToString::to_string).collect(),
                };
            }
        }
        let best = (enis.iter().filter(|e| e.prefixes.is_empty()))
            .map(|eni| (eni, free(eni)))
            .max_by_key(|(eni, free)| {
                let n = u64::try_from(free.len()).unwrap_or(u64::MAX).min(excess);
                (n, std::cmp::Reverse(eni.id.clone()))
            });
        match best {
            Some((eni, free)) if excess > 0 && !free.is_empty() => Release {
                action: release_action(
                    eni,
                    (free.into_iter())
                        .take(usize::try_from(excess).unwrap_or(usize::MAX))
                        .map(|a| a.to_string())
                        .collect(),
                ),
                prefixes: Vec::new(),
            },
            _ => Release::default(),
        }
    }
}

/// `ips` of `eni`, to release.
fn release_action(eni: &Eni, ips: Vec<String>) -> ReleaseAction {
    ReleaseAction {
        interface_id: eni.id.clone(),
        pool_id: eni
            .subnet
            .as_ref()
            .map(|s| s.id.clone())
            .unwrap_or_default(),
        ips,
    }
}

/// What a 1.19 agent's release gives back: the addresses (those of whole prefixes included,
/// for the handshake) and the prefixes to unassign whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Release {
    /// The interface, subnet and addresses.
    pub action: ReleaseAction,
    /// The /28 prefixes among them, unassigned as prefixes.
    pub prefixes: Vec<String>,
}

#[cfg(test)]
mod tests;

//! The ENI allocator as a [`CloudProvider`] of the cloud node manager (Cilium's AWS
//! `InstancesManager` + `Node` operations): it reads the instances cache to say what each node
//! holds and where its next addresses go, and makes the EC2 changes through [`Ec2Ops`]:
//! addresses (or /28 prefixes, with the fall-back to addresses) on an ENI with room, a new ENI
//! when none has room (subnet, security groups and device index chosen as Cilium does;
//! created, attached, marked delete-on-termination, and deleted again if the attachment
//! fails, so that nothing leaks), the release of what a 1.20+ agent gave back
//! ([`release`]) or a 1.19 agent's handshake, and the static Elastic IP.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Mutex, PoisonError},
};

use ipnet::Ipv4Net;
use tracing::warn;
use weft_k8s::crd::eni::{Eni, EniSpec, EniStatus};

use super::{
    gc::{self, GcSettings},
    instances::Instances,
    interfaces::{InterfacesError, NodeEnis},
    limits::{self, Limits, PD_BLOCK},
    ops::{Classify, Ec2Ops, Size},
};
use crate::cloud::{
    AllocationAction, Available, CidrRelease, CloudProvider, InstanceSyncError, InterfaceStats,
    NodeRef, Notice, ReleaseAction,
};

/// The allocator's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EniSettings {
    /// `--aws-enable-prefix-delegation`.
    pub prefix_delegation: bool,
    /// Tags of every new ENI (`--eni-tags`, and the GC tags when the GC runs).
    pub eni_tags: BTreeMap<String, String>,
    /// The ENI GC.
    pub gc: GcSettings,
}

pub use self::error::{Call, EniError};

/// The ENI provider over `C` (the EC2 client's adapter, or a test's).
#[derive(Debug)]
pub struct EniProvider<C> {
    /// The instances cache.
    pub instances: Instances<C>,
    /// The settings.
    pub settings: EniSettings,
    /// Instance types asked for and not in the limits: the next resync reads them again.
    missing_types: Mutex<BTreeSet<String>>,
    /// ENIs this process created and deleted again, per instance: part of the next creation's
    /// `ClientToken`, so that it is not answered with the deleted ENI (a token stays
    /// idempotent across a restart, where an ENI created but not attached is found again).
    pub(super) deleted: Mutex<BTreeMap<String, u32>>,
    /// Events to post per instance (a prefix-delegation fallback).
    pub(super) notices: Mutex<BTreeMap<String, Vec<Notice>>>,
    /// Instances a change was made to (or may have been) whose answer the cache does not
    /// hold: the round's instance sync reads them again. Every other change is in the cache
    /// from its answer, and its read is saved.
    unsynced: Mutex<BTreeSet<String>>,
}

impl<C: Ec2Ops> EniProvider<C> {
    /// A provider over `ops`.
    pub fn new(ops: C, settings: EniSettings) -> Self {
        Self {
            instances: Instances::new(ops),
            settings,
            missing_types: Mutex::default(),
            deleted: Mutex::default(),
            notices: Mutex::default(),
            unsynced: Mutex::default(),
        }
    }

    /// The cache may not show what `instance` holds now: read it again after the round.
    fn unsynced(&self, instance: &str) {
        (self.unsynced.lock().unwrap_or_else(PoisonError::into_inner)).insert(instance.to_owned());
    }

    /// Mark `instance` unsynced when the change failed (it may have been made).
    fn noted<T>(
        &self,
        instance: &str,
        result: Result<T, EniError<C::Error>>,
    ) -> Result<T, EniError<C::Error>> {
        if result.is_err() {
            self.unsynced(instance);
        }
        result
    }

    fn limits_of(&self, spec: &EniSpec) -> Option<Limits> {
        let limits = self
            .instances
            .lock()
            .limits
            .get(&spec.instance_type)
            .cloned();
        if limits.is_none() {
            self.missing_types
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(spec.instance_type.clone());
        }
        limits
    }

    /// Run `f` over the node's ENIs as the cache shows them.
    fn with_node<T>(
        &self,
        node: NodeRef<'_, EniSpec>,
        f: impl FnOnce(NodeEnis<'_>, &crate::eni::instances::Cache) -> T,
    ) -> Result<T, EniError<C::Error>> {
        let limits = self.limits_of(node.spec);
        let cache = self.instances.lock();
        let enis =
            cache
                .instances
                .get(node.instance_id)
                .ok_or_else(|| EniError::UnknownInstance {
                    instance: node.instance_id.to_owned(),
                })?;
        let view = NodeEnis {
            instance: node.instance_id,
            spec: node.spec,
            enis,
            limits: limits.as_ref(),
            pd_enabled: self.settings.prefix_delegation,
        };
        Ok(f(view, &cache))
    }

    /// Assign `count` addresses to `eni`: /28 prefixes on a prefix-delegated node, falling
    /// back to single addresses (no more than the `room` the ENI has for them) when the
    /// subnet has no free /28. The answer goes into the cache.
    async fn assign(
        &self,
        instance: &str,
        eni: &str,
        count: u64,
        pd: bool,
        room: u64,
    ) -> Result<(), EniError<C::Error>> {
        let ops = &self.instances.inventory;
        let assigned = 'assigned: {
            if pd {
                match ops
                    .assign(eni, Size::Prefixes(count.div_ceil(PD_BLOCK)))
                    .await
                {
                    Ok(assigned) => break 'assigned assigned,
                    Err(e) if e.is_prefix_capacity() => {
                        warn!(%eni, error = %e, "Subnet might be out of prefixes, Cilium will not allocate prefixes on this node anymore");
                        self.notice(instance, &format!("{eni}: {e}"));
                    }
                    Err(e) => {
                        return Err(EniError::ec2(Call::Assign {
                            eni: eni.to_owned(),
                            prefixes: true,
                        })(e));
                    }
                }
            }
            ops.assign(eni, Size::Addresses(count.min(room.max(1))))
                .await
                .map_err(EniError::ec2(Call::Assign {
                    eni: eni.to_owned(),
                    prefixes: false,
                }))?
        };
        if assigned.addresses.is_empty() {
            self.unsynced(instance);
        } else {
            self.instances.add_assigned(instance, eni, &assigned);
        }
        Ok(())
    }
}

/// The status of an instance's ENIs: every ENI (excluded ones too), each ENI's primary
/// address shown as its `ip` only unless `use-primary-address`.
fn status_of(spec: &EniSpec, enis: &BTreeMap<String, Eni>) -> EniStatus {
    let use_primary = spec.use_primary_address == Some(true);
    EniStatus {
        enis: (enis.iter())
            .map(|(id, eni)| {
                let mut shown = eni.clone();
                if !use_primary {
                    shown.addresses.retain(|a| Some(*a) != eni.ip);
                }
                (id.clone(), shown)
            })
            .collect(),
        ..EniStatus::default()
    }
}

impl<C: Ec2Ops> CloudProvider for EniProvider<C> {
    type Error = EniError<C::Error>;
    type NodeSpec = EniSpec;
    type NodeStatus = EniStatus;
    const FIELD: &'static str = "eni";

    async fn resync(&self) -> Result<(), Self::Error> {
        let missing: Vec<String> = std::mem::take(
            &mut *self
                .missing_types
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
        .into_iter()
        .collect();
        let never_read = self.instances.lock().limits.is_empty();
        if never_read {
            self.instances
                .refresh_limits()
                .await
                .map_err(EniError::ec2(Call::Limits))?;
        } else {
            for instance_type in missing {
                // At most one sweep a minute, however many types are missing.
                self.instances
                    .limits(&instance_type)
                    .await
                    .map_err(EniError::ec2(Call::Limits))?;
            }
        }
        self.instances
            .resync()
            .await
            .map_err(EniError::ec2(Call::Resync))
    }

    fn is_transient(error: &Self::Error) -> bool {
        matches!(error, EniError::Ec2 { source, .. } if source.is_transient())
    }

    fn is_refused(error: &Self::Error) -> bool {
        matches!(error, EniError::Ec2 { source, .. } if source.is_unauthorized())
    }

    async fn instance_sync(&self, instance_id: &str) -> Result<(), InstanceSyncError<Self::Error>> {
        (self.unsynced.lock().unwrap_or_else(PoisonError::into_inner)).remove(instance_id);
        let synced = self.instances.instance_sync(instance_id).await;
        synced.map_err(|e| {
            self.unsynced(instance_id);
            InstanceSyncError::Failed(EniError::ec2(Call::InstanceSync(instance_id.to_owned()))(e))
        })
    }

    fn instance_sync_needed(&self, instance_id: &str) -> bool {
        (self.unsynced.lock().unwrap_or_else(PoisonError::into_inner)).contains(instance_id)
    }

    fn has_instance(&self, instance_id: &str) -> bool {
        self.instances.has_instance(instance_id)
    }

    fn delete_instance(&self, instance_id: &str) {
        self.instances.delete_instance(instance_id);
    }

    fn pool_quota(&self) -> BTreeMap<String, u64> {
        self.instances.pool_quota()
    }

    fn max_allocatable(&self, node: NodeRef<'_, EniSpec>) -> u64 {
        let limits = self.limits_of(node.spec);
        let first = node
            .spec
            .first_interface_index
            .and_then(|i| u64::try_from(i).ok())
            .unwrap_or(0);
        let pd = self
            .with_node(node, |view, _| view.prefix_delegation())
            .unwrap_or(false);
        limits::max_allocatable(limits.as_ref(), first, pd).unwrap_or(0)
    }

    fn min_allocatable(&self, node: NodeRef<'_, EniSpec>) -> u64 {
        let first = node
            .spec
            .first_interface_index
            .and_then(|i| u64::try_from(i).ok())
            .unwrap_or(0);
        limits::min_allocatable(self.limits_of(node.spec).as_ref(), first)
    }

    fn limit_reason(&self, node: NodeRef<'_, EniSpec>) -> Option<String> {
        let limits = self.limits_of(node.spec)?;
        let pd = (self.with_node(node, |view, _| view.prefix_delegation())).unwrap_or(false);
        let first = node.spec.first_interface_index.unwrap_or(0).unsigned_abs();
        Some(limits::limit_reason(
            &node.spec.instance_type,
            &limits,
            first,
            pd,
        ))
    }

    fn invalid_spec(&self, node: NodeRef<'_, EniSpec>) -> Option<String> {
        (node.spec.first_interface_index.filter(|i| *i < 0)).map(|i| {
            format!("spec.eni.first-interface-index: {i} is negative (the device index from which ENIs are used, 0 or more)")
        })
    }

    fn resync_interfaces(
        &self,
        node: NodeRef<'_, EniSpec>,
    ) -> Result<(Available, InterfaceStats), Self::Error> {
        Ok(self.with_node(node, |view, _| view.resync())??)
    }

    fn prepare_allocation(
        &self,
        node: NodeRef<'_, EniSpec>,
    ) -> Result<AllocationAction, Self::Error> {
        Ok(self.with_node(node, |view, cache| view.allocation(&cache.network.subnets))??)
    }

    async fn allocate(
        &self,
        node: NodeRef<'_, EniSpec>,
        action: &AllocationAction,
    ) -> Result<(), Self::Error> {
        let (pd, room) = self.with_node(node, |view, _| {
            let pd = view.prefix_delegation();
            (pd, view.address_room(&action.interface_id))
        })?;
        let assigned = self
            .assign(
                node.instance_id,
                &action.interface_id,
                action.available_for_allocation,
                pd,
                room,
            )
            .await;
        self.noted(node.instance_id, assigned)
    }

    async fn create_interface(
        &self,
        node: NodeRef<'_, EniSpec>,
        action: &AllocationAction,
    ) -> Result<u64, Self::Error> {
        let created = self.create_eni(node, action.max_to_allocate, false).await;
        self.noted(node.instance_id, created)
    }

    fn creation_condition(error: &Self::Error) -> &'static str {
        match error {
            EniError::Interfaces(InterfacesError::UnknownLimits { .. }) => {
                "unableToDetermineLimits"
            }
            EniError::NoSubnet(_) | EniError::UnknownSubnets(_) => "unableToFindSubnet",
            EniError::NoSecurityGroups(_) => "unableToGetSecurityGroups",
            EniError::Ec2 {
                call: Call::Create(_),
                ..
            } => "unableToCreateENI",
            EniError::Ec2 {
                call: Call::Mark(_),
                ..
            } => "unableToMarkENIForDeletion",
            _ => "unableToAttachENI",
        }
    }

    fn ipv6_prefix_needed(&self, node: NodeRef<'_, EniSpec>, requested_v6: u64) -> bool {
        requested_v6 > 0
            && self
                .with_node(node, |view, _| {
                    view.enis.values().all(|eni| eni.ipv6_prefixes.is_empty())
                })
                .unwrap_or(false)
    }

    async fn allocate_ipv6_prefix(
        &self,
        node: NodeRef<'_, EniSpec>,
        with_v4: u64,
    ) -> Result<u64, Self::Error> {
        let usable = self.with_node(node, |view, _| {
            (view.enis.values())
                .filter(|eni| !eni.is_excluded_by_spec(node.spec))
                .min_by_key(|eni| eni.number)
                .map(|eni| eni.id.clone())
        })?;
        let Some(eni) = usable else {
            let created = self.create_eni(node, with_v4, true).await;
            return self.noted(node.instance_id, created);
        };
        // The prefix EC2 chose is not in its answer as read: the instance is read again.
        self.unsynced(node.instance_id);
        self.instances
            .inventory
            .assign_ipv6_prefix(&eni)
            .await
            .map_err(EniError::ec2(Call::AssignIpv6(eni.clone())))?;
        Ok(0)
    }

    async fn allocate_static_ip(
        &self,
        node: NodeRef<'_, EniSpec>,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, Self::Error> {
        let primary = self.with_node(node, |view, _| {
            view.enis.values().find(|e| e.number == 0).cloned()
        })?;
        let primary = primary.ok_or(EniError::NoPrimaryEni)?;
        if let Some(public) = primary.public_ip {
            return Ok(public.to_string());
        }
        // The association is not in the cache: the instance is read again.
        self.unsynced(node.instance_id);
        let ops = &self.instances.inventory;
        let free = ops
            .free_elastic_ips(tags)
            .await
            .map_err(EniError::ec2(Call::ElasticIps))?;
        let (allocation, public) = free
            .into_iter()
            .next()
            .ok_or_else(|| EniError::NoElasticIp { tags: tags.clone() })?;
        ops.associate(&allocation, &primary.id)
            .await
            .map_err(EniError::ec2(Call::Associate {
                allocation: allocation.clone(),
                eni: primary.id.clone(),
            }))?;
        Ok(public.to_string())
    }

    fn prepare_release(
        &self,
        node: NodeRef<'_, EniSpec>,
        excess: u64,
        used: &BTreeSet<String>,
    ) -> ReleaseAction {
        self.with_node(node, |view, _| view.release(excess, used).action)
            .unwrap_or_default()
    }

    async fn release(
        &self,
        node: NodeRef<'_, EniSpec>,
        action: &ReleaseAction,
    ) -> Result<(), Self::Error> {
        let released = self.release_addresses(node, action).await;
        self.noted(node.instance_id, released)
    }

    fn releasable_cidrs(&self, node: NodeRef<'_, EniSpec>) -> Option<BTreeSet<Ipv4Net>> {
        self.releasable_of(node)
    }

    async fn release_cidrs(
        &self,
        node: NodeRef<'_, EniSpec>,
        cidrs: &[Ipv4Net],
    ) -> CidrRelease<Self::Error> {
        let outcome = self.release_cidr_list(node, cidrs).await;
        if outcome.error.is_some() {
            self.unsynced(node.instance_id);
        }
        outcome
    }

    fn status(&self, node: NodeRef<'_, EniSpec>) -> EniStatus {
        self.with_node(node, |view, _| status_of(node.spec, view.enis))
            .unwrap_or_default()
    }

    fn take_notices(&self, node: NodeRef<'_, EniSpec>) -> Vec<Notice> {
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        notices.remove(node.instance_id).unwrap_or_default()
    }

    async fn background(&self) {
        gc::run(&self.instances.inventory, &self.settings.gc).await;
    }
}

mod create;
mod error;
mod release;
#[cfg(test)]
mod tests;

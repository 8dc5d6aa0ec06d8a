//! The node manager for cloud allocators (Cilium's `operator/pkg/ipam/nodemanager`): keeps
//! `pre-allocate` addresses free on every node through a cloud API. Azure is the first
//! [`CloudProvider`]; ENI is meant to be the second, so nothing here names Azure.
//!
//! - [`needed`]: the deficit and excess formulas and the per-node settings (pure).
//! - [`view`]: what is read of a CiliumNode (pure).
//! - [`node`]: one node's state between rounds (pure).
//! - [`release`]: the release marks of CIDRs a 1.20+ agent gave back (pure).
//! - [`manager`]: the asynchronous part — per-node pool maintainers, the periodic resync, the
//!   CiliumNode writes.

pub mod manager;
pub mod needed;
pub mod node;
pub mod ratelimit;
pub mod release;
pub mod transport;
pub mod view;

use std::collections::{BTreeMap, BTreeSet};

use ipnet::Ipv4Net;
use serde::{Serialize, de::DeserializeOwned};

/// A Warning Event the provider asks to post on a node's CiliumNode (something done
/// otherwise than asked that the node's owner should know of, e.g. a fallback taken).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The Event's reason.
    pub reason: &'static str,
    /// What happened, and what follows.
    pub message: String,
}

/// A node as the manager hands it to the provider: what every cloud reads, and the provider's
/// own part of the spec (`spec.<FIELD>`).
#[derive(Debug)]
pub struct NodeRef<'a, S> {
    /// The CiliumNode.
    pub name: &'a str,
    /// `spec.instance-id`.
    pub instance_id: &'a str,
    /// The provider's part of the spec, as read by [`CloudProvider::FIELD`].
    pub spec: &'a S,
}

impl<S> Clone for NodeRef<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for NodeRef<'_, S> {}

/// Addresses a node holds in the cloud: address → the resource (NIC ID) it is on.
pub type Available = BTreeMap<String, String>;

/// What a node's interfaces can still take (Cilium's `InterfaceStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterfaceStats {
    /// Addresses the node can hold in all.
    pub node_capacity: u64,
    /// Interfaces that can take another address.
    pub remaining_interfaces: u64,
}

/// Where and how many addresses the next round may add (Cilium's `AllocationAction`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocationAction {
    /// The interface to add to (empty: none can take one).
    pub interface_id: String,
    /// The subnet to take them from (Cilium's pool ID).
    pub pool_id: String,
    /// Addresses the interface and subnet can take now.
    pub available_for_allocation: u64,
    /// Addresses this round may add at most (set by the manager).
    pub max_to_allocate: u64,
    /// Interfaces that can take an address.
    pub interface_candidates: u64,
    /// Interfaces that could still be created (0 on Azure).
    pub empty_interface_slots: u64,
}

/// Addresses to give back in one call (weft's `--azure-release-excess-ips`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseAction {
    /// The interface they are on.
    pub interface_id: String,
    /// Its subnet.
    pub pool_id: String,
    /// The addresses.
    pub ips: Vec<String>,
}

/// What [`CloudProvider::release_cidrs`] did.
#[derive(Debug)]
pub struct CidrRelease<E> {
    /// The CIDRs removed, per subnet.
    pub released: BTreeMap<String, Vec<Ipv4Net>>,
    /// The CIDRs no usable interface holds any more (nothing to do).
    pub gone: Vec<Ipv4Net>,
    /// Why the others were not removed.
    pub error: Option<E>,
}

impl<E> Default for CidrRelease<E> {
    fn default() -> Self {
        Self {
            released: BTreeMap::new(),
            gone: Vec::new(),
            error: None,
        }
    }
}

/// The outcome of a per-instance sync that failed.
#[derive(Debug, thiserror::Error)]
pub enum InstanceSyncError<E: std::error::Error + 'static> {
    /// The cloud answered that the instance does not exist.
    #[error("instance not found")]
    NotFound(#[source] E),
    /// Anything else (the instance may exist).
    #[error(transparent)]
    Failed(E),
}

/// A cloud's view of instances and its operations on one node (Cilium's
/// `AllocationImplementation` and `NodeOperations` in one). Reads come from the provider's
/// cache; the `async` calls go to the cloud.
pub trait CloudProvider: Send + Sync + 'static {
    /// The provider's error (its `Display` is what `operator-status` shows).
    type Error: std::error::Error + Send + Sync + 'static;
    /// The provider's part of a CiliumNode's spec (`spec.azure`, `spec.eni`), read from the
    /// object; unknown fields are the provider's to keep or ignore.
    type NodeSpec: DeserializeOwned + Clone + Default + PartialEq + std::fmt::Debug + Send + Sync;
    /// What the provider publishes as its part of the status (`status.azure`, `status.eni`):
    /// only the fields it owns, so that what the object shows compares equal once written.
    type NodeStatus: Serialize
        + DeserializeOwned
        + Clone
        + Default
        + PartialEq
        + std::fmt::Debug
        + Send
        + Sync;
    /// The field of `spec` and `status` the provider owns (Cilium's layout: `azure`, `eni`).
    const FIELD: &'static str;

    /// Re-read every instance from the cloud.
    fn resync(&self) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Whether a failed call may succeed if tried again (throttling, a cloud or network
    /// failure), as opposed to a refusal that needs a fix.
    fn is_transient(error: &Self::Error) -> bool;
    /// Whether the cloud refused the call for a missing permission: the manager reports it on
    /// every node (`status.ipam.operator-status.error`) and keeps trying, since granting the
    /// permission fixes it without a restart.
    fn is_refused(_error: &Self::Error) -> bool {
        false
    }
    /// Re-read one instance.
    fn instance_sync(
        &self,
        instance_id: &str,
    ) -> impl Future<Output = Result<(), InstanceSyncError<Self::Error>>> + Send;
    /// Whether the instance must be read again after a round that changed it: by default
    /// always (Cilium's instance sync); a provider that put every answer of the round into its
    /// cache says no, and the read is saved.
    fn instance_sync_needed(&self, instance_id: &str) -> bool {
        let _ = instance_id;
        true
    }
    /// Whether the cache holds the instance.
    fn has_instance(&self, instance_id: &str) -> bool;
    /// Forget an instance (its CiliumNode is gone).
    fn delete_instance(&self, instance_id: &str);
    /// Free addresses per subnet.
    fn pool_quota(&self) -> BTreeMap<String, u64>;
    /// Addresses the node may hold at most when `max-allocate` is unset (0: no limit); it
    /// may depend on the node's instance type.
    fn max_allocatable(&self, node: NodeRef<'_, Self::NodeSpec>) -> u64;
    /// What `pre-allocate` is set to when the node leaves it at 0.
    fn min_allocatable(&self, node: NodeRef<'_, Self::NodeSpec>) -> u64;
    /// Why the node holds no more than [`CloudProvider::max_allocatable`] (the instance type's
    /// limits, as the node's `operator-status` says when it wants more); `None`: no more said.
    fn limit_reason(&self, node: NodeRef<'_, Self::NodeSpec>) -> Option<String> {
        let _ = node;
        None
    }
    /// A value of the node's spec that cannot be acted on (the field and the problem); the
    /// node is then left as it is and its `operator-status` says so. By default none.
    fn invalid_spec(&self, node: NodeRef<'_, Self::NodeSpec>) -> Option<String> {
        let _ = node;
        None
    }
    /// The node's addresses and capacity, from the cache.
    ///
    /// # Errors
    /// The instance is not in the cache.
    fn resync_interfaces(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
    ) -> Result<(Available, InterfaceStats), Self::Error>;
    /// Where the next addresses would go.
    ///
    /// # Errors
    /// The instance is not in the cache.
    fn prepare_allocation(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
    ) -> Result<AllocationAction, Self::Error>;
    /// Add `action.available_for_allocation` addresses.
    fn allocate(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
        action: &AllocationAction,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Create and attach a new interface holding up to `action.max_to_allocate` addresses
    /// (Cilium's `CreateInterface`), called when no interface can take an address and
    /// `action.empty_interface_slots` is not 0; returns how many addresses it holds. A cloud
    /// whose interfaces are never created by the operator (Azure: `empty_interface_slots` is
    /// always 0) keeps the default.
    fn create_interface(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
        action: &AllocationAction,
    ) -> impl Future<Output = Result<u64, Self::Error>> + Send {
        let _ = (node, action);
        std::future::ready(Ok(0))
    }
    /// The condition a failed interface creation is counted under (Cilium's metric `status`:
    /// `unableToCreateENI`, `unableToFindSubnet`, ...).
    fn creation_condition(_error: &Self::Error) -> &'static str {
        "failed"
    }
    /// Whether the node, whose agent asks for `requested_v6` IPv6 addresses, lacks the IPv6
    /// prefix its interfaces would hand them out of (by default never: no IPv6 prefixes).
    fn ipv6_prefix_needed(&self, node: NodeRef<'_, Self::NodeSpec>, requested_v6: u64) -> bool {
        let _ = (node, requested_v6);
        false
    }
    /// Give the node its IPv6 prefix: on a usable interface, or on a new one that also holds
    /// up to `with_v4` IPv4 addresses; returns the IPv4 addresses a new interface holds (0: no
    /// interface was created).
    fn allocate_ipv6_prefix(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
        with_v4: u64,
    ) -> impl Future<Output = Result<u64, Self::Error>> + Send {
        let _ = (node, with_v4);
        std::future::ready(Ok(0))
    }
    /// Assign a static public IP chosen by `tags`; returns the address.
    fn allocate_static_ip(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<String, Self::Error>> + Send;
    /// Which of the node's free addresses (never one in `used`) to release, at most `excess`.
    fn prepare_release(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
        excess: u64,
        used: &BTreeSet<String>,
    ) -> ReleaseAction;
    /// Remove the addresses of `action` from their interface.
    fn release(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
        action: &ReleaseAction,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// The IPv4 CIDRs (prefixes and single addresses) on the node's usable interfaces that a
    /// 1.20+ agent may give back by leaving them out of `spec.ipam.pools.allocated`; `None`
    /// when the provider has no such release (the default) or the instance is not cached.
    fn releasable_cidrs(&self, node: NodeRef<'_, Self::NodeSpec>) -> Option<BTreeSet<Ipv4Net>> {
        let _ = node;
        None
    }
    /// Remove `cidrs` (each one of [`Self::releasable_cidrs`]) from their interfaces.
    fn release_cidrs(
        &self,
        node: NodeRef<'_, Self::NodeSpec>,
        cidrs: &[Ipv4Net],
    ) -> impl Future<Output = CidrRelease<Self::Error>> + Send {
        let _ = node;
        std::future::ready(CidrRelease {
            gone: cidrs.to_vec(),
            ..CidrRelease::default()
        })
    }
    /// The provider's part of the node's status (`status.<FIELD>`).
    fn status(&self, node: NodeRef<'_, Self::NodeSpec>) -> Self::NodeStatus;
    /// The Events to post on the node since the last call (taken: a second call returns
    /// none); by default none.
    fn take_notices(&self, node: NodeRef<'_, Self::NodeSpec>) -> Vec<Notice> {
        let _ = node;
        Vec::new()
    }
    /// The provider's own work beside the node rounds while the manager runs (the ENI GC);
    /// by default none.
    fn background(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

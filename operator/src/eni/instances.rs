//! The instances cache (Cilium's AWS `InstancesManager`): the VPCs, subnets, route tables and
//! security groups of the operator's scope, every instance's ENIs as EC2 last showed them, and
//! the instance-type limits. A full resync replaces the network and the instance map
//! wholesale; a per-instance sync replaces one instance (EC2 never says an instance is gone:
//! a gone instance reads as one with no ENI). A resync never brings back an instance deleted
//! while it ran. After a successful change the cache is patched locally (addresses added or
//! removed, a created ENI inserted) so that the next round sees it before the next sync.
//!
//! The cache reads through [`Inventory`], which yields these domain types; the EC2 client's
//! adapter implements it (and tests implement it in memory). Nothing here calls EC2 itself.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    net::IpAddr,
    sync::{Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use ipnet::IpNet;
use tokio::{sync::RwLock, time::Instant};
use weft_k8s::crd::eni::Eni;

use super::{
    limits::Limits,
    vpc::{Network, RouteTable, SecurityGroup, Subnet},
};

/// How often a missing instance type may trigger a new `DescribeInstanceTypes` sweep.
pub const LIMITS_REFRESH: Duration = Duration::from_mins(1);

/// What an `AssignPrivateIpAddresses` answer says the ENI holds from the call: its addresses
/// (a prefix's 16 among them) and its /28 prefixes. Empty when the answer could not be read
/// whole: the instance is then read again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assigned {
    /// The addresses, a prefix's addresses included.
    pub addresses: Vec<IpAddr>,
    /// The /28 prefixes.
    pub prefixes: Vec<IpNet>,
}

/// A VPC: its primary CIDR and its other associated CIDRs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Vpc {
    /// `vpcId`.
    pub id: String,
    /// `cidrBlock`.
    pub primary_cidr: Option<IpNet>,
    /// The other `cidrBlockAssociationSet` blocks.
    pub cidrs: Vec<IpNet>,
}

/// The network of the operator's scope, as one full resync read it.
#[derive(Debug, Clone, Default)]
pub struct NetworkState {
    /// VPCs by ID.
    pub vpcs: BTreeMap<String, Vpc>,
    /// Subnets by ID.
    pub subnets: BTreeMap<String, Subnet>,
    /// Route tables.
    pub route_tables: Vec<RouteTable>,
    /// Security groups by ID.
    pub security_groups: BTreeMap<String, SecurityGroup>,
}

impl NetworkState {
    /// The borrowed view the choices of [`super::vpc`] take.
    #[must_use]
    pub fn view(&self) -> Network<'_> {
        Network {
            subnets: &self.subnets,
            route_tables: &self.route_tables,
            security_groups: &self.security_groups,
        }
    }
}

/// An ENI attached to an instance (`attachment.instanceId`): its addresses as EC2 lists them
/// (the primary among them), its subnet's CIDR and its VPC's CIDRs filled from the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedEni {
    /// The instance it is attached to.
    pub instance: String,
    /// The ENI.
    pub eni: Eni,
}

/// Where the cache reads from: EC2, through the client's adapter.
pub trait Inventory: Send + Sync + 'static {
    /// Why a read failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The VPCs, subnets, route tables and security groups in scope.
    fn network(&self) -> impl Future<Output = Result<NetworkState, Self::Error>> + Send;
    /// Every ENI in scope attached to an instance.
    fn enis(
        &self,
        network: &NetworkState,
    ) -> impl Future<Output = Result<Vec<AttachedEni>, Self::Error>> + Send;
    /// The ENIs attached to `instance` (empty: none, or the instance is gone).
    fn instance_enis(
        &self,
        instance: &str,
        network: &NetworkState,
    ) -> impl Future<Output = Result<Vec<Eni>, Self::Error>> + Send;
    /// The limits of every instance type.
    fn instance_types(
        &self,
    ) -> impl Future<Output = Result<BTreeMap<String, Limits>, Self::Error>> + Send;
}

/// One instance's ENIs by ID.
pub type Instance = BTreeMap<String, Eni>;

/// What the cache holds.
#[derive(Debug, Default)]
pub struct Cache {
    /// The network of the last full resync.
    pub network: NetworkState,
    /// Instances by ID.
    pub instances: BTreeMap<String, Instance>,
    /// Instance-type limits by type name.
    pub limits: BTreeMap<String, Limits>,
    /// When the limits were last read.
    limits_read: Option<Instant>,
    /// Instances deleted while a full resync runs (not to be brought back by it).
    deleted_during_resync: Option<BTreeSet<String>>,
}

/// The cache and the inventory it is filled from.
#[derive(Debug)]
pub struct Instances<I> {
    /// Where the cache reads from.
    pub inventory: I,
    /// Full resyncs take it for writing, instance syncs for reading.
    resync_lock: RwLock<()>,
    cache: Mutex<Cache>,
}

impl<I: Inventory> Instances<I> {
    /// An empty cache over `inventory`.
    pub fn new(inventory: I) -> Self {
        Self {
            inventory,
            resync_lock: RwLock::new(()),
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The cache.
    pub fn lock(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Read the instance-type limits (at start, and when a type is missing, at most once per
    /// [`LIMITS_REFRESH`]).
    ///
    /// # Errors
    /// The sweep failed; the limits read before stay.
    pub async fn refresh_limits(&self) -> Result<(), I::Error> {
        let limits = self.inventory.instance_types().await?;
        let mut cache = self.lock();
        cache.limits = limits;
        cache.limits_read = Some(Instant::now());
        Ok(())
    }

    /// The limits of `instance_type`, reading them again first when the type is unknown and
    /// the last sweep is older than [`LIMITS_REFRESH`] (`None`: still unknown).
    ///
    /// # Errors
    /// The sweep failed.
    pub async fn limits(&self, instance_type: &str) -> Result<Option<Limits>, I::Error> {
        let stale = {
            let cache = self.lock();
            if let Some(limits) = cache.limits.get(instance_type) {
                return Ok(Some(limits.clone()));
            }
            cache
                .limits_read
                .is_none_or(|at| at.elapsed() >= LIMITS_REFRESH)
        };
        if stale {
            self.refresh_limits().await?;
        }
        Ok(self.lock().limits.get(instance_type).cloned())
    }

    /// Re-read the network and every instance (Cilium's `Resync`).
    ///
    /// # Errors
    /// A listing failed; the cache is left as it was.
    pub async fn resync(&self) -> Result<(), I::Error> {
        let _exclusive = self.resync_lock.write().await;
        self.lock().deleted_during_resync = Some(BTreeSet::new());
        let read = async {
            let network = self.inventory.network().await?;
            let enis = self.inventory.enis(&network).await?;
            Ok::<_, I::Error>((network, enis))
        };
        let (network, enis) = match read.await {
            Ok(read) => read,
            Err(error) => {
                self.lock().deleted_during_resync = None;
                return Err(error);
            }
        };
        let mut instances: BTreeMap<String, Instance> = BTreeMap::new();
        for AttachedEni { instance, eni } in enis {
            instances
                .entry(instance)
                .or_default()
                .insert(eni.id.clone(), eni);
        }
        let mut cache = self.lock();
        for gone in cache.deleted_during_resync.take().unwrap_or_default() {
            instances.remove(&gone);
        }
        cache.instances = instances;
        cache.network = network;
        Ok(())
    }

    /// Re-read one instance (Cilium's `InstanceSync`); an instance EC2 lists no ENI for is
    /// kept with none.
    ///
    /// # Errors
    /// The listing failed; the instance is left as it was.
    pub async fn instance_sync(&self, instance: &str) -> Result<(), I::Error> {
        let _shared = self.resync_lock.read().await;
        let network = self.lock().network.clone();
        let enis = self.inventory.instance_enis(instance, &network).await?;
        let fresh: Instance = enis.into_iter().map(|e| (e.id.clone(), e)).collect();
        self.lock().instances.insert(instance.to_owned(), fresh);
        Ok(())
    }

    /// Whether the cache holds the instance.
    pub fn has_instance(&self, instance: &str) -> bool {
        self.lock().instances.contains_key(instance)
    }

    /// Forget an instance (also for a full resync running now).
    pub fn delete_instance(&self, instance: &str) {
        let mut cache = self.lock();
        cache.instances.remove(instance);
        if let Some(deleted) = cache.deleted_during_resync.as_mut() {
            deleted.insert(instance.to_owned());
        }
    }

    /// Free addresses per subnet.
    pub fn pool_quota(&self) -> BTreeMap<String, u64> {
        (self.lock().network.subnets.values())
            .map(|s| (s.id.clone(), s.available))
            .collect()
    }

    /// After addresses or prefixes were assigned to `eni` of `instance`: list them, and take
    /// the new ones from its subnet's free count.
    pub fn add_assigned(&self, instance: &str, eni: &str, assigned: &Assigned) {
        let mut cache = self.lock();
        let Cache {
            instances, network, ..
        } = &mut *cache;
        let Some(found) = instances.get_mut(instance).and_then(|i| i.get_mut(eni)) else {
            return;
        };
        let before = found.addresses.len();
        for address in &assigned.addresses {
            if !found.addresses.contains(address) {
                found.addresses.push(*address);
            }
        }
        for prefix in &assigned.prefixes {
            if !found.prefixes.contains(prefix) {
                found.prefixes.push(*prefix);
            }
        }
        let taken = u64::try_from(found.addresses.len() - before).unwrap_or(u64::MAX);
        if let Some(subnet) = (found.subnet.as_ref()).and_then(|s| network.subnets.get_mut(&s.id)) {
            subnet.available = subnet.available.saturating_sub(taken);
        }
    }

    /// After addresses or prefixes were unassigned from `eni` of `instance`: each of `cidrs`
    /// (a prefix, or a single address as a host CIDR) leaves the ENI with its addresses, and
    /// its subnet has them free again.
    pub fn remove(&self, instance: &str, eni: &str, cidrs: &[IpNet]) {
        let mut cache = self.lock();
        let Cache {
            instances, network, ..
        } = &mut *cache;
        let Some(found) = instances.get_mut(instance).and_then(|i| i.get_mut(eni)) else {
            return;
        };
        let before = found.addresses.len();
        found.prefixes.retain(|p| !cidrs.contains(p));
        found
            .addresses
            .retain(|a| !cidrs.iter().any(|c| c.contains(a)));
        let freed = u64::try_from(before - found.addresses.len()).unwrap_or(0);
        if let Some(subnet) = (found.subnet.as_ref()).and_then(|s| network.subnets.get_mut(&s.id)) {
            subnet.available = subnet.available.saturating_add(freed);
        }
    }

    /// After an ENI was created and attached to `instance`: list it.
    pub fn insert_eni(&self, instance: &str, eni: Eni) {
        let mut cache = self.lock();
        // The cache lists an ENI's primary address among its addresses, as EC2 does.
        let taken = u64::try_from(eni.addresses.len()).unwrap_or(u64::MAX);
        if let Some(subnet) =
            (eni.subnet.as_ref()).and_then(|s| cache.network.subnets.get_mut(&s.id))
        {
            subnet.available = subnet.available.saturating_sub(taken);
        }
        cache
            .instances
            .entry(instance.to_owned())
            .or_default()
            .insert(eni.id.clone(), eni);
    }
}

#[cfg(test)]
mod tests;

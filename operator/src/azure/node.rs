//! Azure's answers to the cloud node manager (Cilium's Azure `Node` operations and
//! `InstancesManager` methods): a node's addresses and capacity from the cache, where the
//! next addresses go (the first NIC that can take one, its own subnet only), the ARM calls
//! that add, release or assign a static IP, and `status.azure.interfaces`. Errors say what a
//! user does about them: the action and scope a role lacks, the resource group to set.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use serde::{Deserialize, Serialize};
use tracing::{debug, warn};
use weft_k8s::crd::azure::{AzureInterface, AzureSpec, INTERFACE_ADDRESS_LIMIT, STATE_SUCCEEDED};

use super::{
    api::{ArmError, AzureApi},
    instances::Instances,
    parse::{ParseError, SubnetMap},
    resource_id,
};
use crate::cloud::{
    AllocationAction, Available, CloudProvider, InstanceSyncError, InterfaceStats, NodeRef,
    ReleaseAction,
};

/// Cilium's `GetMinimumAllocatableIPv4` on Azure: `pre-allocate` written back when 0.
const MIN_ALLOCATABLE: u64 = 8;

/// What the operator publishes as `status.azure`: the node's interfaces, and nothing else of
/// that object (other fields are left as they are).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedStatus {
    /// `status.azure.interfaces` ([`status_interfaces`]).
    #[serde(default)]
    pub interfaces: Vec<AzureInterface>,
}

/// Why an Azure operation on a node failed.
#[derive(Debug, thiserror::Error)]
pub enum AzureError {
    /// The instance is not in the cache.
    #[error("instance does not exist: {instance:?}")]
    NotInCache {
        /// The instance ID.
        instance: String,
    },
    /// The instance's ID names another resource group than the one the operator reads.
    #[error(
        "instance {instance} is in resource group {theirs:?}, but the operator reads resource \
         group {ours:?}: --azure-resource-group must be the resource group of the nodes' VMs or \
         scale sets (on AKS the node resource group, MC_<group>_<cluster>_<region>), not the \
         operator's or the AKS cluster's"
    )]
    OtherResourceGroup {
        /// The instance ID.
        instance: String,
        /// Its resource group.
        theirs: String,
        /// `--azure-resource-group`.
        ours: String,
    },
    /// ARM does not know the instance in the operator's resource group.
    #[error(
        "instance {instance} was not found in resource group {resource_group:?}: \
         --azure-resource-group must be the resource group of the nodes' VMs or scale sets \
         (on AKS the node resource group, MC_<group>_<cluster>_<region>), not the operator's \
         or the AKS cluster's"
    )]
    NotInResourceGroup {
        /// The instance ID.
        instance: String,
        /// `--azure-resource-group`.
        resource_group: String,
        /// ARM's answer.
        #[source]
        source: Box<ArmError>,
    },
    /// The resource group the operator reads does not exist.
    #[error(
        "resource group {resource_group:?} does not exist in the subscription: \
         --azure-resource-group must be the resource group of the nodes' VMs or scale sets \
         (on AKS the node resource group, MC_<group>_<cluster>_<region>)"
    )]
    NoResourceGroup {
        /// `--azure-resource-group`.
        resource_group: String,
        /// ARM's answer.
        #[source]
        source: Box<ArmError>,
    },
    /// The identity lacks a permission.
    #[error(
        "Azure refused action {action} on scope {scope}: grant it to the operator's identity \
         ({role}; deploy/azure/ holds custom roles with exactly the actions weft needs)"
    )]
    Authorization {
        /// The refused action.
        action: String,
        /// The scope.
        scope: String,
        /// A built-in role that grants it.
        role: &'static str,
        /// ARM's answer.
        #[source]
        source: Box<ArmError>,
    },
    /// A NIC of the instance could not be read at the last sync: nothing is changed on it.
    #[error(
        "a network interface of instance {instance} is unusable; not allocating on it until Azure answers with a usable one"
    )]
    Unreadable {
        /// The instance ID.
        instance: String,
        /// What was wrong with the NIC.
        #[source]
        source: ParseError,
    },
    /// An address to release is not an IP.
    #[error("{address:?} is not an IP address")]
    BadAddress {
        /// The address.
        address: String,
    },
    /// Any other ARM failure.
    #[error(transparent)]
    Api(Box<ArmError>),
}

/// The built-in role that grants `action`.
fn role_for(action: &str) -> &'static str {
    let lower = action.to_ascii_lowercase();
    if lower.starts_with("microsoft.compute/") {
        "the built-in role Virtual Machine Contributor grants it"
    } else {
        "the built-in role Network Contributor grants it"
    }
}

impl From<ArmError> for AzureError {
    fn from(source: ArmError) -> Self {
        match source.authorization_failed() {
            Some(failure) => Self::Authorization {
                role: role_for(&failure.action),
                action: failure.action,
                scope: failure.scope,
                source: Box::new(source),
            },
            None => Self::Api(Box::new(source)),
        }
    }
}

/// Cilium's `isAvailableInterface`: the free slots of `iface` if allocation may use it.
fn free_slots(required_name: &str, iface: &AzureInterface, use_primary: bool) -> u64 {
    if !required_name.is_empty() && required_name != iface.name {
        return 0;
    }
    let mut limit = INTERFACE_ADDRESS_LIMIT as u64;
    if !use_primary && iface.ip.is_some() {
        limit -= 1;
    }
    limit.saturating_sub(iface.addresses.len() as u64)
}

/// The node's addresses and capacity (Cilium's `ResyncInterfacesAndIPs`): every succeeded
/// address on any NIC; capacity 256 less one per NIC whose primary is not handed out. A NIC
/// counts as remaining only while its own subnet has a free address too (Cilium ignores the
/// subnet, so a node on an exhausted subnet is never "at capacity" there).
#[must_use]
pub fn interfaces_and_ips(
    nics: &BTreeMap<String, AzureInterface>,
    subnets: &SubnetMap,
    required_name: &str,
    use_primary: bool,
) -> (Available, InterfaceStats) {
    let mut available = Available::new();
    let mut capacity = INTERFACE_ADDRESS_LIMIT as u64;
    let mut remaining = 0;
    for nic in nics.values() {
        for address in &nic.addresses {
            if address.state == STATE_SUCCEEDED {
                available.insert(address.ip.clone(), nic.id.clone());
            } else if matches!(address.state.as_str(), "updating" | "creating") {
                // Still being added (its PUT's operation runs): not worth a warning on every
                // pass over the nodes.
                debug!(interface = %nic.id, ip = %address.ip, state = %address.state,
                    "Ignoring potentially available IP due to non-successful state");
            } else {
                warn!(interface = %nic.id, ip = %address.ip, state = %address.state,
                    "Ignoring potentially available IP due to non-successful state");
            }
        }
        if !use_primary && nic.ip.is_some() {
            capacity = capacity.saturating_sub(1);
        }
        let subnet_free = nic
            .subnet
            .as_ref()
            .and_then(|s| subnets.get(&s.id))
            .is_some_and(|s| s.available_addresses > 0);
        if subnet_free && free_slots(required_name, nic, use_primary) > 0 {
            remaining += 1;
        }
    }
    (
        available,
        InterfaceStats {
            node_capacity: capacity,
            remaining_interfaces: remaining,
        },
    )
}

/// `status.azure.interfaces`: NICs sorted by ID, each one's addresses by IP.
#[must_use]
pub fn status_interfaces(nics: &BTreeMap<String, AzureInterface>) -> Vec<AzureInterface> {
    let mut out: Vec<AzureInterface> = nics.values().cloned().collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    for nic in &mut out {
        nic.addresses
            .sort_by_key(|a| (a.addr().is_none(), a.addr(), a.ip.clone()));
    }
    out
}

impl<A: AzureApi + 'static> Instances<A> {
    /// The name of the node's NIC `interface_id`, from the cache.
    fn nic_name(
        &self,
        node: NodeRef<'_, AzureSpec>,
        interface_id: &str,
    ) -> Result<String, AzureError> {
        self.instance(node)?
            .get(interface_id)
            .map(|nic| nic.name.clone())
            .ok_or_else(|| AzureError::NotInCache {
                instance: node.instance_id.to_owned(),
            })
    }

    fn instance(
        &self,
        node: NodeRef<'_, AzureSpec>,
    ) -> Result<BTreeMap<String, AzureInterface>, AzureError> {
        if let Some(nics) = self.lock().instances.get(node.instance_id) {
            return Ok(nics.clone());
        }
        let theirs = resource_id::parse(node.instance_id)
            .ok()
            .map(|id| id.resource_group)
            .unwrap_or_default();
        if !theirs.is_empty() && !theirs.eq_ignore_ascii_case(&self.resource_group) {
            return Err(AzureError::OtherResourceGroup {
                instance: node.instance_id.to_owned(),
                theirs,
                ours: self.resource_group.clone(),
            });
        }
        Err(AzureError::NotInCache {
            instance: node.instance_id.to_owned(),
        })
    }
}

impl AzureError {
    /// Whether trying again later may succeed (throttling, ARM or the network failing).
    #[must_use]
    pub fn is_transient(&self) -> bool {
        let Self::Api(e) = self else {
            return false;
        };
        match e.as_ref() {
            ArmError::Transport { .. } => true,
            e => matches!(e.status(), Some(408 | 429 | 500..=599)),
        }
    }
}

impl<A: AzureApi + 'static> CloudProvider for Instances<A> {
    type Error = AzureError;
    type NodeSpec = AzureSpec;
    type NodeStatus = PublishedStatus;
    const FIELD: &'static str = "azure";

    async fn resync(&self) -> Result<(), AzureError> {
        Instances::resync(self).await.map_err(|e| {
            if e.code() == Some("ResourceGroupNotFound") {
                AzureError::NoResourceGroup {
                    resource_group: self.resource_group.clone(),
                    source: Box::new(e),
                }
            } else {
                e.into()
            }
        })
    }

    fn is_transient(error: &AzureError) -> bool {
        error.is_transient()
    }

    fn is_refused(error: &AzureError) -> bool {
        match error {
            AzureError::Authorization { .. } => true,
            AzureError::Api(e) => matches!(e.status(), Some(401 | 403)),
            _ => false,
        }
    }

    async fn instance_sync(&self, instance_id: &str) -> Result<(), InstanceSyncError<AzureError>> {
        match Instances::instance_sync(self, instance_id).await {
            Ok(()) => Ok(()),
            Err(source) if source.is_not_found() => Err(InstanceSyncError::NotFound(
                AzureError::NotInResourceGroup {
                    instance: instance_id.to_owned(),
                    resource_group: self.resource_group.clone(),
                    source: Box::new(source),
                },
            )),
            Err(e) => Err(InstanceSyncError::Failed(e.into())),
        }
    }

    fn has_instance(&self, instance_id: &str) -> bool {
        Instances::has_instance(self, instance_id)
    }

    fn delete_instance(&self, instance_id: &str) {
        Instances::delete_instance(self, instance_id);
    }

    fn pool_quota(&self) -> BTreeMap<String, u64> {
        self.lock()
            .subnets
            .values()
            .map(|s| (s.id.clone(), s.available_addresses))
            .collect()
    }

    fn max_allocatable(&self, _: NodeRef<'_, AzureSpec>) -> u64 {
        INTERFACE_ADDRESS_LIMIT as u64
    }

    fn min_allocatable(&self, _: NodeRef<'_, AzureSpec>) -> u64 {
        MIN_ALLOCATABLE
    }

    fn resync_interfaces(
        &self,
        node: NodeRef<'_, AzureSpec>,
    ) -> Result<(Available, InterfaceStats), AzureError> {
        let nics = self.instance(node)?;
        let subnets = self.lock().subnets.clone();
        Ok(interfaces_and_ips(
            &nics,
            &subnets,
            &node.spec.interface_name,
            self.use_primary,
        ))
    }

    fn prepare_allocation(
        &self,
        node: NodeRef<'_, AzureSpec>,
    ) -> Result<AllocationAction, AzureError> {
        let nics = self.instance(node)?;
        let cache = self.lock();
        if let Some(source) = cache.errors.get(node.instance_id) {
            return Err(AzureError::Unreadable {
                instance: node.instance_id.to_owned(),
                source: source.clone(),
            });
        }
        let mut action = AllocationAction::default();
        for nic in nics.values() {
            let free = free_slots(&node.spec.interface_name, nic, self.use_primary);
            if free == 0 {
                continue;
            }
            action.interface_candidates += 1;
            if !action.interface_id.is_empty() {
                continue;
            }
            // New ipConfigurations go on the NIC's own subnet only: a VMSS NIC refuses
            // others, and a VM's would not be routable the way the agent wires it.
            let Some(subnet) = nic.subnet.as_ref().and_then(|s| cache.subnets.get(&s.id)) else {
                continue;
            };
            action.interface_id.clone_from(&nic.id);
            action.pool_id.clone_from(&subnet.id);
            action.available_for_allocation = subnet.available_addresses.min(free);
        }
        Ok(action)
    }

    async fn allocate(
        &self,
        node: NodeRef<'_, AzureSpec>,
        action: &AllocationAction,
    ) -> Result<(), AzureError> {
        let name = self.nic_name(node, &action.interface_id)?;
        let parts = resource_id::nic_parts(&action.interface_id);
        let count = usize::try_from(action.available_for_allocation).unwrap_or(usize::MAX);
        match (parts.vmss, parts.vm_id) {
            (Some(vmss), Some(vm_id)) => {
                self.api
                    .assign_private_ips_vmss(&vm_id, &vmss, &action.pool_id, &name, count)
                    .await?;
            }
            _ => {
                self.api
                    .assign_private_ips_vm(&action.pool_id, &name, count)
                    .await?;
            }
        }
        Ok(())
    }

    async fn allocate_static_ip(
        &self,
        node: NodeRef<'_, AzureSpec>,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, AzureError> {
        let vmss = self
            .instance(node)?
            .keys()
            .find_map(|id| resource_id::nic_parts(id).vmss);
        Ok(match vmss {
            Some(vmss) => {
                self.api
                    .assign_public_ip_vmss(node.instance_id, &vmss, tags)
                    .await?
            }
            None => self.api.assign_public_ip_vm(node.instance_id, tags).await?,
        })
    }

    fn prepare_release(
        &self,
        node: NodeRef<'_, AzureSpec>,
        excess: u64,
        used: &BTreeSet<String>,
    ) -> ReleaseAction {
        let Ok(nics) = self.instance(node) else {
            return ReleaseAction::default();
        };
        // From the NIC with the most free addresses, as Cilium's ENI release does.
        let free = |nic: &AzureInterface| -> Vec<String> {
            nic.addresses
                .iter()
                .filter(|a| a.state == STATE_SUCCEEDED && !used.contains(&a.ip))
                .filter(|a| a.addr() != nic.ip)
                .map(|a| a.ip.clone())
                .collect()
        };
        let Some(nic) = nics.values().max_by_key(|nic| free(nic).len()) else {
            return ReleaseAction::default();
        };
        let mut ips = free(nic);
        ips.sort();
        ips.truncate(usize::try_from(excess).unwrap_or(usize::MAX));
        ReleaseAction {
            interface_id: nic.id.clone(),
            pool_id: nic
                .subnet
                .as_ref()
                .map(|s| s.id.clone())
                .unwrap_or_default(),
            ips,
        }
    }

    async fn release(
        &self,
        node: NodeRef<'_, AzureSpec>,
        action: &ReleaseAction,
    ) -> Result<(), AzureError> {
        let name = self.nic_name(node, &action.interface_id)?;
        let ips = action
            .ips
            .iter()
            .map(|ip| {
                ip.parse::<IpAddr>().map_err(|_| AzureError::BadAddress {
                    address: ip.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let parts = resource_id::nic_parts(&action.interface_id);
        match (parts.vmss, parts.vm_id) {
            (Some(vmss), Some(vm_id)) => {
                self.api
                    .release_private_ips_vmss(&vm_id, &vmss, &name, &ips)
                    .await?;
            }
            _ => self.api.release_private_ips_vm(&name, &ips).await?,
        }
        Ok(())
    }

    fn status(&self, node: NodeRef<'_, AzureSpec>) -> PublishedStatus {
        let interfaces = self
            .lock()
            .instances
            .get(node.instance_id)
            .map(status_interfaces)
            .unwrap_or_default();
        PublishedStatus { interfaces }
    }
}

#[cfg(test)]
mod tests;

//! The instances cache (Cilium's Azure `InstancesManager`): every instance's NICs as ARM
//! last showed them, and the subnets those NICs use. A full resync replaces it (one NIC
//! listing, then only the subnets in use); a per-instance sync replaces one instance and
//! merges its subnets in. A resync never brings back an instance deleted while it ran, and a
//! NIC ARM answered with garbage keeps its last good state (its node is not shrunk by a bad
//! answer) while the error is kept for that node's status.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Mutex, MutexGuard, PoisonError},
};

use tokio::sync::RwLock;
use tracing::warn;
use weft_k8s::crd::azure::AzureInterface;

use super::{
    api::{ArmError, AzureApi},
    model,
    parse::{ParseError, SubnetMap, parse_interface},
    resource_id,
};

/// One instance's NICs by ARM ID.
pub type Instance = BTreeMap<String, AzureInterface>;

/// What the cache holds.
#[derive(Debug, Default)]
pub struct Cache {
    /// Instances by lowercased ID.
    pub instances: BTreeMap<String, Instance>,
    /// Subnets by ARM ID.
    pub subnets: SubnetMap,
    /// Why a NIC of an instance could not be read at the last sync (by instance).
    pub errors: BTreeMap<String, ParseError>,
    /// Instances deleted while a full resync runs (not to be brought back by it).
    deleted_during_resync: Option<BTreeSet<String>>,
}

/// The cache and the API it is filled from.
#[derive(Debug)]
pub struct Instances<A> {
    /// The ARM client.
    pub api: A,
    /// `--azure-use-primary-address`.
    pub use_primary: bool,
    /// The resource group the operator reads (`--azure-resource-group`), for error texts.
    pub resource_group: String,
    /// Full resyncs take it for writing, instance syncs for reading.
    resync_lock: RwLock<()>,
    cache: Mutex<Cache>,
}

/// NICs parsed into instances; unusable NICs logged and counted per instance.
struct Parsed {
    instances: BTreeMap<String, Instance>,
    errors: BTreeMap<String, ParseError>,
}

fn parse_all(nics: &[model::NetworkInterface], subnets: &SubnetMap, use_primary: bool) -> Parsed {
    let mut parsed = Parsed {
        instances: BTreeMap::new(),
        errors: BTreeMap::new(),
    };
    for nic in nics {
        match parse_interface(nic, subnets, use_primary) {
            Ok(Some(p)) => {
                for warning in &p.warnings {
                    warn!(instance = %p.instance_id, "{warning}");
                }
                parsed
                    .instances
                    .entry(p.instance_id)
                    .or_default()
                    .insert(p.interface.id.clone(), p.interface);
            }
            Ok(None) => {}
            Err(error) => {
                let instance = nic
                    .properties
                    .as_ref()
                    .and_then(|p| p.virtual_machine.as_ref())
                    .and_then(|vm| vm.id.as_ref())
                    .map(|id| id.to_lowercase());
                warn!(%error, instance = instance.as_deref().unwrap_or("?"), "Azure answered with a network interface that cannot be used; its instance keeps its last known interfaces");
                if let Some(instance) = instance {
                    parsed.errors.insert(instance, error);
                }
            }
        }
    }
    parsed
}

fn subnet_ids(instances: &BTreeMap<String, Instance>) -> BTreeSet<String> {
    instances
        .values()
        .flat_map(BTreeMap::values)
        .filter_map(|i| i.subnet.as_ref().map(|s| s.id.clone()))
        .filter(|id| !id.is_empty())
        .collect()
}

impl<A: AzureApi> Instances<A> {
    /// An empty cache over `api`, which reads `resource_group`.
    pub fn new(api: A, use_primary: bool, resource_group: &str) -> Self {
        Self {
            api,
            use_primary,
            resource_group: resource_group.to_owned(),
            resync_lock: RwLock::new(()),
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The cache.
    pub fn lock(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// NICs → instances with the subnets they use (two passes, as Cilium: the first finds the
    /// subnets, the second fills CIDRs and gateways).
    async fn read(&self, nics: &[model::NetworkInterface]) -> (Parsed, SubnetMap) {
        let first = parse_all(nics, &SubnetMap::new(), self.use_primary);
        let ids = subnet_ids(&first.instances);
        let subnets = if ids.is_empty() {
            SubnetMap::new()
        } else {
            self.api.get_subnets(&ids).await
        };
        if subnets.is_empty() {
            return (first, subnets);
        }
        (parse_all(nics, &subnets, self.use_primary), subnets)
    }

    /// Re-read every instance (Cilium's `Resync`).
    ///
    /// # Errors
    /// The NIC listing failed; the cache is left as it was.
    pub async fn resync(&self) -> Result<(), ArmError> {
        let _exclusive = self.resync_lock.write().await;
        self.lock().deleted_during_resync = Some(BTreeSet::new());
        let nics = match self.api.list_all_network_interfaces().await {
            Ok(nics) => nics,
            Err(error) => {
                self.lock().deleted_during_resync = None;
                return Err(error);
            }
        };
        let (mut parsed, subnets) = self.read(&nics).await;
        let mut cache = self.lock();
        let deleted = cache.deleted_during_resync.take().unwrap_or_default();
        for gone in &deleted {
            parsed.instances.remove(gone);
        }
        // An instance whose NIC could not be read keeps that NIC's last good state.
        for instance in parsed.errors.keys() {
            if let Some(old) = cache.instances.get(instance) {
                let fresh = parsed.instances.entry(instance.clone()).or_default();
                for (id, nic) in old {
                    fresh.entry(id.clone()).or_insert_with(|| nic.clone());
                }
            }
        }
        cache.instances = parsed.instances;
        cache.errors = parsed.errors;
        cache.subnets = subnets;
        Ok(())
    }

    /// Re-read one instance (Cilium's `InstanceSync`): a VMSS instance by listing its NICs;
    /// a standalone VM (which Cilium leaves to the next full resync) by reading again each
    /// NIC the cache knows of it.
    ///
    /// # Errors
    /// A read failed ([`ArmError::is_not_found`]: the instance or a NIC is gone); a VM the
    /// cache does not know yet ([`ArmError::NotVmssInstance`]: the full resync finds it).
    pub async fn instance_sync(&self, instance_id: &str) -> Result<(), ArmError> {
        let _shared = self.resync_lock.read().await;
        let nics = if resource_id::vmss_instance(instance_id).is_some() {
            self.api.list_vm_network_interfaces(instance_id).await?
        } else {
            let names: Vec<String> = self
                .lock()
                .instances
                .get(instance_id)
                .into_iter()
                .flat_map(BTreeMap::values)
                .map(|nic| nic.name.clone())
                .collect();
            if names.is_empty() {
                return Err(ArmError::NotVmssInstance {
                    instance_id: instance_id.to_owned(),
                });
            }
            let mut nics = Vec::with_capacity(names.len());
            for name in names {
                nics.push(self.api.get_network_interface(&name).await?);
            }
            nics
        };
        let (mut parsed, subnets) = self.read(&nics).await;
        let mut cache = self.lock();
        let fresh = parsed.instances.remove(instance_id).unwrap_or_default();
        if let Some(error) = parsed.errors.remove(instance_id) {
            let old = cache
                .instances
                .get(instance_id)
                .cloned()
                .unwrap_or_default();
            let mut merged = fresh;
            for (id, nic) in old {
                merged.entry(id).or_insert(nic);
            }
            cache.instances.insert(instance_id.to_owned(), merged);
            cache.errors.insert(instance_id.to_owned(), error);
        } else {
            cache.instances.insert(instance_id.to_owned(), fresh);
            cache.errors.remove(instance_id);
        }
        cache.subnets.extend(subnets);
        Ok(())
    }

    /// Whether the cache holds the instance.
    pub fn has_instance(&self, instance_id: &str) -> bool {
        self.lock().instances.contains_key(instance_id)
    }

    /// Forget an instance (also for a full resync running now).
    pub fn delete_instance(&self, instance_id: &str) {
        let mut cache = self.lock();
        cache.instances.remove(instance_id);
        cache.errors.remove(instance_id);
        if let Some(deleted) = cache.deleted_during_resync.as_mut() {
            deleted.insert(instance_id.to_owned());
        }
    }
}

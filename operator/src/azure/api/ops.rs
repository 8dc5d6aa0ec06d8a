//! The listing, subnet and private-address operations (§3.2–3.5): full-resync and
//! per-instance NIC lists, `Subnets.Get` per ID, adding `Cilium-xxxxxxxx` ipConfigurations to
//! a NIC (standalone VM) or a VMSS instance, and removing exactly those holding given
//! addresses (weft's release, beyond Cilium). Public IPs are in `publicip`.

use std::{
    collections::{BTreeSet, HashSet},
    net::IpAddr,
};

use tracing::{debug, instrument, warn};

use super::{
    ArmClient, ArmError,
    request::{Op, encode, seg},
};
use crate::azure::{
    model::{
        InterfaceIpConfiguration, InterfaceIpConfigurationProperties, NetworkInterface,
        SubResource, Subnet as ModelSubnet, VirtualMachineScaleSet, VmssIpConfiguration,
        VmssIpConfigurationProperties, VmssVm,
    },
    parse::{SubnetMap, subnet_from_model},
    resource_id::{self, is_subnet_id, vmss_instance},
};

pub(super) const VMSS_LIST: Op = Op {
    name: "VirtualMachineScaleSets.List",
    api_version: "2026-03-01",
};
pub(super) const VMSS_NICS: Op = Op {
    name: "Interfaces.ListVirtualMachineScaleSetNetworkInterfaces",
    api_version: "2018-10-01",
};
pub(super) const NIC_LIST: Op = Op {
    name: "Interfaces.List",
    api_version: "2025-07-01",
};
pub(super) const VMSS_VM_NICS: Op = Op {
    name: "Interfaces.ListVirtualMachineScaleSetVMNetworkInterfaces",
    api_version: "2018-10-01",
};
pub(super) const SUBNET_GET: Op = Op {
    name: "Subnets.Get",
    api_version: "2025-07-01",
};
pub(super) const NIC_GET: Op = Op {
    name: "Interfaces.Get",
    api_version: "2025-07-01",
};
pub(super) const NIC_PUT: Op = Op {
    name: "Interfaces.CreateOrUpdate",
    api_version: "2025-07-01",
};
pub(super) const VMSS_VM_GET: Op = Op {
    name: "VirtualMachineScaleSetVMs.Get",
    api_version: "2026-03-01",
};
pub(super) const VMSS_VM_PUT: Op = Op {
    name: "VirtualMachineScaleSetVMs.Update",
    api_version: "2026-03-01",
};

/// Alphabet of the random part of an ipConfiguration name (Cilium's).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `Cilium-` + 8 random characters.
pub(super) fn config_name() -> String {
    let suffix: String = (0..8)
        .map(|_| char::from(NAME_ALPHABET[fastrand::usize(..NAME_ALPHABET.len())]))
        .collect();
    format!("Cilium-{suffix}")
}

impl ArmClient {
    pub(super) fn vmss_vm_path(vmss: &str, vm_id: &str) -> String {
        format!(
            "Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{}",
            seg(vmss),
            seg(vm_id)
        )
    }

    pub(super) fn nic_url(&self, op: Op, name: &str) -> String {
        self.url(
            &format!("Microsoft.Network/networkInterfaces/{}", seg(name)),
            op,
            false,
        )
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn all_interfaces(&self) -> Result<Vec<NetworkInterface>, ArmError> {
        let sets: Vec<VirtualMachineScaleSet> = self
            .list(
                VMSS_LIST,
                &self.url(
                    "Microsoft.Compute/virtualMachineScaleSets",
                    VMSS_LIST,
                    false,
                ),
            )
            .await?;
        let mut nics = Vec::new();
        for set in sets {
            if set.sku.as_ref().and_then(|s| s.capacity) == Some(0) {
                continue;
            }
            let Some(name) = set.name else {
                warn!(vmss = ?set.id, "scale set without a name; skipped");
                continue;
            };
            let path = format!(
                "Microsoft.Compute/virtualMachineScaleSets/{}/networkInterfaces",
                seg(&name)
            );
            match self
                .list(VMSS_NICS, &self.url(&path, VMSS_NICS, false))
                .await
            {
                Ok(list) => nics.extend(list),
                Err(e) if e.is_not_found() => {
                    debug!(vmss = %name, "scale set has no interfaces; skipped");
                }
                Err(e) => return Err(e),
            }
        }
        let standalone: Vec<NetworkInterface> = self
            .list(
                NIC_LIST,
                &self.url("Microsoft.Network/networkInterfaces", NIC_LIST, false),
            )
            .await?;
        nics.extend(standalone);
        Ok(nics)
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn vm_interfaces(
        &self,
        instance_id: &str,
    ) -> Result<Vec<NetworkInterface>, ArmError> {
        let (vmss, index) =
            vmss_instance(instance_id).ok_or_else(|| ArmError::NotVmssInstance {
                instance_id: instance_id.to_owned(),
            })?;
        let path = format!("{}/networkInterfaces", Self::vmss_vm_path(&vmss, &index));
        self.list(VMSS_VM_NICS, &self.url(&path, VMSS_VM_NICS, false))
            .await
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn subnets(&self, ids: &BTreeSet<String>) -> SubnetMap {
        let mut map = SubnetMap::new();
        for id in ids {
            match self.subnet(id).await {
                Ok(subnet) => {
                    map.insert(id.clone(), subnet);
                }
                Err(error) => warn!(subnet = %id, %error, "unable to read Azure subnet; skipped"),
            }
        }
        map
    }

    async fn subnet(&self, id: &str) -> Result<crate::azure::parse::Subnet, SubnetError> {
        let parsed = resource_id::parse(id).map_err(|source| {
            SubnetError::Arm(ArmError::ResourceId {
                operation: SUBNET_GET.name,
                source,
            })
        })?;
        if !is_subnet_id(id) {
            return Err(SubnetError::NotASubnet { id: id.to_owned() });
        }
        let vnet = parsed
            .parent
            .as_deref()
            .map(|p| p.name.as_str())
            .unwrap_or_default();
        // The client's subscription, the RG of the ID (as Cilium).
        let path = format!(
            "Microsoft.Network/virtualNetworks/{}/subnets/{}",
            seg(vnet),
            seg(&parsed.name)
        );
        let model: ModelSubnet = self
            .get(
                SUBNET_GET,
                &self.rg_url(&parsed.resource_group, &path, SUBNET_GET, false),
            )
            .await
            .map_err(SubnetError::Arm)?;
        subnet_from_model(id, &model).map_err(SubnetError::Parse)
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn assign_vm(
        &self,
        subnet_id: &str,
        interface_name: &str,
        count: usize,
    ) -> Result<(), ArmError> {
        let url = self.nic_url(NIC_GET, interface_name);
        let mut nic: NetworkInterface = self.get(NIC_GET, &url).await?;
        let configs = nic
            .properties
            .get_or_insert_default()
            .ip_configurations
            .get_or_insert_default();
        let asgs = configs
            .first()
            .and_then(|c| c.properties.as_ref()?.application_security_groups.clone());
        for _ in 0..count {
            configs.push(InterfaceIpConfiguration {
                name: Some(config_name()),
                properties: Some(InterfaceIpConfigurationProperties {
                    application_security_groups: asgs.clone(),
                    private_ip_allocation_method: Some("Dynamic".into()),
                    subnet: Some(SubResource::new(subnet_id)),
                    ..InterfaceIpConfigurationProperties::default()
                }),
                ..InterfaceIpConfiguration::default()
            });
        }
        let body = encode(NIC_PUT.name, &nic)?;
        let _: NetworkInterface = self
            .put_lro(NIC_PUT, &self.nic_url(NIC_PUT, interface_name), body)
            .await?;
        Ok(())
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn assign_vmss(
        &self,
        vm_id: &str,
        vmss: &str,
        subnet_id: &str,
        interface_name: &str,
        count: usize,
    ) -> Result<(), ArmError> {
        let path = Self::vmss_vm_path(vmss, vm_id);
        let mut vm: VmssVm = self
            .get(VMSS_VM_GET, &self.url(&path, VMSS_VM_GET, true))
            .await?;
        let configs = vmss_ip_configs(&mut vm, interface_name, vm_id)?;
        let asgs = configs
            .first()
            .and_then(|c| c.properties.as_ref()?.application_security_groups.clone());
        for _ in 0..count {
            configs.push(VmssIpConfiguration {
                name: Some(config_name()),
                properties: Some(VmssIpConfigurationProperties {
                    application_security_groups: asgs.clone(),
                    private_ip_address_version: Some("IPv4".into()),
                    subnet: Some(SubResource::new(subnet_id)),
                    ..VmssIpConfigurationProperties::default()
                }),
                ..VmssIpConfiguration::default()
            });
        }
        self.put_vmss_vm(&path, vm).await
    }

    /// PUT a VMSS VM back without its imageReference.
    pub(super) async fn put_vmss_vm(&self, path: &str, mut vm: VmssVm) -> Result<(), ArmError> {
        if let Some(storage) = vm
            .properties
            .as_mut()
            .and_then(|p| p.storage_profile.as_mut())
        {
            storage.image_reference = None;
        }
        let body = encode(VMSS_VM_PUT.name, &vm)?;
        let _: VmssVm = self
            .put_lro(VMSS_VM_PUT, &self.url(path, VMSS_VM_PUT, false), body)
            .await?;
        Ok(())
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn release_vm(
        &self,
        interface_name: &str,
        ips: &[IpAddr],
    ) -> Result<(), ArmError> {
        if ips.is_empty() {
            return Ok(());
        }
        let url = self.nic_url(NIC_GET, interface_name);
        let mut nic: NetworkInterface = self.get(NIC_GET, &url).await?;
        let names = configs_holding(&nic, interface_name, ips)?;
        if let Some(configs) = nic
            .properties
            .as_mut()
            .and_then(|p| p.ip_configurations.as_mut())
        {
            configs.retain(|c| !c.name.as_ref().is_some_and(|n| names.contains(n)));
        }
        let body = encode(NIC_PUT.name, &nic)?;
        let _: NetworkInterface = self
            .put_lro(NIC_PUT, &self.nic_url(NIC_PUT, interface_name), body)
            .await?;
        Ok(())
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn release_vmss(
        &self,
        vm_id: &str,
        vmss: &str,
        interface_name: &str,
        ips: &[IpAddr],
    ) -> Result<(), ArmError> {
        if ips.is_empty() {
            return Ok(());
        }
        let path = Self::vmss_vm_path(vmss, vm_id);
        // The VMSS VM model has no addresses: find the configurations on the NIC.
        let nics: Vec<NetworkInterface> = self
            .list(
                VMSS_VM_NICS,
                &self.url(&format!("{path}/networkInterfaces"), VMSS_VM_NICS, false),
            )
            .await?;
        let nic = nics
            .iter()
            .find(|n| n.name.as_deref() == Some(interface_name))
            .ok_or_else(|| ArmError::InterfaceNotFound {
                interface: interface_name.to_owned(),
                vm: vm_id.to_owned(),
            })?;
        let names = configs_holding(nic, interface_name, ips)?;
        let mut vm: VmssVm = self
            .get(VMSS_VM_GET, &self.url(&path, VMSS_VM_GET, true))
            .await?;
        let configs = vmss_ip_configs(&mut vm, interface_name, vm_id)?;
        let present: HashSet<&String> = configs.iter().filter_map(|c| c.name.as_ref()).collect();
        if let Some(missing) = names.iter().find(|n| !present.contains(n)) {
            return Err(ArmError::MissingField {
                resource: format!("VMSS {vmss} instance {vm_id} interface {interface_name}"),
                field: format!("ipConfiguration {missing}"),
            });
        }
        configs.retain(|c| !c.name.as_ref().is_some_and(|n| names.contains(n)));
        self.put_vmss_vm(&path, vm).await
    }
}

/// Why one subnet was skipped.
#[derive(Debug, thiserror::Error)]
enum SubnetError {
    #[error(transparent)]
    Arm(ArmError),
    #[error(
        "{id} is not a Microsoft.Network/virtualNetworks/subnets ID (the casing must be exact)"
    )]
    NotASubnet { id: String },
    #[error(transparent)]
    Parse(crate::azure::parse::ParseError),
}

/// The ipConfigurations of NIC configuration `interface_name` of a VMSS VM.
fn vmss_ip_configs<'a>(
    vm: &'a mut VmssVm,
    interface_name: &str,
    vm_id: &str,
) -> Result<&'a mut Vec<VmssIpConfiguration>, ArmError> {
    vm.properties
        .as_mut()
        .and_then(|p| p.network_profile_configuration.as_mut())
        .and_then(|n| n.network_interface_configurations.as_mut())
        .and_then(|list| {
            list.iter_mut()
                .find(|c| c.name.as_deref() == Some(interface_name))
        })
        .map(|c| {
            c.properties
                .get_or_insert_default()
                .ip_configurations
                .get_or_insert_default()
        })
        .ok_or_else(|| ArmError::InterfaceNotFound {
            interface: interface_name.to_owned(),
            vm: vm_id.to_owned(),
        })
}

/// The names of the NIC's ipConfigurations holding `ips`; every address must be on the NIC
/// and none may be the primary.
fn configs_holding(
    nic: &NetworkInterface,
    interface_name: &str,
    ips: &[IpAddr],
) -> Result<BTreeSet<String>, ArmError> {
    let configs = nic
        .properties
        .as_ref()
        .and_then(|p| p.ip_configurations.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut names = BTreeSet::new();
    for &address in ips {
        let holder = configs.iter().find(|c| {
            c.properties
                .as_ref()
                .and_then(|p| p.private_ip_address.as_deref())
                .and_then(|a| a.parse::<IpAddr>().ok())
                == Some(address)
        });
        let Some(config) = holder else {
            return Err(ArmError::AddressNotOnInterface {
                interface: interface_name.to_owned(),
                address,
            });
        };
        if config.properties.as_ref().and_then(|p| p.primary) == Some(true) {
            return Err(ArmError::PrimaryAddress {
                interface: interface_name.to_owned(),
                address,
            });
        }
        let name = config.name.clone().ok_or_else(|| ArmError::MissingField {
            resource: nic.id.clone().unwrap_or_else(|| interface_name.to_owned()),
            field: format!("name of the ipConfiguration holding {address}"),
        })?;
        names.insert(name);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names() {
        for _ in 0..100 {
            let name = config_name();
            let suffix = name.strip_prefix("Cilium-").unwrap();
            assert_eq!(suffix.len(), 8);
            assert!(suffix.bytes().all(|b| NAME_ALPHABET.contains(&b)), "{name}");
        }
    }
}

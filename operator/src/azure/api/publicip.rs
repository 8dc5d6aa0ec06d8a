//! Static public IPs from tagged Public IP Prefixes (§3.4): the prefix choice (pure), and the
//! VM and VMSS flows that attach a `cilium-managed-public-ip` to the primary ipConfiguration of
//! the primary NIC (or read back the one already there, or replace one whose prefix ran out)
//! and return its address.

use std::collections::BTreeMap;

use ipnet::IpNet;
use tracing::{info, instrument};

use super::{
    ArmClient, ArmError,
    ops::{NIC_GET, NIC_PUT, VMSS_VM_GET, VMSS_VM_NICS},
    request::{Op, encode, seg},
};
use crate::azure::{
    model::{
        InterfaceIpConfiguration, NetworkInterface, PublicIpAddress, PublicIpAddressProperties,
        PublicIpPrefix, SubResource, VirtualMachine, VmssPublicIpConfiguration,
        VmssPublicIpConfigurationProperties, VmssVm,
    },
    resource_id::{self, vm_name, vmss_instance},
};

const VM_GET: Op = Op {
    name: "VirtualMachines.Get",
    api_version: "2026-03-01",
};
const PREFIX_LIST: Op = Op {
    name: "PublicIPPrefixes.List",
    api_version: "2025-07-01",
};
const PIP_GET: Op = Op {
    name: "PublicIPAddresses.Get",
    api_version: "2025-07-01",
};
const VMSS_VM_PIPS: Op = Op {
    name: "PublicIPAddresses.ListVirtualMachineScaleSetVMPublicIPAddresses",
    api_version: "2018-10-01",
};

/// Name of the public IP the operator attaches.
pub const PUBLIC_IP_NAME: &str = "cilium-managed-public-ip";
/// Instance-view code of a VMSS whose prefix has no free address.
pub const PREFIX_EXHAUSTED: &str =
    "ProvisioningState/failed/PublicIpPrefixOutOfIpAddressesForVMScaleSet";

/// The first prefix (in list order) that has all `tags`, an ID, `provisioningState`
/// `Succeeded` and a free address (Cilium `findPublicIPPrefixByTags`).
#[must_use]
pub fn choose_prefix<'a>(
    prefixes: &'a [PublicIpPrefix],
    tags: &BTreeMap<String, String>,
) -> Option<&'a PublicIpPrefix> {
    prefixes.iter().find(|p| {
        let Some(have) = &p.tags else { return false };
        let props = p.properties.as_ref();
        let total = props
            .and_then(|pr| pr.ip_prefix.as_deref())
            .and_then(|t| t.parse::<IpNet>().ok())
            .map_or(0, |net| {
                1u128
                    .checked_shl(u32::from(net.max_prefix_len() - net.prefix_len()))
                    .unwrap_or(u128::MAX)
            });
        let allocated = props
            .and_then(|pr| pr.public_ip_addresses.as_ref())
            .map_or(0, Vec::len) as u128;
        tags.iter().all(|(k, v)| have.get(k) == Some(v))
            && p.id.is_some()
            && props.and_then(|pr| pr.provisioning_state.as_deref()) == Some("Succeeded")
            && !(total > 0 && allocated >= total)
    })
}

fn primary<T>(items: &mut [T], is_primary: impl Fn(&T) -> bool) -> Option<&mut T> {
    if items.len() == 1 {
        return items.first_mut();
    }
    items.iter_mut().find(|i| is_primary(i))
}

fn missing(resource: &str, field: &str) -> ArmError {
    ArmError::MissingField {
        resource: resource.to_owned(),
        field: field.to_owned(),
    }
}

fn primary_nic_config<'a>(
    nic: &'a mut NetworkInterface,
    resource: &str,
) -> Result<&'a mut InterfaceIpConfiguration, ArmError> {
    let configs = nic
        .properties
        .as_mut()
        .and_then(|p| p.ip_configurations.as_mut())
        .ok_or_else(|| missing(resource, "properties.ipConfigurations"))?;
    primary(configs, |c| {
        c.properties.as_ref().and_then(|p| p.primary) == Some(true)
    })
    .ok_or_else(|| missing(resource, "the primary ipConfiguration"))
}

impl ArmClient {
    async fn prefix(&self, tags: &BTreeMap<String, String>) -> Result<String, ArmError> {
        let prefixes: Vec<PublicIpPrefix> = self
            .list(
                PREFIX_LIST,
                &self.url("Microsoft.Network/publicIPPrefixes", PREFIX_LIST, false),
            )
            .await?;
        choose_prefix(&prefixes, tags)
            .and_then(|p| p.id.clone())
            .ok_or_else(|| ArmError::PrefixNotFound {
                tags: tags.clone(),
                resource_group: self.inner.settings.resource_group.clone(),
            })
    }

    async fn public_ip_address(&self, id: &str) -> Result<String, ArmError> {
        let parsed = resource_id::parse(id).map_err(|source| ArmError::ResourceId {
            operation: PIP_GET.name,
            source,
        })?;
        let path = format!("Microsoft.Network/publicIPAddresses/{}", seg(&parsed.name));
        let pip: PublicIpAddress = self
            .get(
                PIP_GET,
                &self.rg_url(&parsed.resource_group, &path, PIP_GET, false),
            )
            .await?;
        pip.properties
            .and_then(|p| p.ip_address)
            .ok_or_else(|| missing(id, "properties.ipAddress"))
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn public_ip_vm(
        &self,
        instance_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ArmError> {
        let name = vm_name(instance_id).ok_or_else(|| ArmError::NotVirtualMachine {
            instance_id: instance_id.to_owned(),
        })?;
        let vm: VirtualMachine = self
            .get(
                VM_GET,
                &self.url(
                    &format!("Microsoft.Compute/virtualMachines/{}", seg(&name)),
                    VM_GET,
                    true,
                ),
            )
            .await?;
        let props = vm.properties.unwrap_or_default();
        let exhausted = props
            .instance_view
            .as_ref()
            .is_some_and(|v| v.has_status(PREFIX_EXHAUSTED));
        let mut refs = props
            .network_profile
            .and_then(|n| n.network_interfaces)
            .unwrap_or_default();
        let nic_id = primary(&mut refs, |r| {
            r.properties.as_ref().and_then(|p| p.primary) == Some(true)
        })
        .and_then(|r| r.id.clone())
        .ok_or_else(|| missing(instance_id, "the primary network interface"))?;
        let nic_name = resource_id::parse(&nic_id)
            .map_err(|source| ArmError::ResourceId {
                operation: NIC_GET.name,
                source,
            })?
            .name;
        let mut nic: NetworkInterface =
            self.get(NIC_GET, &self.nic_url(NIC_GET, &nic_name)).await?;
        let config = primary_nic_config(&mut nic, &nic_id)?;
        let config_props = config.properties.get_or_insert_default();
        if let Some(existing) = &config_props.public_ip_address {
            if !exhausted {
                let id = existing
                    .id
                    .clone()
                    .ok_or_else(|| missing(&nic_id, "publicIPAddress.id"))?;
                return self.public_ip_address(&id).await;
            }
            info!(nic = %nic_id, "public IP prefix exhausted; replacing the public IP");
            config_props.public_ip_address = None;
            let body = encode(NIC_PUT.name, &nic)?;
            nic = self
                .put_lro(NIC_PUT, &self.nic_url(NIC_PUT, &nic_name), body)
                .await?;
        }
        let prefix = self.prefix(tags).await?;
        let config = primary_nic_config(&mut nic, &nic_id)?;
        config.properties.get_or_insert_default().public_ip_address = Some(PublicIpAddress {
            name: Some(PUBLIC_IP_NAME.into()),
            properties: Some(PublicIpAddressProperties {
                public_ip_allocation_method: Some("Static".into()),
                public_ip_prefix: Some(SubResource::new(&prefix)),
                ..PublicIpAddressProperties::default()
            }),
            ..PublicIpAddress::default()
        });
        let body = encode(NIC_PUT.name, &nic)?;
        let mut done: NetworkInterface = self
            .put_lro(NIC_PUT, &self.nic_url(NIC_PUT, &nic_name), body)
            .await?;
        let id = primary_nic_config(&mut done, &nic_id)?
            .properties
            .as_ref()
            .and_then(|p| p.public_ip_address.as_ref()?.id.clone())
            .ok_or_else(|| missing(&nic_id, "publicIPAddress.id of the primary ipConfiguration"))?;
        self.public_ip_address(&id).await
    }

    #[instrument(level = "debug", skip(self))]
    pub(super) async fn public_ip_vmss(
        &self,
        instance_id: &str,
        vmss: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ArmError> {
        let (_, index) = vmss_instance(instance_id).ok_or_else(|| ArmError::NotVmssInstance {
            instance_id: instance_id.to_owned(),
        })?;
        let path = Self::vmss_vm_path(vmss, &index);
        let mut vm: VmssVm = self
            .get(VMSS_VM_GET, &self.url(&path, VMSS_VM_GET, true))
            .await?;
        let exhausted = vm
            .properties
            .as_ref()
            .and_then(|p| p.instance_view.as_ref())
            .is_some_and(|v| v.has_status(PREFIX_EXHAUSTED));
        let has_config = vmss_primary_ip_config(&mut vm, instance_id)?
            .public_ip_address_configuration
            .is_some();
        if has_config && !exhausted {
            return self.vmss_public_ip(&path, instance_id).await;
        }
        if has_config {
            info!(instance = %instance_id, "public IP prefix exhausted; replacing the public IP configuration");
            vmss_primary_ip_config(&mut vm, instance_id)?.public_ip_address_configuration = None;
            self.put_vmss_vm(&path, vm.clone()).await?;
        }
        let prefix = self.prefix(tags).await?;
        vmss_primary_ip_config(&mut vm, instance_id)?.public_ip_address_configuration =
            Some(VmssPublicIpConfiguration {
                name: Some(PUBLIC_IP_NAME.into()),
                properties: Some(VmssPublicIpConfigurationProperties {
                    public_ip_prefix: Some(SubResource::new(&prefix)),
                    ..VmssPublicIpConfigurationProperties::default()
                }),
                ..VmssPublicIpConfiguration::default()
            });
        self.put_vmss_vm(&path, vm).await?;
        self.vmss_public_ip(&path, instance_id).await
    }

    /// The address of the VMSS instance's primary NIC's primary ipConfiguration.
    async fn vmss_public_ip(&self, path: &str, instance_id: &str) -> Result<String, ArmError> {
        let mut nics: Vec<NetworkInterface> = self
            .list(
                VMSS_VM_NICS,
                &self.url(&format!("{path}/networkInterfaces"), VMSS_VM_NICS, false),
            )
            .await?;
        let nic = primary(&mut nics, |n| {
            n.properties.as_ref().and_then(|p| p.primary) == Some(true)
        })
        .ok_or_else(|| missing(instance_id, "the primary network interface"))?;
        let nic_name = nic
            .name
            .clone()
            .ok_or_else(|| missing(instance_id, "the primary NIC's name"))?;
        let config_name = primary_nic_config(nic, &nic_name)?
            .name
            .clone()
            .ok_or_else(|| missing(&nic_name, "the primary ipConfiguration's name"))?;
        let pips_path = format!(
            "{path}/networkInterfaces/{}/ipconfigurations/{}/publicipaddresses",
            seg(&nic_name),
            seg(&config_name)
        );
        let pips: Vec<PublicIpAddress> = self
            .list(VMSS_VM_PIPS, &self.url(&pips_path, VMSS_VM_PIPS, false))
            .await?;
        pips.into_iter()
            .find_map(|p| p.properties?.ip_address)
            .ok_or_else(|| missing(&nic_name, "a public IP address with properties.ipAddress"))
    }
}

fn vmss_primary_ip_config<'a>(
    vm: &'a mut VmssVm,
    instance_id: &str,
) -> Result<&'a mut crate::azure::model::VmssIpConfigurationProperties, ArmError> {
    let nics = vm
        .properties
        .as_mut()
        .and_then(|p| p.network_profile_configuration.as_mut())
        .and_then(|n| n.network_interface_configurations.as_mut())
        .ok_or_else(|| {
            missing(
                instance_id,
                "properties.networkProfileConfiguration.networkInterfaceConfigurations",
            )
        })?;
    let nic = primary(nics, |n| {
        n.properties.as_ref().and_then(|p| p.primary) == Some(true)
    })
    .ok_or_else(|| missing(instance_id, "the primary network interface configuration"))?;
    let configs = nic
        .properties
        .get_or_insert_default()
        .ip_configurations
        .get_or_insert_default();
    let config = primary(configs, |c| {
        c.properties.as_ref().and_then(|p| p.primary) == Some(true)
    })
    .ok_or_else(|| missing(instance_id, "the primary ipConfiguration"))?;
    Ok(config.properties.get_or_insert_default())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn prefixes() -> Vec<PublicIpPrefix> {
        serde_json::from_value(json!([
            {"id": "untagged", "properties": {"provisioningState": "Succeeded", "ipPrefix": "1.0.0.0/31"}},
            {"id": "wrong-tag", "tags": {"pool": "b"}, "properties": {"provisioningState": "Succeeded", "ipPrefix": "1.0.0.0/31"}},
            {"id": "updating", "tags": {"pool": "a"}, "properties": {"provisioningState": "Updating", "ipPrefix": "1.0.1.0/31"}},
            {"tags": {"pool": "a"}, "properties": {"provisioningState": "Succeeded", "ipPrefix": "1.0.2.0/31"}},
            {"id": "full", "tags": {"pool": "a", "x": "y"}, "properties": {"provisioningState": "Succeeded",
                "ipPrefix": "1.0.3.0/31", "publicIPAddresses": [{"id": "1"}, {"id": "2"}]}},
            {"id": "free", "tags": {"pool": "a", "x": "y"}, "properties": {"provisioningState": "Succeeded",
                "ipPrefix": "1.0.4.0/31", "publicIPAddresses": [{"id": "1"}]}},
            {"id": "no-prefix", "tags": {"pool": "c"}, "properties": {"provisioningState": "Succeeded",
                "publicIPAddresses": [{"id": "1"}]}},
        ]))
        .unwrap()
    }

    #[test]
    fn prefix_choice() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let tags = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let list = prefixes();
        let cases: [Case; 6] = [
            (&[("pool", "a")], Some("free")),
            (&[("pool", "a"), ("x", "y")], Some("free")),
            (&[("pool", "b")], Some("wrong-tag")),
            (&[("pool", "c")], Some("no-prefix")),
            (&[("pool", "z")], None),
            (&[], Some("wrong-tag")),
        ];
        for (t, want) in cases {
            assert_eq!(
                choose_prefix(&list, &tags(t)).and_then(|p| p.id.as_deref()),
                want,
                "{t:?}"
            );
        }
        assert!(choose_prefix(&[], &tags(&[])).is_none());
    }
}

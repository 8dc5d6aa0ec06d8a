//! The `Microsoft.Compute` part of [`super`]: VMSS instances (their NIC configurations,
//! storage profile and instance view), standalone VMs (their NIC references) and scale sets
//! (their capacity). Same rules: only what weft reads or sets is typed, the rest is kept.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Extra, SubResource};

/// A `virtualMachineScaleSets/virtualMachines` resource (a VMSS instance).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmssVm {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VmssVmProperties>,
    /// Unmodelled fields (`instanceId`, `sku`, `location`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`VmssVm`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmssVmProperties {
    /// The NIC configurations of the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_profile_configuration: Option<VmssNetworkProfileConfiguration>,
    /// Storage profile (its `imageReference` is dropped before a PUT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_profile: Option<StorageProfile>,
    /// Instance view (with `$expand=instanceView`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_view: Option<InstanceView>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `networkProfileConfiguration` of a [`VmssVm`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmssNetworkProfileConfiguration {
    /// One entry per NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interface_configurations: Option<Vec<VmssNetworkConfiguration>>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One NIC configuration of a VMSS instance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmssNetworkConfiguration {
    /// Name (the NIC's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VmssNetworkConfigurationProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`VmssNetworkConfiguration`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmssNetworkConfigurationProperties {
    /// Whether this is the instance's primary NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// The ipConfigurations (no addresses here: those are on the NIC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_configurations: Option<Vec<VmssIpConfiguration>>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One ipConfiguration of a VMSS NIC configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmssIpConfiguration {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VmssIpConfigurationProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`VmssIpConfiguration`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmssIpConfigurationProperties {
    /// Subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubResource>,
    /// Whether this is the NIC's primary configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// `IPv4` or `IPv6`.
    #[serde(
        rename = "privateIPAddressVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address_version: Option<String>,
    /// Application security groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_security_groups: Option<Vec<SubResource>>,
    /// The public IP configuration (static public IP from a prefix).
    #[serde(
        rename = "publicIPAddressConfiguration",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_address_configuration: Option<VmssPublicIpConfiguration>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `publicIPAddressConfiguration` of a VMSS ipConfiguration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmssPublicIpConfiguration {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VmssPublicIpConfigurationProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`VmssPublicIpConfiguration`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmssPublicIpConfigurationProperties {
    /// The prefix the address comes from.
    #[serde(
        rename = "publicIPPrefix",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_prefix: Option<SubResource>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `storageProfile` of a VM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfile {
    /// The image (kept as ARM sent it; set to `None` before a VMSS VM PUT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_reference: Option<Value>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `instanceView` of a VM or VMSS VM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceView {
    /// Status entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statuses: Option<Vec<InstanceViewStatus>>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `instanceView.statuses` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceViewStatus {
    /// Status code, e.g. `ProvisioningState/succeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl InstanceView {
    /// Whether a status has exactly this `code`.
    #[must_use]
    pub fn has_status(&self, code: &str) -> bool {
        self.statuses
            .iter()
            .flatten()
            .any(|s| s.code.as_deref() == Some(code))
    }
}

/// A `Microsoft.Compute/virtualMachines` resource (a standalone VM).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VirtualMachine {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<VirtualMachineProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`VirtualMachine`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineProperties {
    /// The VM's NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_profile: Option<NetworkProfile>,
    /// Instance view (with `$expand=instanceView`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_view: Option<InstanceView>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `networkProfile` of a [`VirtualMachine`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkProfile {
    /// References to the VM's NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interfaces: Option<Vec<NetworkInterfaceReference>>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `networkProfile.networkInterfaces` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkInterfaceReference {
    /// The NIC's ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `properties` (`primary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkInterfaceReferenceProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`NetworkInterfaceReference`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkInterfaceReferenceProperties {
    /// Whether this is the VM's primary NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A `Microsoft.Compute/virtualMachineScaleSets` resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VirtualMachineScaleSet {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `sku` (`capacity` is the instance count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<Sku>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `sku` of a [`VirtualMachineScaleSet`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sku {
    /// Number of instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<i64>,
    /// Unmodelled fields (`name`, `tier`).
    #[serde(flatten)]
    pub extra: Extra,
}

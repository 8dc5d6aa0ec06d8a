//! Serde types for the ARM JSON the Azure allocator reads and writes (§3.3–3.4): network
//! interfaces, subnets, public IP prefixes and addresses and the list envelope here; VMSS VMs,
//! VMs and scale sets in `compute`. Only the fields weft reads or sets are typed; every struct keeps the rest in
//! a flattened [`Extra`], so a GET → modify → PUT round trip sends back everything ARM sent
//! (read-only fields included, which ARM ignores). Absent fields stay absent: `None` is never
//! written. No IO and no interpretation here (that is [`super::parse`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod compute;

pub use compute::*;

/// Fields a struct does not model, kept for the round trip.
pub type Extra = Map<String, Value>;

/// A reference to another resource (`{"id": …}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubResource {
    /// The referenced resource's ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl SubResource {
    /// A reference to `id`.
    #[must_use]
    pub fn new(id: &str) -> Self {
        Self {
            id: Some(id.to_owned()),
            extra: Extra::new(),
        }
    }
}

/// One page of a list (`{"value": […], "nextLink": …}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// The items of this page.
    #[serde(default = "Vec::new")]
    pub value: Vec<T>,
    /// URL of the next page, absent or empty on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_link: Option<String>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A `Microsoft.Network/networkInterfaces` resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkInterface {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<NetworkInterfaceProperties>,
    /// Unmodelled fields (`location`, `etag`, `tags`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`NetworkInterface`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterfaceProperties {
    /// The VM (or VMSS VM) the NIC is attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine: Option<SubResource>,
    /// MAC address, `AA-BB-CC-DD-EE-FF`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// Network security group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<SubResource>,
    /// Whether this is the VM's primary NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Provisioning state of the NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// The NIC's ipConfigurations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_configurations: Option<Vec<InterfaceIpConfiguration>>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One ipConfiguration of a [`NetworkInterface`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceIpConfiguration {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name (`Cilium-xxxxxxxx` for the ones the operator adds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<InterfaceIpConfigurationProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of an [`InterfaceIpConfiguration`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceIpConfigurationProperties {
    /// The address (text, parsed by [`super::parse`]).
    #[serde(
        rename = "privateIPAddress",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address: Option<String>,
    /// `Dynamic` or `Static`.
    #[serde(
        rename = "privateIPAllocationMethod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_allocation_method: Option<String>,
    /// `IPv4` or `IPv6`.
    #[serde(
        rename = "privateIPAddressVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub private_ip_address_version: Option<String>,
    /// Subnet of the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubResource>,
    /// Whether this is the NIC's primary configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Provisioning state (`Succeeded`, `Updating`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// Application security groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_security_groups: Option<Vec<SubResource>>,
    /// Public IP of the configuration.
    #[serde(
        rename = "publicIPAddress",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_address: Option<PublicIpAddress>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A `Microsoft.Network/virtualNetworks/subnets` resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Subnet {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<SubnetProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`Subnet`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubnetProperties {
    /// The subnet's CIDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_prefix: Option<String>,
    /// The subnet's CIDRs (when there are several; the first is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_prefixes: Option<Vec<String>>,
    /// The ipConfigurations using the subnet (their count reduces the free addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_configurations: Option<Vec<SubResource>>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A `Microsoft.Network/publicIPPrefixes` resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PublicIpPrefix {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tags (matched against a node's `static-ip-tags`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<PublicIpPrefixProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`PublicIpPrefix`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicIpPrefixProperties {
    /// `Succeeded` when usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_state: Option<String>,
    /// The prefix, e.g. `20.1.2.0/30`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_prefix: Option<String>,
    /// Public IPs allocated from the prefix.
    #[serde(
        rename = "publicIPAddresses",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_addresses: Option<Vec<SubResource>>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A `Microsoft.Network/publicIPAddresses` resource (also inline in an ipConfiguration).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PublicIpAddress {
    /// ARM ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `properties`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<PublicIpAddressProperties>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `properties` of a [`PublicIpAddress`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PublicIpAddressProperties {
    /// The address.
    #[serde(rename = "ipAddress", default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
    /// `Static` or `Dynamic`.
    #[serde(
        rename = "publicIPAllocationMethod",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub public_ip_allocation_method: Option<String>,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn round_trip<T: serde::de::DeserializeOwned + Serialize>(v: &Value) -> Value {
        let typed: T = serde_json::from_value(v.clone()).unwrap();
        serde_json::to_value(&typed).unwrap()
    }

    #[test]
    fn nic_round_trip_keeps_unknown_fields() {
        let nic = json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n",
            "name": "n", "location": "westeurope", "etag": "W/\"1\"", "tags": {"a": "b"},
            "properties": {
                "macAddress": "00-0D-3A-00-00-01", "enableAcceleratedNetworking": true,
                "virtualMachine": {"id": "/subscriptions/s/x"},
                "dnsSettings": {"dnsServers": []},
                "ipConfigurations": [{
                    "name": "ipconfig1", "etag": "e", "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                    "properties": {"privateIPAddress": "10.0.0.4", "primary": true, "provisioningState": "Succeeded",
                        "subnet": {"id": "sub", "extraRef": 1}, "privateIPAddressVersion": "IPv4",
                        "loadBalancerBackendAddressPools": [{"id": "lb"}],
                        "publicIPAddress": {"id": "pip", "properties": {"ipAddress": "1.2.3.4", "x": 1}}}
                }]
            }
        });
        assert_eq!(round_trip::<NetworkInterface>(&nic), nic);
    }

    #[test]
    fn vmss_vm_modify_keeps_everything_else() {
        let vm = json!({
            "instanceId": "3", "sku": {"name": "Standard_D2"},
            "properties": {
                "latestModelApplied": true,
                "storageProfile": {"imageReference": {"publisher": "p"}, "osDisk": {"caching": "ReadWrite"}},
                "instanceView": {"statuses": [{"code": "ProvisioningState/succeeded", "level": "Info"}]},
                "networkProfileConfiguration": {"networkInterfaceConfigurations": [{
                    "name": "eth0", "properties": {"primary": true, "enableIPForwarding": true,
                    "ipConfigurations": [{"name": "ipconfig1", "properties": {"primary": true, "subnet": {"id": "s"},
                        "applicationSecurityGroups": [{"id": "asg"}]}}]}
                }]}
            }
        });
        let mut typed: VmssVm = serde_json::from_value(vm.clone()).unwrap();
        let props = typed.properties.as_mut().unwrap();
        props.storage_profile.as_mut().unwrap().image_reference = None;
        assert!(
            props
                .instance_view
                .as_ref()
                .unwrap()
                .has_status("ProvisioningState/succeeded")
        );
        let out = serde_json::to_value(&typed).unwrap();
        let mut expected = vm;
        expected["properties"]["storageProfile"]
            .as_object_mut()
            .unwrap()
            .remove("imageReference");
        assert_eq!(out, expected);
    }

    #[test]
    fn other_types_round_trip() {
        let vm = json!({"properties": {"networkProfile": {"networkInterfaces": [{"id": "n", "properties": {"primary": true}}]},
            "instanceView": {"statuses": [{"code": "c"}]}, "hardwareProfile": {}}});
        assert_eq!(round_trip::<VirtualMachine>(&vm), vm);
        let subnet = json!({"id": "s", "properties": {"addressPrefix": "10.0.0.0/16", "addressPrefixes": ["10.0.0.0/16"],
            "ipConfigurations": [{"id": "c"}], "delegations": []}});
        assert_eq!(round_trip::<Subnet>(&subnet), subnet);
        let vmss = json!({"name": "v", "sku": {"name": "x", "capacity": 0, "tier": "Standard"}, "zones": ["1"]});
        assert_eq!(round_trip::<VirtualMachineScaleSet>(&vmss), vmss);
        let prefix = json!({"id": "p", "tags": {"k": "v"}, "properties": {"provisioningState": "Succeeded",
            "ipPrefix": "20.0.0.0/31", "publicIPAddresses": [{"id": "a"}], "prefixLength": 31}});
        assert_eq!(round_trip::<PublicIpPrefix>(&prefix), prefix);
        let page = json!({"value": [{"id": "n", "foo": 1}], "nextLink": "https://x/next"});
        assert_eq!(round_trip::<Page<NetworkInterface>>(&page), page);
        let empty: Page<NetworkInterface> = serde_json::from_value(json!({})).unwrap();
        assert!(empty.value.is_empty() && empty.next_link.is_none());
    }
}

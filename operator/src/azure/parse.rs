//! What the allocator makes of ARM resources (§3.3, §3.5): a NIC becomes the CiliumNode's
//! `status.azure.interfaces` entry ([`AzureInterface`]) keyed by its lowercased instance ID,
//! and a subnet becomes a [`Subnet`] with its free-address count. Pure: no IO. Input that
//! cannot be used is never dropped silently: a NIC that cannot be used is a [`ParseError`]
//! naming it and the field; a skipped ipConfiguration is a warning in
//! [`ParsedInterface::warnings`].

use std::{collections::BTreeMap, net::IpAddr};

use ipnet::IpNet;
use weft_k8s::crd::azure::{AzureAddress, AzureInterface, AzureSubnet};

use super::model;

/// A NIC or subnet that cannot be used.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// A NIC without an `id`.
    #[error("network interface named {name:?} has no id")]
    NicWithoutId {
        /// The NIC's name (empty if it has none either).
        name: String,
    },
    /// A NIC without a required field.
    #[error("network interface {nic}: {field} is missing")]
    NicField {
        /// The NIC's ID.
        nic: String,
        /// The missing field's JSON path.
        field: &'static str,
    },
    /// A subnet without `addressPrefix` or `addressPrefixes`.
    #[error("subnet {id}: neither properties.addressPrefix nor properties.addressPrefixes is set")]
    SubnetWithoutPrefix {
        /// The subnet's ID.
        id: String,
    },
    /// A subnet whose prefix is not a CIDR.
    #[error("subnet {id}: address prefix {value:?} is not a CIDR")]
    SubnetPrefix {
        /// The subnet's ID.
        id: String,
        /// The prefix as ARM sent it.
        value: String,
        /// Why it does not parse.
        #[source]
        source: ipnet::AddrParseError,
    },
}

/// A subnet as the allocator sees it (Cilium `ipamTypes.Subnet`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subnet {
    /// The subnet's ARM ID (the pool ID).
    pub id: String,
    /// The subnet's CIDR.
    pub cidr: Option<IpNet>,
    /// The VNet's ARM ID (the subnet ID up to `/subnets/`).
    pub virtual_network_id: String,
    /// Addresses still free: `2^hostbits - 5 - len(ipConfigurations)`, at least 0.
    pub available_addresses: u64,
}

/// Subnets by ARM ID.
pub type SubnetMap = BTreeMap<String, Subnet>;

/// A NIC parsed for the instances cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedInterface {
    /// The lowercased `properties.virtualMachine.id` (the CiliumNode's `spec.instance-id`).
    pub instance_id: String,
    /// The `status.azure.interfaces` entry.
    pub interface: AzureInterface,
    /// ipConfigurations skipped or kept incomplete, each naming the NIC and the field.
    pub warnings: Vec<String>,
}

/// Parse one NIC (Cilium `parseInterface`, §3.3). `Ok(None)` for a NIC attached to no VM.
///
/// # Errors
/// [`ParseError`] for a NIC without `id` or `name`.
pub fn parse_interface(
    nic: &model::NetworkInterface,
    subnets: &SubnetMap,
    use_primary: bool,
) -> Result<Option<ParsedInterface>, ParseError> {
    let Some(props) = &nic.properties else {
        return Ok(None);
    };
    let Some(vm_id) = props.virtual_machine.as_ref().and_then(|vm| vm.id.as_ref()) else {
        return Ok(None);
    };
    let id = nic.id.clone().ok_or_else(|| ParseError::NicWithoutId {
        name: nic.name.clone().unwrap_or_default(),
    })?;
    let name = nic.name.clone().ok_or_else(|| ParseError::NicField {
        nic: id.clone(),
        field: "name",
    })?;
    let mut warnings = Vec::new();
    let mut iface = AzureInterface {
        id,
        name,
        mac: props
            .mac_address
            .as_deref()
            .unwrap_or_default()
            .replace('-', ":"),
        security_group: props
            .network_security_group
            .as_ref()
            .and_then(|g| g.id.clone())
            .unwrap_or_default(),
        ..AzureInterface::default()
    };
    for (index, config) in props.ip_configurations.iter().flatten().enumerate() {
        let label = config.name.clone().unwrap_or_else(|| format!("#{index}"));
        let Some(cp) = &config.properties else {
            warnings.push(format!(
                "network interface {}: ipConfiguration {label} has no properties; skipped",
                iface.id
            ));
            continue;
        };
        let Some(text) = &cp.private_ip_address else {
            continue;
        };
        if iface.subnet.is_none()
            && let Some(subnet_id) = cp.subnet.as_ref().and_then(|s| s.id.as_ref())
        {
            let cidr = subnets.get(subnet_id).and_then(|s| s.cidr);
            iface.subnet = Some(AzureSubnet {
                id: subnet_id.clone(),
                cidr,
                ..AzureSubnet::default()
            });
            iface.gateway = cidr.and_then(gateway);
        }
        let Ok(addr) = text.parse::<IpAddr>() else {
            warnings.push(format!(
                "network interface {}: ipConfiguration {label} has properties.privateIPAddress {text:?}, which is not an IP address; skipped",
                iface.id
            ));
            continue;
        };
        if cp.primary == Some(true) {
            iface.ip = Some(addr);
            if !use_primary {
                continue;
            }
        }
        let state = if let Some(state) = &cp.provisioning_state {
            state.to_lowercase()
        } else {
            warnings.push(format!(
                "network interface {}: ipConfiguration {label} ({addr}) has no properties.provisioningState; its address is listed but not usable",
                iface.id
            ));
            String::new()
        };
        iface.addresses.push(AzureAddress {
            ip: addr.to_string(),
            state,
            ..AzureAddress::default()
        });
    }
    Ok(Some(ParsedInterface {
        instance_id: vm_id.to_lowercase(),
        interface: iface,
        warnings,
    }))
}

/// The subnet's network address + 1 (Cilium `deriveGatewayIP`).
#[must_use]
pub fn gateway(cidr: IpNet) -> Option<IpAddr> {
    match cidr.network() {
        IpAddr::V4(net) => u32::from(net).checked_add(1).map(|a| IpAddr::V4(a.into())),
        IpAddr::V6(net) => u128::from(net).checked_add(1).map(|a| IpAddr::V6(a.into())),
    }
}

/// The allocator's view of a subnet ARM returned (§3.5).
///
/// # Errors
/// [`ParseError`] when the subnet has no prefix or an unparseable one.
pub fn subnet_from_model(id: &str, subnet: &model::Subnet) -> Result<Subnet, ParseError> {
    let props = subnet.properties.as_ref();
    let text = props
        .and_then(|p| p.address_prefix.clone())
        .or_else(|| props.and_then(|p| p.address_prefixes.as_ref()?.first().cloned()))
        .ok_or_else(|| ParseError::SubnetWithoutPrefix { id: id.to_owned() })?;
    let cidr: IpNet = text.parse().map_err(|source| ParseError::SubnetPrefix {
        id: id.to_owned(),
        value: text.clone(),
        source,
    })?;
    let host_bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
    let used = props
        .and_then(|p| p.ip_configurations.as_ref())
        .map_or(0, Vec::len);
    let total = 1u64.checked_shl(host_bits).unwrap_or(u64::MAX);
    let available = total
        .saturating_sub(5)
        .saturating_sub(u64::try_from(used).unwrap_or(u64::MAX));
    Ok(Subnet {
        id: id.to_owned(),
        cidr: Some(cidr),
        virtual_network_id: id
            .find("/subnets/")
            .map_or_else(|| id.to_owned(), |at| id[..at].to_owned()),
        available_addresses: available,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SUB: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/x";

    #[expect(clippy::needless_pass_by_value, reason = "takes json! literals")]
    fn nic(configs: serde_json::Value) -> model::NetworkInterface {
        serde_json::from_value(json!({
            "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/Nic1",
            "name": "Nic1",
            "properties": {
                "macAddress": "00-0D-3A-AA-BB-CC",
                "networkSecurityGroup": {"id": "nsg"},
                "virtualMachine": {"id": "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/VM1"},
                "ipConfigurations": configs,
            }
        }))
        .unwrap()
    }

    fn subnets() -> SubnetMap {
        let s: model::Subnet =
            serde_json::from_value(json!({"properties": {"addressPrefix": "10.1.0.0/16"}}))
                .unwrap();
        [(SUB.to_owned(), subnet_from_model(SUB, &s).unwrap())].into()
    }

    fn configs() -> serde_json::Value {
        json!([
            {"name": "noaddr", "properties": {"subnet": {"id": "other"}}},
            {"name": "p", "properties": {"privateIPAddress": "10.1.0.4", "primary": true,
                "provisioningState": "Succeeded", "subnet": {"id": SUB}}},
            {"name": "a", "properties": {"privateIPAddress": "10.1.0.5", "provisioningState": "Updating",
                "subnet": {"id": "second"}}},
            {"name": "b", "properties": {"privateIPAddress": "10.1.0.6", "primary": false,
                "provisioningState": "SUCCEEDED"}},
        ])
    }

    fn addrs(p: &ParsedInterface) -> Vec<(&str, &str)> {
        p.interface
            .addresses
            .iter()
            .map(|a| (a.ip.as_str(), a.state.as_str()))
            .collect()
    }

    #[test]
    fn parses_a_nic() {
        let parsed = parse_interface(&nic(configs()), &subnets(), false)
            .unwrap()
            .unwrap();
        assert_eq!(
            parsed.instance_id,
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1"
        );
        let i = &parsed.interface;
        assert_eq!(i.name, "Nic1");
        assert!(i.id.ends_with("/networkInterfaces/Nic1"));
        assert_eq!(i.mac, "00:0D:3A:AA:BB:CC");
        assert_eq!(i.security_group, "nsg");
        assert_eq!(i.ip, Some("10.1.0.4".parse().unwrap()));
        let subnet = i.subnet.as_ref().unwrap();
        assert_eq!(subnet.id, SUB);
        assert_eq!(subnet.cidr, Some("10.1.0.0/16".parse().unwrap()));
        assert_eq!(i.gateway, Some("10.1.0.1".parse().unwrap()));
        assert_eq!(
            addrs(&parsed),
            [("10.1.0.5", "updating"), ("10.1.0.6", "succeeded")]
        );
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);

        let with_primary = parse_interface(&nic(configs()), &subnets(), true)
            .unwrap()
            .unwrap();
        assert_eq!(
            addrs(&with_primary),
            [
                ("10.1.0.4", "succeeded"),
                ("10.1.0.5", "updating"),
                ("10.1.0.6", "succeeded")
            ]
        );
    }

    #[test]
    fn unknown_subnet_has_no_cidr_or_gateway() {
        let parsed = parse_interface(&nic(configs()), &SubnetMap::new(), false)
            .unwrap()
            .unwrap();
        let subnet = parsed.interface.subnet.unwrap();
        assert_eq!((subnet.id.as_str(), subnet.cidr), (SUB, None));
        assert_eq!(parsed.interface.gateway, None);
    }

    #[test]
    fn bad_configs_are_warnings() {
        let parsed = parse_interface(
            &nic(json!([
                {"name": "bad", "properties": {"privateIPAddress": "10.1.0.300", "provisioningState": "Succeeded"}},
                {"name": "nostate", "properties": {"privateIPAddress": "10.1.0.7"}},
                {"name": "noprops"},
            ])),
            &subnets(),
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(addrs(&parsed), [("10.1.0.7", "")]);
        let w = &parsed.warnings;
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].contains("Nic1")
                && w[0].contains("privateIPAddress")
                && w[0].contains("10.1.0.300")
        );
        assert!(w[1].contains("nostate") && w[1].contains("provisioningState"));
        assert!(w[2].contains("noprops"));
    }

    #[test]
    fn unusable_nics() {
        let no_vm: model::NetworkInterface =
            serde_json::from_value(json!({"id": "n", "name": "n", "properties": {}})).unwrap();
        assert_eq!(parse_interface(&no_vm, &SubnetMap::new(), false), Ok(None));
        let no_props: model::NetworkInterface = serde_json::from_value(json!({"id": "n"})).unwrap();
        assert_eq!(
            parse_interface(&no_props, &SubnetMap::new(), false),
            Ok(None)
        );

        let mut no_id = nic(json!([]));
        no_id.id = None;
        let err = parse_interface(&no_id, &SubnetMap::new(), false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "network interface named \"Nic1\" has no id"
        );
        let mut no_name = nic(json!([]));
        no_name.name = None;
        let err = parse_interface(&no_name, &SubnetMap::new(), false).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("/networkInterfaces/Nic1: name is missing"),
            "{err}"
        );
    }

    #[test]
    fn subnets_from_model() {
        let cases = [
            (
                json!({"addressPrefix": "10.0.0.0/24", "ipConfigurations": [{"id": "a"}, {"id": "b"}]}),
                256 - 5 - 2,
            ),
            (
                json!({"addressPrefixes": ["10.0.0.0/28", "10.9.0.0/16"]}),
                11,
            ),
            (json!({"addressPrefix": "10.0.0.0/30"}), 0),
            (json!({"addressPrefix": "10.0.0.4/32"}), 0),
            (json!({"addressPrefix": "fd00::/64"}), u64::MAX - 5),
        ];
        for (props, available) in cases {
            let s: model::Subnet = serde_json::from_value(json!({"properties": props})).unwrap();
            let got = subnet_from_model(SUB, &s).unwrap();
            assert_eq!(got.available_addresses, available, "{props}");
            assert_eq!(
                got.virtual_network_id,
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v"
            );
        }
        let none: model::Subnet = serde_json::from_value(json!({"properties": {}})).unwrap();
        assert_eq!(
            subnet_from_model("id1", &none),
            Err(ParseError::SubnetWithoutPrefix { id: "id1".into() })
        );
        let bad: model::Subnet =
            serde_json::from_value(json!({"properties": {"addressPrefix": "10.0.0.0/33"}}))
                .unwrap();
        let err = subnet_from_model("id2", &bad).unwrap_err();
        assert!(err.to_string().contains("id2") && err.to_string().contains("10.0.0.0/33"));
    }

    #[test]
    fn gateways() {
        assert_eq!(
            gateway("10.0.3.7/22".parse().unwrap()),
            Some("10.0.0.1".parse().unwrap())
        );
        assert_eq!(
            gateway("fd00::/64".parse().unwrap()),
            Some("fd00::1".parse().unwrap())
        );
        assert_eq!(gateway("255.255.255.255/32".parse().unwrap()), None);
    }
}

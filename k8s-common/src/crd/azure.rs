//! Azure parts of a `CiliumNode` (`spec.azure`, `status.azure.interfaces`; Cilium
//! `pkg/azure/types`) and Azure's constants. Typed address fields follow the B wire format
//! (unparsable text fails decoding); `gateway` is always written, `""` when unset, as Go does.
//! No cloud calls and no routing here.

use std::net::IpAddr;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{Extra, opt_text};

/// Prefix of an Azure `spec.providerID` on the v1 Node.
pub const PROVIDER_PREFIX: &str = "azure://";
/// Provisioning state of a usable address or interface.
pub const STATE_SUCCEEDED: &str = "succeeded";
/// Maximum number of addresses on one interface.
pub const INTERFACE_ADDRESS_LIMIT: usize = 256;

/// `spec.azure`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct AzureSpec {
    /// Interface the operator allocates addresses on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interface_name: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `status.azure`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AzureStatus {
    /// Interfaces of the node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<AzureInterface>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `status.azure.interfaces` entry (Cilium `AzureInterface`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct AzureInterface {
    /// Interface resource id (the `resource` of `spec.ipam.pool` entries).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Primary address.
    #[serde(default, with = "opt_text", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub ip: Option<IpAddr>,
    /// Interface name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// MAC address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// Provisioning state.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// Addresses of the interface (secondaries, plus the primary with operator-side
    /// `--azure-use-primary-address`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<AzureAddress>,
    /// Security group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub security_group: String,
    /// Subnet of the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<AzureSubnet>,
    /// Default gateway of the subnet; written as `""` when unset (no `omitempty` in Go).
    #[serde(default, with = "opt_text")]
    #[schemars(with = "Option<String>")]
    pub gateway: Option<IpAddr>,
    /// Deprecated subnet CIDR, the fallback when `subnet.cidr` is missing.
    #[serde(default, with = "opt_text", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub cidr: Option<IpNet>,
    /// Unmodelled fields (for example the obsolete `GatewayIP`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl AzureInterface {
    /// The interface's subnet CIDR: `subnet.cidr`, else the legacy `cidr`.
    #[must_use]
    pub fn subnet_cidr(&self) -> Option<IpNet> {
        self.subnet
            .as_ref()
            .and_then(|subnet| subnet.cidr)
            .or(self.cidr)
    }
}

/// One address of an interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AzureAddress {
    /// The address, as written (not a typed field on the wire).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    /// Deprecated mirror of the interface's subnet.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subnet: String,
    /// Provisioning state ([`STATE_SUCCEEDED`] when usable).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl AzureAddress {
    /// The address parsed, `None` if it is not an IP.
    #[must_use]
    pub fn addr(&self) -> Option<IpAddr> {
        self.ip.parse().ok()
    }
}

/// `subnet` of an interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AzureSubnet {
    /// Subnet resource id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Subnet CIDR.
    #[serde(default, with = "opt_text", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub cidr: Option<IpNet>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

//! The `cilium.io/v2` `CiliumNode` in Cilium's wire format (`pkg/k8s/apis/cilium.io/v2/types.go`,
//! `pkg/ipam/types/types.go`): spec (addresses, cloud parts, `spec.ipam`) and status
//! (`status.ipam`, cloud status). Owns the JSON shape only; the allocators decide what goes in.
//!
//! Go's `omitempty` is mirrored for strings, numbers, maps and slices. Go writes struct-valued
//! fields (`eni`, `azure`, `ipam`, `pools`, `operator-status`, …) even when empty and humans often
//! leave them out, so those are `Option`s: whatever was read is written back, `{}` included.

use std::{collections::BTreeMap, sync::LazyLock};

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    azure::{AzureSpec, AzureStatus},
    eni::{EniSpec, EniStatus},
    ipam::{AllocationIp, IpamPoolSpec, ReleaseState},
    meta::{Extra, ObjectMeta, ObjectType, TypeMeta, is_zero},
};

/// A `CiliumNode` (cluster-scoped, one per node, named after the node).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CiliumNode {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// Object metadata (always written, as Go's `json:"metadata"`).
    #[serde(default)]
    #[schemars(schema_with = "super::schema::object_meta")]
    pub metadata: ObjectMeta,
    /// Desired state (always written).
    #[serde(default)]
    pub spec: NodeSpec,
    /// Observed state, written through the status subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

static EMPTY_IPAM_SPEC: LazyLock<IpamSpec> = LazyLock::new(IpamSpec::default);
static EMPTY_IPAM_STATUS: LazyLock<IpamStatus> = LazyLock::new(IpamStatus::default);

impl ObjectType for CiliumNode {
    const API_VERSION: &'static str = "cilium.io/v2";
    const KIND: &'static str = "CiliumNode";
}

impl CiliumNode {
    /// An empty `CiliumNode` named `name`, with `apiVersion` and `kind` set.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            types: TypeMeta::of::<Self>(),
            metadata: ObjectMeta {
                name: name.into(),
                ..ObjectMeta::default()
            },
            ..Self::default()
        }
    }

    /// `spec.ipam`, or an empty one when the object has none.
    #[must_use]
    pub fn ipam_spec(&self) -> &IpamSpec {
        self.spec.ipam.as_ref().unwrap_or(&EMPTY_IPAM_SPEC)
    }

    /// `spec.ipam`, created empty if missing.
    pub fn ipam_spec_mut(&mut self) -> &mut IpamSpec {
        self.spec.ipam.get_or_insert_with(IpamSpec::default)
    }

    /// `status.ipam`, or an empty one when the object has none.
    #[must_use]
    pub fn ipam_status(&self) -> &IpamStatus {
        self.status
            .as_ref()
            .and_then(|s| s.ipam.as_ref())
            .unwrap_or(&EMPTY_IPAM_STATUS)
    }

    /// `status.ipam`, created empty (with `status`) if missing.
    pub fn ipam_status_mut(&mut self) -> &mut IpamStatus {
        self.status
            .get_or_insert_with(NodeStatus::default)
            .ipam
            .get_or_insert_with(IpamStatus::default)
    }
}

/// `spec` of a `CiliumNode`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct NodeSpec {
    /// Cloud instance id (Azure: lower-cased provider id without `azure://`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_id: String,
    /// Boot id of the node.
    #[serde(rename = "bootid", default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
    /// Node addresses (`InternalIP`, `CiliumInternalIP`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<NodeAddress>,
    /// Health endpoint addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<AddressPair>,
    /// Ingress listener addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<AddressPair>,
    /// Encryption key index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionSpec>,
    /// AWS ENI configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eni: Option<EniSpec>,
    /// Azure configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureSpec>,
    /// `AlibabaCloud` configuration, kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::opaque_object")]
    pub alibaba_cloud: Option<Value>,
    /// Address management (`spec.ipam`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam: Option<IpamSpec>,
    /// Cilium numeric identity of the node.
    #[serde(rename = "nodeidentity", default, skip_serializing_if = "is_zero")]
    pub node_identity: u64,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `spec.addresses` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeAddress {
    /// `InternalIP`, `ExternalIP`, `CiliumInternalIP`, …
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub address_type: String,
    /// The address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.health` / `spec.ingress` (and a CiliumEndpoint's `status.networking.addressing[]`): an
/// IPv4 and/or IPv6 address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AddressPair {
    /// IPv4 address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv4: String,
    /// IPv6 address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv6: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.encryption`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EncryptionSpec {
    /// Key index, 0 when encryption is off.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub key: i64,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.ipam` (Cilium `IPAMSpec`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct IpamSpec {
    /// IP → allocation: addresses available to the node in `crd`/`azure`/`alibabacloud` modes.
    /// Keys stay strings: a key that is not an IP is ignored by consumers, not a decode error.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pool: BTreeMap<String, AllocationIp>,
    /// Declared by Cilium, never read by the agent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ipv6_pool: BTreeMap<String, AllocationIp>,
    /// Multi-pool demand and allocations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<IpamPoolSpec>,
    /// Pod CIDRs (cluster-pool, kubernetes); host bits are kept as written.
    #[serde(rename = "podCIDRs", default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::schema::cidr_list")]
    pub pod_cidrs: Vec<IpNet>,
    /// Minimum number of addresses the operator must provide before the agent starts.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_allocate: u32,
    /// Maximum number of addresses the operator may attach.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_allocate: u32,
    /// Free addresses to keep available.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pre_allocate: u32,
    /// Extra addresses allocated above the watermark.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_above_watermark: u32,
    /// Tags selecting a static IP (EIP / Azure public IP) for the operator to assign.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub static_ip_tags: BTreeMap<String, String>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

static EMPTY_POOLS: LazyLock<IpamPoolSpec> = LazyLock::new(IpamPoolSpec::default);

impl IpamSpec {
    /// `pools`, or an empty one when absent.
    #[must_use]
    pub fn pools(&self) -> &IpamPoolSpec {
        self.pools.as_ref().unwrap_or(&EMPTY_POOLS)
    }

    /// `pools`, created empty if missing.
    pub fn pools_mut(&mut self) -> &mut IpamPoolSpec {
        self.pools.get_or_insert_with(IpamPoolSpec::default)
    }
}

/// `status` of a `CiliumNode`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct NodeStatus {
    /// AWS ENI status (`enis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eni: Option<EniStatus>,
    /// Azure status (`interfaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureStatus>,
    /// IPAM status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam: Option<IpamStatus>,
    /// `AlibabaCloud` status, kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::opaque_object")]
    pub alibaba_cloud: Option<Value>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `status.ipam` (Cilium `IPAMStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct IpamStatus {
    /// Addresses in use (both families, CRD allocator).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub used: BTreeMap<String, AllocationIp>,
    /// Declared by Cilium, unused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ipv6_used: BTreeMap<String, AllocationIp>,
    /// Legacy cluster-pool-v2beta CIDR states, kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::opaque_object")]
    pub pod_cidrs: Option<Value>,
    /// Operator-reported error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_status: Option<OperatorStatus>,
    /// Release handshake for IPv4 addresses.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub release_ips: BTreeMap<String, ReleaseState>,
    /// Declared by Cilium; the agent never answers it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub release_ipv6s: BTreeMap<String, ReleaseState>,
    /// Static IP the operator assigned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub assigned_static_ip: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `status.ipam.operator-status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperatorStatus {
    /// Error message set by the operator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests;

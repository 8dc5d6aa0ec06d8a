//! The IPAM parts of a `CiliumNode` (`spec.ipam`, `status.ipam`) that both the allocators and the
//! stores handle (Cilium `pkg/ipam/types/types.go`).

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One address of `spec.ipam.pool` / `status.ipam.used`: `{"owner": …, "resource": …}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AllocationIp {
    /// `namespace/pod` (or `router`, `health`, …) that holds the address; empty when free.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// Cloud resource the address belongs to (ENI id, Azure interface id).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
}

/// State of an address in the `status.ipam.release-ips` handshake.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum ReleaseState {
    /// Operator: it wants to release the address.
    #[serde(rename = "marked-for-release")]
    MarkedForRelease,
    /// Agent: the address is unused, go ahead.
    #[serde(rename = "ready-for-release")]
    ReadyForRelease,
    /// Agent: the address is in use, keep it.
    #[serde(rename = "do-not-release")]
    DoNotRelease,
    /// Operator: the address is gone.
    #[serde(rename = "released")]
    Released,
}

impl ReleaseState {
    /// The wire string (`marked-for-release`, …).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MarkedForRelease => "marked-for-release",
            Self::ReadyForRelease => "ready-for-release",
            Self::DoNotRelease => "do-not-release",
            Self::Released => "released",
        }
    }
}

/// `spec.ipam.pools`: multi-pool demand (written by the agent) and allocations (operator).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IpamPoolSpec {
    /// What the agent asks for, sorted by pool name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested: Vec<IpamPoolRequest>,
    /// CIDRs the operator gave this node, per pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated: Vec<IpamPoolAllocation>,
}

/// One entry of `spec.ipam.pools.requested`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IpamPoolRequest {
    /// Pool name.
    pub pool: String,
    /// Addresses needed per family.
    #[serde(default)]
    pub needed: IpamPoolDemand,
}

/// `needed` of a pool request (omitempty ints, as Cilium writes them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IpamPoolDemand {
    /// IPv4 addresses needed.
    #[serde(rename = "ipv4-addrs", default, skip_serializing_if = "is_zero")]
    pub ipv4_addrs: u32,
    /// IPv6 addresses needed.
    #[serde(rename = "ipv6-addrs", default, skip_serializing_if = "is_zero")]
    pub ipv6_addrs: u32,
}

/// One entry of `spec.ipam.pools.allocated`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IpamPoolAllocation {
    /// Pool name.
    pub pool: String,
    /// The network address of each CIDR may be handed out.
    #[serde(rename = "allowFirstIP", default, skip_serializing_if = "is_false")]
    pub allow_first_ip: bool,
    /// The broadcast (last) address of each CIDR may be handed out.
    #[serde(rename = "allowLastIP", default, skip_serializing_if = "is_false")]
    pub allow_last_ip: bool,
    /// The CIDRs, as written (host bits are kept on the wire; consumers mask them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::schema::cidr_list")]
    pub cidrs: Vec<IpNet>,
}

/// The parts of a CiliumNode the agent owns, as IPAM wants them; `None` leaves a part as is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeIpamWrite {
    /// `status.ipam.used` (CRD-backed modes), both families.
    pub used: Option<std::collections::BTreeMap<String, AllocationIp>>,
    /// `status.ipam.release-ips` handshake answers (CRD-backed modes).
    pub release_ips: Option<std::collections::BTreeMap<String, ReleaseState>>,
    /// `spec.ipam.pools` (`requested` and `allocated`; multi-pool and eni).
    pub pools: Option<IpamPoolSpec>,
    /// The router addresses as the `spec.addresses` entries of type `CiliumInternalIP`
    /// (every other entry is kept).
    pub cilium_internal_ips: Option<Vec<std::net::IpAddr>>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if signature"
)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if signature"
)]
fn is_false(b: &bool) -> bool {
    !*b
}

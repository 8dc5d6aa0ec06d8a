//! AWS ENI parts of a `CiliumNode` (`spec.eni`, `status.eni.enis`; Cilium `pkg/aws/types`), in the
//! B wire format where addresses and CIDRs are typed, so an unparsable one fails decoding of the
//! whole object. Also owns the pure ENI pool accessor (spec §6.1) that turns `status.eni.enis`
//! into the `default` pool allocation. Nothing here touches links, routes or the cloud.

use std::{collections::BTreeMap, net::IpAddr};

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ipam::IpamPoolAllocation,
    meta::{Extra, is_zero, opt_text},
};

/// Pool the ENI accessor reports its addresses in (the literal `default`).
pub const ENI_POOL: &str = "default";

/// `spec.eni` (Cilium `ENISpec`, B fields; A's obsolete ones survive in `extra`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct EniSpec {
    /// EC2 instance type, e.g. `m5.large`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance_type: String,
    /// ENIs with a lower device index are not used for pod addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_interface_index: Option<i64>,
    /// Security groups for new ENIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<String>,
    /// Tags selecting security groups for new ENIs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub security_group_tags: BTreeMap<String, String>,
    /// Subnets new ENIs may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_ids: Vec<String>,
    /// Tags selecting subnets for new ENIs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subnet_tags: BTreeMap<String, String>,
    /// Subnet of the node's primary ENI.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_subnet_id: String,
    /// VPC of the node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vpc_id: String,
    /// Availability zone of the node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub availability_zone: String,
    /// ENIs carrying all of these tags are excluded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exclude_interface_tags: BTreeMap<String, String>,
    /// Delete new ENIs when the instance terminates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Hand out the ENIs' primary addresses too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_primary_address: Option<bool>,
    /// Do not use /28 prefix delegation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_prefix_delegation: Option<bool>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `status.eni`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EniStatus {
    /// ENIs by ENI id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub enis: BTreeMap<String, Eni>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `status.eni.enis` value (Cilium `ENI`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Eni {
    /// ENI id (`eni-…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Primary address.
    #[serde(default, with = "opt_text", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub ip: Option<IpAddr>,
    /// MAC address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// Availability zone.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub availability_zone: String,
    /// Description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Device index (routing table `10 + number`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub number: i64,
    /// Subnet of the ENI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<AwsSubnet>,
    /// VPC of the ENI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc: Option<AwsVpc>,
    /// Secondary addresses (plus those expanded from prefixes, plus the primary when
    /// `use-primary-address`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub addresses: Vec<IpAddr>,
    /// Delegated IPv4 /28 prefixes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub prefixes: Vec<IpNet>,
    /// Delegated IPv6 /80 prefixes (ignored by the B accessor).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub ipv6_prefixes: Vec<IpNet>,
    /// Security groups of the ENI.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<String>,
    /// Tags of the ENI.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Public address of the ENI.
    #[serde(default, with = "opt_text", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub public_ip: Option<IpAddr>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Eni {
    /// Cilium's `ENI.IsExcludedBySpec`: the device index is below `first-interface-index`, or
    /// `exclude-interface-tags` is non-empty and every one of its tags matches (a missing tag
    /// reads as `""`, as in Go).
    #[must_use]
    pub fn is_excluded_by_spec(&self, spec: &EniSpec) -> bool {
        if spec
            .first_interface_index
            .is_some_and(|first| self.number < first)
        {
            return true;
        }
        !spec.exclude_interface_tags.is_empty()
            && spec
                .exclude_interface_tags
                .iter()
                .all(|(key, value)| self.tags.get(key).map_or("", String::as_str) == value.as_str())
    }
}

/// `subnet` of an ENI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AwsSubnet {
    /// Subnet id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Subnet CIDR (the gateway is its network address + 1).
    #[serde(default, with = "opt_text", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub cidr: Option<IpNet>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `vpc` of an ENI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct AwsVpc {
    /// VPC id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Primary VPC CIDR.
    #[serde(default, with = "opt_text", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub primary_cidr: Option<IpNet>,
    /// Further VPC CIDRs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub cidrs: Vec<IpNet>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The ENI pool accessor of spec §6.1: the `default` pool allocation derived from
/// `status.eni.enis` (`allowFirstIP` and `allowLastIP` set). Excluded ENIs are skipped; each
/// prefix is taken as written; each address not inside one of its own ENI's prefixes becomes a
/// host prefix (/32, /128). ENIs are visited in id order. `None` when nothing was collected, in
/// which case the caller keeps the spec's `allocated`.
#[must_use]
pub fn eni_allocated(
    spec: Option<&EniSpec>,
    status: Option<&EniStatus>,
) -> Option<IpamPoolAllocation> {
    let no_spec = EniSpec::default();
    let spec = spec.unwrap_or(&no_spec);
    let mut cidrs = Vec::new();
    for eni in status?
        .enis
        .values()
        .filter(|eni| !eni.is_excluded_by_spec(spec))
    {
        cidrs.extend(eni.prefixes.iter().copied());
        cidrs.extend(
            eni.addresses
                .iter()
                .filter(|addr| !eni.prefixes.iter().any(|prefix| prefix.contains(*addr)))
                .map(|addr| IpNet::from(*addr)),
        );
    }
    (!cidrs.is_empty()).then(|| IpamPoolAllocation {
        pool: ENI_POOL.to_owned(),
        allow_first_ip: true,
        allow_last_ip: true,
        cidrs,
    })
}

#[cfg(test)]
mod tests;

//! What the ENI allocator knows of the node's network (subnets, route tables, security
//! groups, as the instances cache holds them) and the choices Cilium makes from it for a new
//! ENI: the subnet, the security groups and the device index. Pure: the cache fills these
//! types from EC2's answers; nothing here calls EC2.
//!
//! Beyond Cilium, a subnet without a free address is never chosen, and when no subnet fits the
//! error lists every subnet of the node's VPC with why it was passed over.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;
use weft_k8s::crd::eni::{Eni, EniSpec};

/// A subnet as the instances cache holds it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subnet {
    /// `subnetId`.
    pub id: String,
    /// `cidrBlock`.
    pub cidr: Option<IpNet>,
    /// `availabilityZone`.
    pub availability_zone: String,
    /// `vpcId`.
    pub vpc_id: String,
    /// `availableIpAddressCount`.
    pub available: u64,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

/// A route table: the subnets explicitly associated with it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteTable {
    /// `routeTableId`.
    pub id: String,
    /// `vpcId`.
    pub vpc_id: String,
    /// Subnets with an `associated` association.
    pub subnets: BTreeSet<String>,
}

/// A security group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityGroup {
    /// `groupId`.
    pub id: String,
    /// Its VPC.
    pub vpc_id: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

/// The network the choices are made in.
#[derive(Debug, Clone, Copy)]
pub struct Network<'a> {
    /// Subnets by ID.
    pub subnets: &'a BTreeMap<String, Subnet>,
    /// Route tables.
    pub route_tables: &'a [RouteTable],
    /// Security groups by ID.
    pub security_groups: &'a BTreeMap<String, SecurityGroup>,
}

/// How a subnet was found (Cilium's order; the first rule that finds one wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubnetRule {
    /// One of `spec.eni.subnet-ids`.
    Listed,
    /// Carries all of `spec.eni.subnet-tags`.
    Tagged,
    /// The node's own subnet (`spec.eni.node-subnet-id`), with room for a whole ENI.
    NodeSubnet,
    /// Shares a route table with the node's subnet.
    RouteTable,
    /// Any subnet of the node's VPC and zone.
    AnyInZone,
}

/// The subnet chosen for a new ENI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetChoice {
    /// The subnet.
    pub subnet: Subnet,
    /// The rule that found it.
    pub rule: SubnetRule,
    /// Whether it shares a route table with the node's subnet (a listed, tagged or any-zone
    /// subnet that does not may not route the pods' traffic: warn).
    pub shares_route_table: bool,
}

/// Why a subnet of the node's VPC was passed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passed {
    /// In another availability zone.
    OtherZone,
    /// No free address (any subnet of the zone with one would have been chosen).
    Exhausted,
}

impl std::fmt::Display for Passed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OtherZone => "another availability zone",
            Self::Exhausted => "no free address",
        })
    }
}

/// No subnet fits the node (Cilium's text, then each subnet of the VPC and why it was passed
/// over).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "No matching subnet available for interface creation (VPC={vpc} AZ={zone} SubnetIDs={ids:?} \
     SubnetTags={tags:?}){}",
    considered_text(.considered)
)]
pub struct NoSubnet {
    /// `spec.eni.vpc-id`.
    pub vpc: String,
    /// `spec.eni.availability-zone`.
    pub zone: String,
    /// `spec.eni.subnet-ids`.
    pub ids: Vec<String>,
    /// `spec.eni.subnet-tags`.
    pub tags: BTreeMap<String, String>,
    /// Each subnet of the VPC and why it was passed over.
    pub considered: Vec<(String, Passed)>,
}

fn considered_text(considered: &[(String, Passed)]) -> String {
    if considered.is_empty() {
        return "; the VPC has no subnet in the cache".to_owned();
    }
    let each: Vec<String> = considered
        .iter()
        .map(|(id, why)| format!("{id}: {why}"))
        .collect();
    format!("; considered {}", each.join(", "))
}

/// `spec.eni.subnet-ids` names subnets the cache does not hold (Cilium would pass over them
/// and create the ENI elsewhere).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "spec.eni.subnet-ids: {unknown:?} not among the subnets EC2 lists in the operator's scope \
     (a typo, another VPC or region, or left out by --subnet-ids-filter/--subnet-tags-filter); \
     no ENI is created elsewhere"
)]
pub struct UnknownSubnets {
    /// The IDs not in the cache.
    pub unknown: Vec<String>,
}

/// No security group for a new ENI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to get security groups: failed to get security group ids")]
pub struct NoSecurityGroups;

/// Whether `tags` carries every one of `wanted`.
#[must_use]
pub fn tags_match(tags: &BTreeMap<String, String>, wanted: &BTreeMap<String, String>) -> bool {
    wanted.iter().all(|(k, v)| tags.get(k) == Some(v))
}

impl Network<'_> {
    /// The subnets explicitly associated with a route table of `vpc` that `subnet` is
    /// associated with too.
    fn route_table_peers(&self, vpc: &str, subnet: &str) -> BTreeSet<&str> {
        self.route_tables
            .iter()
            .filter(|t| t.vpc_id == vpc && t.subnets.contains(subnet))
            .flat_map(|t| t.subnets.iter().map(String::as_str))
            .collect()
    }

    /// `spec.eni.subnet-ids` the cache does not hold.
    ///
    /// # Errors
    /// [`UnknownSubnets`] naming them.
    pub fn check_subnet_ids(&self, spec: &EniSpec) -> Result<(), UnknownSubnets> {
        let unknown: Vec<String> = (spec.subnet_ids.iter())
            .filter(|id| !self.subnets.contains_key(*id))
            .cloned()
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(UnknownSubnets { unknown })
        }
    }

    /// The subnet for a new ENI of the node `spec` describes, needing room for `ipv4_limit`
    /// addresses when it is the node's own subnet.
    ///
    /// # Errors
    /// [`NoSubnet`] when no rule finds a subnet with a free address.
    pub fn choose_subnet(&self, spec: &EniSpec, ipv4_limit: u64) -> Result<SubnetChoice, NoSubnet> {
        let vpc = spec.vpc_id.as_str();
        let zone = spec.availability_zone.as_str();
        let peers = self.route_table_peers(vpc, &spec.node_subnet_id);
        let in_zone = |s: &&Subnet| s.vpc_id == vpc && s.availability_zone == zone;
        let usable = |s: &&Subnet| in_zone(s) && s.available > 0;
        let most_free = |found: Vec<&Subnet>, rule| {
            found
                .into_iter()
                .max_by(|a, b| a.available.cmp(&b.available).then(b.id.cmp(&a.id)))
                .map(|s| SubnetChoice {
                    subnet: s.clone(),
                    rule,
                    shares_route_table: peers.contains(s.id.as_str()),
                })
        };
        let listed: Vec<&Subnet> = (spec.subnet_ids.iter())
            .filter_map(|id| self.subnets.get(id))
            .filter(usable)
            .collect();
        let tagged: Vec<&Subnet> = if spec.subnet_tags.is_empty() {
            Vec::new()
        } else {
            (self.subnets.values())
                .filter(usable)
                .filter(|s| tags_match(&s.tags, &spec.subnet_tags))
                .collect()
        };
        let node_subnet: Vec<&Subnet> = (self.subnets.get(&spec.node_subnet_id))
            .filter(|s| s.available > 0 && s.available >= ipv4_limit)
            .into_iter()
            .collect();
        let routed: Vec<&Subnet> = (self.subnets.values())
            .filter(usable)
            .filter(|s| s.id != spec.node_subnet_id && peers.contains(s.id.as_str()))
            .collect();
        let any: Vec<&Subnet> = self.subnets.values().filter(usable).collect();
        most_free(listed, SubnetRule::Listed)
            .or_else(|| most_free(tagged, SubnetRule::Tagged))
            .or_else(|| most_free(node_subnet, SubnetRule::NodeSubnet))
            .or_else(|| most_free(routed, SubnetRule::RouteTable))
            .or_else(|| most_free(any, SubnetRule::AnyInZone))
            .ok_or_else(|| NoSubnet {
                vpc: vpc.to_owned(),
                zone: zone.to_owned(),
                ids: spec.subnet_ids.clone(),
                tags: spec.subnet_tags.clone(),
                considered: (self.subnets.values())
                    .filter(|s| s.vpc_id == vpc)
                    .map(|s| {
                        let why = if s.availability_zone == zone {
                            Passed::Exhausted
                        } else {
                            Passed::OtherZone
                        };
                        (s.id.clone(), why)
                    })
                    .collect(),
            })
    }

    /// The security groups of a new ENI: `spec.eni.security-groups` as given; else the
    /// groups of the node's VPC carrying all `security-group-tags` (sorted); else (none
    /// tagged, `warn` is told) the groups of the device-0 ENI (sorted).
    ///
    /// # Errors
    /// [`NoSecurityGroups`] when all three are empty.
    pub fn choose_security_groups(
        &self,
        spec: &EniSpec,
        enis: &BTreeMap<String, Eni>,
        mut warn: impl FnMut(&BTreeMap<String, String>),
    ) -> Result<Vec<String>, NoSecurityGroups> {
        if !spec.security_groups.is_empty() {
            return Ok(spec.security_groups.clone());
        }
        if !spec.security_group_tags.is_empty() {
            let tagged: Vec<String> = (self.security_groups.values())
                .filter(|g| g.vpc_id == spec.vpc_id)
                .filter(|g| tags_match(&g.tags, &spec.security_group_tags))
                .map(|g| g.id.clone())
                .collect();
            if !tagged.is_empty() {
                return Ok(tagged);
            }
            warn(&spec.security_group_tags);
        }
        let mut primary: Vec<String> = (enis.values())
            .find(|e| e.number == 0)
            .map(|e| e.security_groups.clone())
            .unwrap_or_default();
        primary.sort();
        if primary.is_empty() {
            return Err(NoSecurityGroups);
        }
        Ok(primary)
    }
}

/// The lowest device index at or above `first` that no ENI of the instance uses.
#[must_use]
pub fn free_device_index(enis: &BTreeMap<String, Eni>, first: u64) -> u64 {
    let used: BTreeSet<u64> = (enis.values())
        .filter_map(|e| u64::try_from(e.number).ok())
        .collect();
    // One of the first `used.len() + 1` indexes from `first` is free.
    let last = first.saturating_add(u64::try_from(used.len()).unwrap_or(u64::MAX));
    (first..=last).find(|i| !used.contains(i)).unwrap_or(last)
}

#[cfg(test)]
mod tests;

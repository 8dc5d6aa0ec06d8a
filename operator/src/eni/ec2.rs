//! The EC2 client as the instances cache's [`Inventory`] and the allocator's [`Ec2Ops`]: the
//! listings of a full resync scoped as Cilium scopes them (the VPC, the subnet and instance
//! filters), and the answers turned into the cache's terms (Cilium's `parseENI`: every private
//! address and the 16 addresses of every /28, the subnet's and VPC's CIDRs from the network).
//! An ENI or subnet EC2 describes with an address that does not parse is logged and skipped,
//! where Cilium fails the whole resync.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr},
};

use ipnet::{IpNet, Ipv4Net};
use tracing::warn;
use weft_k8s::crd::eni::{AwsSubnet, AwsVpc, Eni};

use super::{
    api::{
        AddressRelease, AddressRequest, CreateInterface, Ec2Api, Ec2Error, Filter,
        model::{self, NetworkInterface},
    },
    instances::{Assigned, AttachedEni, Inventory, NetworkState, Vpc},
    limits::{Limits, PD_BLOCK},
    ops::{Classify, Ec2Ops, NewEni, Size},
    vpc::{RouteTable, SecurityGroup, Subnet},
};

impl Classify for Ec2Error {
    fn is_transient(&self) -> bool {
        self.is_retriable()
    }
    fn is_unauthorized(&self) -> bool {
        Self::is_unauthorized(self)
    }
    fn is_prefix_capacity(&self) -> bool {
        Self::is_prefix_capacity(self)
    }
    fn is_index_conflict(&self) -> bool {
        Self::is_index_conflict(self)
    }
    fn is_not_running(&self) -> bool {
        Self::is_not_running(self)
    }
}

/// What a full resync reads (`--aws-vpc-id`, `--subnet-ids-filter`, `--subnet-tags-filter`,
/// `--instance-tags-filter`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The operator's VPC (empty: every VPC).
    pub vpc_id: String,
    /// Only these subnets.
    pub subnet_ids: Vec<String>,
    /// Only subnets with these tags.
    pub subnet_tags: BTreeMap<String, String>,
    /// Only instances with these tags.
    pub instance_tags: BTreeMap<String, String>,
}

/// The EC2 client `A` over `scope`.
#[derive(Debug)]
pub struct Ec2Inventory<A> {
    /// The client.
    pub api: A,
    /// The full resync's scope.
    pub scope: Scope,
}

fn cidr(text: &str) -> Option<IpNet> {
    text.trim().parse().ok()
}

/// The 16 addresses of an IPv4 /28 (the prefix as EC2 printed it).
fn prefix_addresses(prefix: &IpNet) -> Vec<IpAddr> {
    match prefix {
        IpNet::V4(v4) => {
            let base = u32::from(v4.network());
            (0..u32::try_from(PD_BLOCK).unwrap_or(16))
                .map(|i| IpAddr::V4(Ipv4Addr::from(base.wrapping_add(i))))
                .collect()
        }
        IpNet::V6(_) => Vec::new(),
    }
}

/// An ENI in the cache's terms, or why it is skipped.
fn parse_eni(ni: &NetworkInterface, network: &NetworkState) -> Option<Eni> {
    let skip = |what: &str| {
        warn!(eni = %ni.id, "EC2 described an ENI with {what}; skipping it until it reads well");
        None
    };
    let Some(primary) = ni
        .primary_ip
        .as_deref()
        .and_then(|p| p.parse::<IpAddr>().ok())
    else {
        return skip("no usable primary address (privateIpAddress)");
    };
    let mut addresses = Vec::with_capacity(ni.private_ips.len());
    for text in &ni.private_ips {
        let Ok(address) = text.parse::<IpAddr>() else {
            return skip("a private address that does not parse");
        };
        addresses.push(address);
    }
    let mut prefixes = Vec::with_capacity(ni.ipv4_prefixes.len());
    for text in &ni.ipv4_prefixes {
        let Some(prefix) = text.parse::<Ipv4Net>().ok().map(IpNet::V4) else {
            return skip("an IPv4 prefix that does not parse");
        };
        for address in prefix_addresses(&prefix) {
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
        prefixes.push(prefix);
    }
    let vpc = network.vpcs.get(&ni.vpc_id);
    let attachment = ni.attachment.as_ref();
    Some(Eni {
        id: ni.id.clone(),
        ip: Some(primary),
        mac: ni.mac.clone(),
        description: ni.description.clone(),
        number: attachment.and_then(|a| a.device_index).map_or(0, i64::from),
        subnet: Some(AwsSubnet {
            id: ni.subnet_id.clone(),
            cidr: network.subnets.get(&ni.subnet_id).and_then(|s| s.cidr),
            ..AwsSubnet::default()
        }),
        vpc: Some(AwsVpc {
            id: ni.vpc_id.clone(),
            primary_cidr: vpc.and_then(|v| v.primary_cidr),
            cidrs: vpc.map(|v| v.cidrs.clone()).unwrap_or_default(),
            ..AwsVpc::default()
        }),
        addresses,
        prefixes,
        ipv6_prefixes: ni.ipv6_prefixes.iter().filter_map(|p| cidr(p)).collect(),
        security_groups: ni.security_groups.clone(),
        tags: ni.tags.clone(),
        public_ip: ni.public_ip.as_deref().and_then(|p| p.parse().ok()),
        ..Eni::default()
    })
}

fn parse_network(
    vpcs: Vec<model::Vpc>,
    subnets: Vec<model::Subnet>,
    tables: Vec<model::RouteTable>,
    groups: Vec<model::SecurityGroup>,
) -> NetworkState {
    let mut network = NetworkState::default();
    for vpc in vpcs {
        let primary_cidr = cidr(&vpc.primary_cidr);
        let cidrs = (vpc.cidrs.iter())
            .filter_map(|c| cidr(c))
            .filter(|c| Some(*c) != primary_cidr)
            .collect();
        network.vpcs.insert(
            vpc.id.clone(),
            Vpc {
                id: vpc.id,
                primary_cidr,
                cidrs,
            },
        );
    }
    for subnet in subnets {
        let Some(parsed) = cidr(&subnet.cidr) else {
            warn!(subnet = %subnet.id, cidr = %subnet.cidr, "EC2 described a subnet whose CIDR does not parse; skipping it");
            continue;
        };
        network.subnets.insert(
            subnet.id.clone(),
            Subnet {
                id: subnet.id,
                cidr: Some(parsed),
                availability_zone: subnet.availability_zone,
                vpc_id: subnet.vpc_id,
                available: u64::try_from(subnet.available_addresses).unwrap_or(0),
                tags: subnet.tags,
            },
        );
    }
    network.route_tables = (tables.into_iter())
        .map(|t| RouteTable {
            id: t.id,
            vpc_id: t.vpc_id,
            subnets: (t.associations.into_iter())
                .filter(|a| a.state.as_deref() == Some("associated"))
                .filter_map(|a| a.subnet_id)
                .collect(),
        })
        .collect();
    network.security_groups = (groups.into_iter())
        .map(|g| {
            (
                g.id.clone(),
                SecurityGroup {
                    id: g.id,
                    vpc_id: g.vpc_id,
                    tags: g.tags,
                },
            )
        })
        .collect();
    network
}

/// The ENIs of `interfaces` attached to an instance, in the cache's terms.
fn attached(interfaces: &[NetworkInterface], network: &NetworkState) -> Vec<AttachedEni> {
    (interfaces.iter())
        .filter_map(|ni| {
            let instance = ni.attachment.as_ref()?.instance_id.clone()?;
            Some(AttachedEni {
                instance,
                eni: parse_eni(ni, network)?,
            })
        })
        .collect()
}

impl<A: Ec2Api + 'static> Ec2Inventory<A> {
    fn vpc(&self) -> Option<&str> {
        Some(self.scope.vpc_id.as_str()).filter(|v| !v.is_empty())
    }
}

impl<A: Ec2Api + 'static> Inventory for Ec2Inventory<A> {
    type Error = Ec2Error;

    async fn network(&self) -> Result<NetworkState, Ec2Error> {
        let vpc = self.vpc();
        let vpcs = self.api.describe_vpcs(vpc).await?;
        let mut subnet_filters = Filter::tags(&self.scope.subnet_tags);
        if !self.scope.subnet_ids.is_empty() {
            subnet_filters.push(Filter::new("subnet-id", &self.scope.subnet_ids));
        }
        let vpc_filter: Vec<Filter> = vpc
            .map(|v| Filter::new("vpc-id", [v]))
            .into_iter()
            .collect();
        subnet_filters.extend(vpc_filter.iter().cloned());
        let subnets = self.api.describe_subnets(&subnet_filters).await?;
        let groups = self.api.security_groups(vpc).await?;
        let tables = self.api.describe_route_tables(&vpc_filter).await?;
        Ok(parse_network(vpcs, subnets, tables, groups))
    }

    async fn enis(&self, network: &NetworkState) -> Result<Vec<AttachedEni>, Ec2Error> {
        let mut filters = vec![Filter::new("private-ip-address", ["*"])];
        if !self.scope.subnet_ids.is_empty() || !self.scope.subnet_tags.is_empty() {
            filters.push(Filter::new("subnet-id", network.subnets.keys()));
        }
        let interfaces = if self.scope.instance_tags.is_empty() {
            self.api.describe_network_interfaces(&[], &filters).await?
        } else {
            let instances = (self.api)
                .describe_instances(&Filter::tags(&self.scope.instance_tags))
                .await?;
            let ids: Vec<String> = instances
                .into_iter()
                .flat_map(|i| i.interface_ids)
                .collect();
            // Cilium lists every ENI when no instance matches; weft lists none (the filter
            // says which instances are the operator's).
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            (self.api)
                .describe_network_interfaces(&ids, &[Filter::new("private-ip-address", ["*"])])
                .await?
        };
        Ok(attached(&interfaces, network))
    }

    async fn instance_enis(
        &self,
        instance: &str,
        network: &NetworkState,
    ) -> Result<Vec<Eni>, Ec2Error> {
        let filters = [Filter::new("attachment.instance-id", [instance])];
        let interfaces = self.api.describe_network_interfaces(&[], &filters).await?;
        Ok(attached(&interfaces, network)
            .into_iter()
            .filter(|a| a.instance == instance)
            .map(|a| a.eni)
            .collect())
    }

    async fn instance_types(&self) -> Result<BTreeMap<String, Limits>, Ec2Error> {
        let types = self.api.describe_instance_types().await?;
        Ok(types
            .into_iter()
            .map(|t| {
                (
                    t.instance_type,
                    Limits {
                        adapters: t.max_interfaces,
                        ipv4: t.ipv4_per_interface,
                        ipv6: t.ipv6_per_interface,
                        hypervisor: t.hypervisor,
                        bare_metal: t.bare_metal,
                    },
                )
            })
            .collect())
    }
}

/// The answer of an assignment in the cache's terms; empty when an entry does not parse.
fn assigned(eni: &str, listed: &[String]) -> Assigned {
    let mut out = Assigned::default();
    for text in listed {
        if let Some(prefix) = text.contains('/').then(|| cidr(text)).flatten() {
            out.addresses.extend(prefix_addresses(&prefix));
            out.prefixes.push(prefix);
        } else if let Ok(address) = text.trim().parse::<IpAddr>() {
            out.addresses.push(address);
        } else {
            warn!(%eni, entry = %text, "an AssignPrivateIpAddresses answer lists an entry that does not parse; the instance is read again");
            return Assigned::default();
        }
    }
    out
}

fn request(size: Size) -> Option<AddressRequest> {
    let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    match size {
        Size::Addresses(0) | Size::Prefixes(0) => None,
        Size::Addresses(n) => Some(AddressRequest::Secondary(count(n))),
        Size::Prefixes(n) => Some(AddressRequest::Prefixes(count(n))),
    }
}

impl<A: Ec2Api + 'static> Ec2Ops for Ec2Inventory<A> {
    async fn assign(&self, eni: &str, size: Size) -> Result<Assigned, Ec2Error> {
        let Some(request) = request(size) else {
            return Ok(Assigned::default());
        };
        let listed = self.api.assign_private_ip_addresses(eni, request).await?;
        Ok(assigned(eni, &listed))
    }

    async fn unassign(
        &self,
        eni: &str,
        addresses: &[IpAddr],
        prefixes: &[IpNet],
    ) -> Result<(), Ec2Error> {
        if !prefixes.is_empty() {
            let release =
                AddressRelease::Prefixes(prefixes.iter().map(ToString::to_string).collect());
            self.api
                .unassign_private_ip_addresses(eni, &release)
                .await?;
        }
        if !addresses.is_empty() {
            let release = AddressRelease::Ips(addresses.iter().map(ToString::to_string).collect());
            self.api
                .unassign_private_ip_addresses(eni, &release)
                .await?;
        }
        Ok(())
    }

    async fn assign_ipv6_prefix(&self, eni: &str) -> Result<(), Ec2Error> {
        self.api.assign_ipv6_prefix(eni).await
    }

    async fn create(&self, eni: &NewEni, network: &NetworkState) -> Result<Eni, Ec2Error> {
        let created = self
            .api
            .create_network_interface(&CreateInterface {
                subnet_id: eni.subnet.clone(),
                description: eni.description.clone(),
                security_groups: eni.security_groups.clone(),
                addresses: request(eni.size),
                ipv6_prefix: eni.ipv6_prefix,
                tags: eni.tags.clone(),
                client_token: Some(eni.client_token.clone()),
            })
            .await?;
        // An answer without a usable primary address still names the ENI: keep its ID so the
        // caller can attach it or delete it.
        Ok(parse_eni(&created, network).unwrap_or_else(|| Eni {
            id: created.id.clone(),
            ..Eni::default()
        }))
    }

    async fn attach(&self, eni: &str, instance: &str, index: u64) -> Result<String, Ec2Error> {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        self.api
            .attach_network_interface(eni, instance, index)
            .await
    }

    async fn delete_on_termination(&self, eni: &str, attachment: &str) -> Result<(), Ec2Error> {
        self.api.set_delete_on_termination(eni, attachment).await
    }

    async fn delete(&self, eni: &str) -> Result<(), Ec2Error> {
        self.api.delete_network_interface(eni).await
    }

    async fn free_elastic_ips(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, IpAddr)>, Ec2Error> {
        let addresses = self.api.describe_addresses(&Filter::tags(tags)).await?;
        Ok(addresses
            .into_iter()
            .filter(|a| a.association_id.as_deref().is_none_or(str::is_empty))
            .filter_map(|a| Some((a.allocation_id, a.public_ip.parse().ok()?)))
            .collect())
    }

    async fn detached(
        &self,
        tags: &BTreeMap<String, String>,
        subnets: &[String],
    ) -> Result<Vec<String>, Ec2Error> {
        let mut filters = Filter::tags(tags);
        filters.push(Filter::new("status", ["available"]));
        if !subnets.is_empty() {
            filters.push(Filter::new("subnet-id", subnets));
        }
        let found = self.api.describe_network_interfaces(&[], &filters).await?;
        Ok(found.into_iter().map(|ni| ni.id).collect())
    }

    async fn associate(&self, allocation: &str, eni: &str) -> Result<(), Ec2Error> {
        self.api.associate_address(allocation, eni).await.map(drop)
    }
}

#[cfg(test)]
mod tests;

//! The emulated estate in memory: VPCs, subnets with their address accounting
//! ([`subnet`]), route tables, security groups, the instance-type catalogue, instances, ENIs
//! with their attachments, addresses and prefixes, Elastic IPs, and `ClientToken`s seen. Built
//! from a [`Scenario`]; changed by the mutating actions ([`enis`], [`addresses`]). Knows nothing of HTTP or
//! XML.

pub mod addresses;
pub mod enis;
pub mod subnet;

use std::{
    collections::{BTreeMap, HashMap},
    net::Ipv4Addr,
    time::SystemTime,
};

use ipnet::{Ipv4Net, Ipv6Net};

pub use self::subnet::Subnet;
use super::{
    error::Ec2Error,
    scenario::{InstanceTypeSpec, Scenario, ScenarioError, Tags},
};

/// A VPC.
#[derive(Clone, Debug)]
pub struct Vpc {
    /// `vpc-…`.
    pub id: String,
    /// Primary CIDR.
    pub cidr: Ipv4Net,
    /// Further CIDRs.
    pub extra_cidrs: Vec<Ipv4Net>,
    /// Tags.
    pub tags: Tags,
}

/// A route table.
#[derive(Clone, Debug)]
pub struct RouteTable {
    /// `rtb-…`.
    pub id: String,
    /// Its VPC.
    pub vpc: String,
    /// Explicitly associated subnets.
    pub subnets: Vec<String>,
    /// The VPC's main table.
    pub main: bool,
}

/// A security group.
#[derive(Clone, Debug)]
pub struct SecurityGroup {
    /// `sg-…`.
    pub id: String,
    /// Its VPC.
    pub vpc: String,
    /// `groupName`.
    pub name: String,
    /// Tags.
    pub tags: Tags,
}

/// An instance.
#[derive(Clone, Debug)]
pub struct Instance {
    /// `i-…`.
    pub id: String,
    /// Its instance type.
    pub type_name: String,
    /// The primary ENI's subnet.
    pub subnet: String,
    /// Its VPC.
    pub vpc: String,
    /// Its AZ.
    pub az: String,
    /// Tags.
    pub tags: Tags,
    /// Running.
    pub running: bool,
}

/// An ENI's attachment.
#[derive(Clone, Debug)]
pub struct Attachment {
    /// `eni-attach-…`.
    pub id: String,
    /// The instance.
    pub instance: String,
    /// Device index.
    pub device_index: u32,
    /// Deleted with the instance.
    pub delete_on_termination: bool,
    /// When.
    pub time: SystemTime,
}

/// An Elastic IP's association with an ENI.
#[derive(Clone, Debug)]
pub struct Association {
    /// `eipassoc-…`.
    pub id: String,
    /// `eipalloc-…`.
    pub allocation_id: String,
    /// The public address.
    pub public_ip: Ipv4Addr,
}

/// A network interface.
#[derive(Clone, Debug)]
pub struct Eni {
    /// `eni-…`.
    pub id: String,
    /// Its subnet.
    pub subnet: String,
    /// Its VPC.
    pub vpc: String,
    /// Its AZ.
    pub az: String,
    /// `description`.
    pub description: String,
    /// `macAddress`.
    pub mac: String,
    /// Private addresses, the primary first.
    pub ips: Vec<Ipv4Addr>,
    /// IPv4 /28 prefixes.
    pub prefixes: Vec<Ipv4Net>,
    /// IPv6 /80 prefixes.
    pub ipv6_prefixes: Vec<Ipv6Net>,
    /// Security groups.
    pub groups: Vec<String>,
    /// Tags.
    pub tags: Tags,
    /// Attachment, if attached.
    pub attachment: Option<Attachment>,
    /// Elastic IP association, if any.
    pub association: Option<Association>,
}

impl Eni {
    /// `in-use` or `available`.
    #[must_use]
    pub fn status(&self) -> &'static str {
        if self.attachment.is_some() {
            "in-use"
        } else {
            "available"
        }
    }

    /// Address slots used: private addresses (primary included) plus prefixes.
    #[must_use]
    pub fn slots(&self) -> u32 {
        u32::try_from(self.ips.len() + self.prefixes.len()).unwrap_or(u32::MAX)
    }
}

/// An Elastic IP.
#[derive(Clone, Debug)]
pub struct Eip {
    /// `eipalloc-…`.
    pub allocation_id: String,
    /// The public address.
    pub public_ip: Ipv4Addr,
    /// Tags.
    pub tags: Tags,
    /// The ENI it is associated with and the association id.
    pub association: Option<(String, String)>,
}

/// The estate.
#[derive(Debug)]
pub struct Model {
    /// Account id.
    pub account: String,
    /// Region.
    pub region: String,
    /// VPCs.
    pub vpcs: Vec<Vpc>,
    /// Subnets by id.
    pub subnets: BTreeMap<String, Subnet>,
    /// Route tables.
    pub route_tables: Vec<RouteTable>,
    /// Security groups.
    pub groups: Vec<SecurityGroup>,
    /// Instance types by name.
    pub types: BTreeMap<String, InstanceTypeSpec>,
    /// Instances by id.
    pub instances: BTreeMap<String, Instance>,
    /// ENIs by id.
    pub enis: BTreeMap<String, Eni>,
    /// Elastic IPs.
    pub eips: Vec<Eip>,
    /// `ClientToken` → (the request's other parameters, the ENI created).
    pub client_tokens: HashMap<String, (String, String)>,
    /// Listings without `MaxResults` longer than this are refused.
    pub unpaged_limit: Option<usize>,
    /// Most address slots on a detached ENI.
    pub unattached_limit: u32,
    /// DescribeInstanceTypes' page without `MaxResults`.
    pub types_page: u32,
    next_id: u64,
}

fn inconsistent(what: String) -> ScenarioError {
    ScenarioError::Inconsistent { what }
}

impl Model {
    /// The estate a scenario describes.
    ///
    /// # Errors
    /// A reference to something the scenario does not have, a duplicate id, a full subnet.
    pub fn new(s: &Scenario) -> Result<Self, ScenarioError> {
        let mut m = Self {
            account: s.account_id.clone(),
            region: s.region.clone(),
            vpcs: s
                .vpcs
                .iter()
                .map(|v| Vpc {
                    id: v.id.clone(),
                    cidr: v.cidr,
                    extra_cidrs: v.extra_cidrs.clone(),
                    tags: v.tags.clone(),
                })
                .collect(),
            subnets: BTreeMap::new(),
            route_tables: Vec::new(),
            groups: Vec::new(),
            types: s
                .instance_types
                .iter()
                .map(|t| (t.name.clone(), t.clone()))
                .collect(),
            instances: BTreeMap::new(),
            enis: BTreeMap::new(),
            eips: Vec::new(),
            client_tokens: HashMap::new(),
            unpaged_limit: s.unpaged_limit,
            unattached_limit: s.unattached_ipv4_limit,
            types_page: s.instance_types_page_size.max(1),
            next_id: 0x1_0000,
        };
        for sn in &s.subnets {
            m.vpc(&sn.vpc)
                .map_err(|_| inconsistent(format!("subnet {}: no VPC {}", sn.id, sn.vpc)))?;
            let subnet = Subnet::new(
                sn.id.clone(),
                sn.vpc.clone(),
                sn.cidr,
                sn.az.clone(),
                sn.tags.clone(),
                sn.ipv6_cidr,
            );
            if m.subnets.insert(sn.id.clone(), subnet).is_some() {
                return Err(inconsistent(format!("subnet {} twice", sn.id)));
            }
        }
        for rt in &s.route_tables {
            for sn in &rt.subnets {
                if !m.subnets.contains_key(sn) {
                    return Err(inconsistent(format!(
                        "route table {}: no subnet {sn}",
                        rt.id
                    )));
                }
            }
            m.route_tables.push(RouteTable {
                id: rt.id.clone(),
                vpc: rt.vpc.clone(),
                subnets: rt.subnets.clone(),
                main: rt.main,
            });
        }
        for g in &s.security_groups {
            m.groups.push(SecurityGroup {
                id: g.id.clone(),
                vpc: g.vpc.clone(),
                name: g.name.clone().unwrap_or_else(|| g.id.clone()),
                tags: g.tags.clone(),
            });
        }
        m.populate(s)?;
        Ok(m)
    }

    /// The scenario's instances, ENIs and Elastic IPs.
    fn populate(&mut self, s: &Scenario) -> Result<(), ScenarioError> {
        let m = self;
        for i in &s.instances {
            m.add_instance(i)
                .map_err(|e| inconsistent(format!("instance {}: {}", i.id, e.message)))?;
        }
        for e in &s.network_interfaces {
            let id = m
                .create_eni(&enis::NewEni {
                    id: Some(e.id.clone()),
                    subnet: e.subnet.clone(),
                    description: e.description.clone(),
                    groups: e.security_groups.clone(),
                    tags: e.tags.clone(),
                    secondary: e.secondary_ips,
                    ..enis::NewEni::default()
                })
                .map_err(|err| {
                    inconsistent(format!("network interface {}: {}", e.id, err.message))
                })?;
            if let Some((instance, index)) = &e.attachment {
                m.attach(&id, instance, *index).map_err(|err| {
                    inconsistent(format!("network interface {}: {}", e.id, err.message))
                })?;
            }
        }
        for a in &s.elastic_ips {
            m.eips.push(Eip {
                allocation_id: a.allocation_id.clone(),
                public_ip: a.public_ip,
                tags: a.tags.clone(),
                association: None,
            });
            if let Some(eni) = &a.network_interface {
                m.associate(&a.allocation_id, eni, false).map_err(|err| {
                    inconsistent(format!("elastic IP {}: {}", a.allocation_id, err.message))
                })?;
            }
        }
        Ok(())
    }

    /// A fresh id `prefix-` + 17 hex digits.
    pub fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{:017x}", self.next_id)
    }

    /// A VPC by id.
    ///
    /// # Errors
    /// `InvalidVpcID.NotFound`.
    pub fn vpc(&self, id: &str) -> Result<&Vpc, Ec2Error> {
        self.vpcs
            .iter()
            .find(|v| v.id == id)
            .ok_or_else(|| Ec2Error::vpc_not_found(id))
    }

    /// A subnet by id.
    ///
    /// # Errors
    /// `InvalidSubnetID.NotFound`.
    pub fn subnet(&self, id: &str) -> Result<&Subnet, Ec2Error> {
        self.subnets
            .get(id)
            .ok_or_else(|| Ec2Error::subnet_not_found(id))
    }

    /// An instance by id.
    ///
    /// # Errors
    /// `InvalidInstanceID.NotFound`.
    pub fn instance(&self, id: &str) -> Result<&Instance, Ec2Error> {
        self.instances
            .get(id)
            .ok_or_else(|| Ec2Error::instance_not_found(id))
    }

    /// An ENI by id.
    ///
    /// # Errors
    /// `InvalidNetworkInterfaceID.NotFound`.
    pub fn eni(&self, id: &str) -> Result<&Eni, Ec2Error> {
        self.enis.get(id).ok_or_else(|| Ec2Error::eni_not_found(id))
    }

    /// The ENIs attached to `instance`, by device index.
    #[must_use]
    pub fn instance_enis(&self, instance: &str) -> Vec<&Eni> {
        let mut enis: Vec<&Eni> = self
            .enis
            .values()
            .filter(|e| {
                e.attachment
                    .as_ref()
                    .is_some_and(|a| a.instance == instance)
            })
            .collect();
        enis.sort_by_key(|e| e.attachment.as_ref().map(|a| a.device_index));
        enis
    }

    /// A MAC for a new ENI (`02:` + 5 bytes of the counter).
    pub fn new_mac(&mut self) -> String {
        self.next_id += 1;
        let b = self.next_id.to_be_bytes();
        format!(
            "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[3], b[4], b[5], b[6], b[7]
        )
    }
}

//! What the EC2 answers say, typed (§3.2): VPCs, subnets, route tables, security groups,
//! network interfaces, instances, instance-type limits, tags and Elastic IPs. Addresses and
//! CIDRs stay text here: turning them into CiliumNode terms (and skipping an ENI with a bad
//! one, §3.3) is the caller's. Plain data, no IO.

use std::collections::BTreeMap;

/// Tags, key → value.
pub type Tags = BTreeMap<String, String>;

/// `vpcSet/item`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vpc {
    /// `vpcId`.
    pub id: String,
    /// `cidrBlock` (the primary).
    pub primary_cidr: String,
    /// `cidrBlockAssociationSet/item/cidrBlock`, every state, the primary included.
    pub cidrs: Vec<String>,
}

/// `subnetSet/item`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subnet {
    /// `subnetId`.
    pub id: String,
    /// `cidrBlock`.
    pub cidr: String,
    /// `availableIpAddressCount` (moto lets it go negative).
    pub available_addresses: i64,
    /// `availabilityZone`.
    pub availability_zone: String,
    /// `vpcId`.
    pub vpc_id: String,
    /// `tagSet`.
    pub tags: Tags,
}

/// `routeTableSet/item/associationSet/item`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTableAssociation {
    /// `subnetId` (none for the main association).
    pub subnet_id: Option<String>,
    /// `associationState/state`, e.g. `associated`.
    pub state: Option<String>,
}

/// `routeTableSet/item`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    /// `routeTableId`.
    pub id: String,
    /// `vpcId`.
    pub vpc_id: String,
    /// `associationSet`.
    pub associations: Vec<RouteTableAssociation>,
}

impl RouteTable {
    /// The subnets associated with it: associations with a `subnetId` in state
    /// `associated` (§3.3).
    pub fn associated_subnets(&self) -> impl Iterator<Item = &str> {
        self.associations
            .iter()
            .filter(|a| a.state.as_deref() == Some("associated"))
            .filter_map(|a| a.subnet_id.as_deref())
    }
}

/// A security group (`securityGroupForVpcSet/item` or `securityGroupInfo/item`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecurityGroup {
    /// `groupId`.
    pub id: String,
    /// `primaryVpcId` or `vpcId`.
    pub vpc_id: String,
    /// `tagSet`.
    pub tags: Tags,
}

/// `attachment`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attachment {
    /// `deviceIndex`.
    pub device_index: Option<u32>,
    /// `instanceId` (none for an ENI attached to no instance of ours, e.g. a NAT gateway).
    pub instance_id: Option<String>,
    /// `attachmentId`.
    pub attachment_id: Option<String>,
}

/// `networkInterfaceSet/item` (or `networkInterface` of CreateNetworkInterface).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkInterface {
    /// `networkInterfaceId`.
    pub id: String,
    /// `privateIpAddress`: the primary address (required by the caller, §3.3).
    pub primary_ip: Option<String>,
    /// `macAddress`.
    pub mac: String,
    /// `description`.
    pub description: String,
    /// `subnetId`.
    pub subnet_id: String,
    /// `vpcId`.
    pub vpc_id: String,
    /// `availabilityZone`.
    pub availability_zone: String,
    /// `status`, e.g. `in-use`, `available`.
    pub status: String,
    /// `attachment`.
    pub attachment: Option<Attachment>,
    /// `privateIpAddressesSet/item/privateIpAddress`, the primary included.
    pub private_ips: Vec<String>,
    /// `ipv4PrefixSet/item/ipv4Prefix`.
    pub ipv4_prefixes: Vec<String>,
    /// `ipv6PrefixSet/item/ipv6Prefix`.
    pub ipv6_prefixes: Vec<String>,
    /// `ipv6AddressesSet/item/ipv6Address`.
    pub ipv6_addresses: Vec<String>,
    /// `association/publicIp`, when non-empty.
    pub public_ip: Option<String>,
    /// `groupSet/item/groupId`.
    pub security_groups: Vec<String>,
    /// `tagSet`.
    pub tags: Tags,
}

/// `reservationSet/item/instancesSet/item`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instance {
    /// `instanceId`.
    pub id: String,
    /// `networkInterfaceSet/item/networkInterfaceId`.
    pub interface_ids: Vec<String>,
}

/// `instanceTypeSet/item`: the limits of one instance type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceTypeInfo {
    /// `instanceType`, e.g. `m5.large`.
    pub instance_type: String,
    /// `hypervisor` (`nitro`, `xen`; empty for bare metal).
    pub hypervisor: String,
    /// `bareMetal`.
    pub bare_metal: bool,
    /// `networkInfo/maximumNetworkInterfaces`.
    pub max_interfaces: u64,
    /// `networkInfo/ipv4AddressesPerInterface`.
    pub ipv4_per_interface: u64,
    /// `networkInfo/ipv6AddressesPerInterface`.
    pub ipv6_per_interface: u64,
}

/// `tagSet/item` of DescribeTags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceTag {
    /// `resourceId`.
    pub resource_id: String,
    /// `key`.
    pub key: String,
    /// `value`.
    pub value: String,
}

/// `addressesSet/item`: an Elastic IP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Address {
    /// `allocationId`.
    pub allocation_id: String,
    /// `associationId`, when associated.
    pub association_id: Option<String>,
    /// `publicIp`.
    pub public_ip: String,
    /// `tagSet`.
    pub tags: Tags,
}

/// What CreateNetworkInterface and AssignPrivateIpAddresses add.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressRequest {
    /// `SecondaryPrivateIpAddressCount=n`.
    Secondary(u32),
    /// `Ipv4PrefixCount=k` (/28 prefixes).
    Prefixes(u32),
}

/// What UnassignPrivateIpAddresses removes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressRelease {
    /// `PrivateIpAddress.N`.
    Ips(Vec<String>),
    /// `Ipv4Prefix.N`.
    Prefixes(Vec<String>),
}

/// A CreateNetworkInterface request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateInterface {
    /// `SubnetId`.
    pub subnet_id: String,
    /// `Description`, e.g. `Cilium-CNI (i-0123)`.
    pub description: String,
    /// `SecurityGroupId.N`.
    pub security_groups: Vec<String>,
    /// The secondary addresses or prefixes (`None`: only the primary).
    pub addresses: Option<AddressRequest>,
    /// `Ipv6PrefixCount=1`.
    pub ipv6_prefix: bool,
    /// `TagSpecification.1` for `network-interface` (omitted when empty).
    pub tags: Tags,
    /// `ClientToken`: the same token twice creates one ENI (idempotency across a restart).
    pub client_token: Option<String>,
}

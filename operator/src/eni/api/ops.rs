//! The actions (§3.2): each one's request keys and which decoder reads its answer, and the
//! security-group fallback. The exchange itself is `request`'s.

use std::sync::atomic::Ordering;

use tracing::warn;

use super::{
    Address, AddressRelease, AddressRequest, CreateInterface, Ec2Api, Ec2Client, Ec2Error, Filter,
    Instance, InstanceTypeInfo, NetworkInterface, ResourceTag, RouteTable, SecurityGroup, Subnet,
    Vpc, query::Query, xml,
};

impl AddressRequest {
    fn add_to(self, query: Query) -> Query {
        match self {
            Self::Secondary(n) => query.param("SecondaryPrivateIpAddressCount", n.to_string()),
            Self::Prefixes(k) => query.param("Ipv4PrefixCount", k.to_string()),
        }
    }
}

impl Ec2Client {
    async fn security_groups_for_vpc(&self, vpc_id: &str) -> Result<Vec<SecurityGroup>, Ec2Error> {
        const A: &str = "GetSecurityGroupsForVpc";
        self.list(A, Query::ec2(A).param("VpcId", vpc_id), true, |b| {
            xml::security_groups(A, b)
        })
        .await
    }

    async fn describe_security_groups(
        &self,
        vpc_id: Option<&str>,
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        const A: &str = "DescribeSecurityGroups";
        let filters: Vec<Filter> = vpc_id
            .map(|v| Filter::new("vpc-id", [v]))
            .into_iter()
            .collect();
        self.list(A, Query::ec2(A).filters(&filters), true, |b| {
            xml::security_groups(A, b)
        })
        .await
    }

    async fn simple(&self, action: &'static str, query: Query) -> Result<(), Ec2Error> {
        self.call(action, &query, |b| xml::acknowledged(action, b))
            .await
    }
}

impl Ec2Api for Ec2Client {
    async fn describe_vpcs(&self, vpc_id: Option<&str>) -> Result<Vec<Vpc>, Ec2Error> {
        const A: &str = "DescribeVpcs";
        self.list(A, Query::ec2(A).list("VpcId", vpc_id), false, xml::vpcs)
            .await
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        const A: &str = "DescribeSubnets";
        self.list(A, Query::ec2(A).filters(filters), false, xml::subnets)
            .await
    }

    async fn describe_route_tables(&self, filters: &[Filter]) -> Result<Vec<RouteTable>, Ec2Error> {
        const A: &str = "DescribeRouteTables";
        self.list(A, Query::ec2(A).filters(filters), false, xml::route_tables)
            .await
    }

    async fn security_groups(&self, vpc_id: Option<&str>) -> Result<Vec<SecurityGroup>, Ec2Error> {
        if let Some(vpc) = vpc_id
            && !self.inner.sg_fallback.load(Ordering::Relaxed)
        {
            match self.security_groups_for_vpc(vpc).await {
                Err(error) if error.is_unauthorized() || error.is_unimplemented() => {
                    if !self.inner.sg_fallback.swap(true, Ordering::Relaxed) {
                        warn!(%error, "GetSecurityGroupsForVpc failed; using DescribeSecurityGroups from now on");
                    }
                }
                other => return other,
            }
        }
        self.describe_security_groups(vpc_id).await
    }

    async fn describe_network_interfaces(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<NetworkInterface>, Ec2Error> {
        const A: &str = "DescribeNetworkInterfaces";
        let query = Query::ec2(A)
            .list("NetworkInterfaceId", ids)
            .filters(filters);
        self.list(A, query, ids.is_empty(), xml::network_interfaces)
            .await
    }

    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Instance>, Ec2Error> {
        const A: &str = "DescribeInstances";
        self.list(A, Query::ec2(A).filters(filters), false, xml::instances)
            .await
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, Ec2Error> {
        const A: &str = "DescribeInstanceTypes";
        self.list(A, Query::ec2(A), false, xml::instance_types)
            .await
    }

    async fn describe_tags(&self, filters: &[Filter]) -> Result<Vec<ResourceTag>, Ec2Error> {
        const A: &str = "DescribeTags";
        self.list(A, Query::ec2(A).filters(filters), false, xml::resource_tags)
            .await
    }

    async fn create_network_interface(
        &self,
        request: &CreateInterface,
    ) -> Result<NetworkInterface, Ec2Error> {
        const A: &str = "CreateNetworkInterface";
        let mut query = Query::ec2(A)
            .param("SubnetId", request.subnet_id.as_str())
            .param("Description", request.description.as_str())
            .list("SecurityGroupId", &request.security_groups);
        if let Some(addresses) = request.addresses {
            query = addresses.add_to(query);
        }
        if request.ipv6_prefix {
            query = query.param("Ipv6PrefixCount", "1");
        }
        let query = query
            .tag_specification("network-interface", &request.tags)
            .opt("ClientToken", request.client_token.as_deref());
        self.call(A, &query, xml::created_interface).await
    }

    async fn attach_network_interface(
        &self,
        interface_id: &str,
        instance_id: &str,
        device_index: u32,
    ) -> Result<String, Ec2Error> {
        const A: &str = "AttachNetworkInterface";
        let query = Query::ec2(A)
            .param("DeviceIndex", device_index.to_string())
            .param("InstanceId", instance_id)
            .param("NetworkInterfaceId", interface_id)
            .param("NetworkCardIndex", "0");
        self.call(A, &query, |b| xml::single(A, b, "attachmentId"))
            .await
    }

    async fn set_delete_on_termination(
        &self,
        interface_id: &str,
        attachment_id: &str,
    ) -> Result<(), Ec2Error> {
        const A: &str = "ModifyNetworkInterfaceAttribute";
        let query = Query::ec2(A)
            .param("NetworkInterfaceId", interface_id)
            .param("Attachment.AttachmentId", attachment_id)
            .bool("Attachment.DeleteOnTermination", true);
        self.simple(A, query).await
    }

    async fn delete_network_interface(&self, interface_id: &str) -> Result<(), Ec2Error> {
        const A: &str = "DeleteNetworkInterface";
        self.simple(A, Query::ec2(A).param("NetworkInterfaceId", interface_id))
            .await
    }

    async fn assign_private_ip_addresses(
        &self,
        interface_id: &str,
        request: AddressRequest,
    ) -> Result<Vec<String>, Ec2Error> {
        const A: &str = "AssignPrivateIpAddresses";
        let query = request.add_to(Query::ec2(A).param("NetworkInterfaceId", interface_id));
        self.call(A, &query, xml::assigned).await
    }

    async fn unassign_private_ip_addresses(
        &self,
        interface_id: &str,
        release: &AddressRelease,
    ) -> Result<(), Ec2Error> {
        const A: &str = "UnassignPrivateIpAddresses";
        let query = Query::ec2(A).param("NetworkInterfaceId", interface_id);
        let query = match release {
            AddressRelease::Ips(ips) => query.list("PrivateIpAddress", ips),
            AddressRelease::Prefixes(prefixes) => query.list("Ipv4Prefix", prefixes),
        };
        self.simple(A, query).await
    }

    async fn assign_ipv6_prefix(&self, interface_id: &str) -> Result<(), Ec2Error> {
        const A: &str = "AssignIpv6Addresses";
        let query = Query::ec2(A)
            .param("NetworkInterfaceId", interface_id)
            .param("Ipv6PrefixCount", "1");
        self.simple(A, query).await
    }

    async fn describe_addresses(&self, filters: &[Filter]) -> Result<Vec<Address>, Ec2Error> {
        const A: &str = "DescribeAddresses";
        self.list(A, Query::ec2(A).filters(filters), false, xml::addresses)
            .await
    }

    async fn associate_address(
        &self,
        allocation_id: &str,
        interface_id: &str,
    ) -> Result<String, Ec2Error> {
        const A: &str = "AssociateAddress";
        let query = Query::ec2(A)
            .param("AllocationId", allocation_id)
            .param("NetworkInterfaceId", interface_id)
            .bool("AllowReassociation", false);
        self.call(A, &query, |b| xml::single(A, b, "associationId"))
            .await
    }
}

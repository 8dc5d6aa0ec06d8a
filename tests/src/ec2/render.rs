//! How the estate's objects look on the wire: the XML of an ENI (CreateNetworkInterface's
//! `networkInterface` and DescribeNetworkInterfaces' items), a subnet, a VPC, a route table,
//! a security group (both listings' shapes), an instance, an instance type and an Elastic IP,
//! with the member names of botocore's `ec2` 2016-11-15 model. Reads the model, never changes it.

use super::{
    model::{Eip, Eni, Instance, Model, RouteTable, SecurityGroup, Subnet, Vpc},
    scenario::InstanceTypeSpec,
    xml::{Xml, iso8601},
};

/// An ENI's fields (inside `<networkInterface>` or an `<item>`).
pub fn eni(x: &mut Xml, m: &Model, e: &Eni) {
    x.leaf("networkInterfaceId", &e.id)
        .leaf("subnetId", &e.subnet)
        .leaf("vpcId", &e.vpc)
        .leaf("availabilityZone", &e.az)
        .leaf("description", &e.description)
        .leaf("ownerId", &m.account)
        .leaf("requesterManaged", "false")
        .leaf("status", e.status())
        .leaf("macAddress", &e.mac)
        .opt("privateIpAddress", e.ips.first())
        .opt("privateDnsName", e.ips.first().map(|ip| dns_name(m, *ip)))
        .leaf("sourceDestCheck", "true")
        .leaf("interfaceType", "interface");
    x.set("groupSet", &e.groups, |x, g| {
        let name = m
            .groups
            .iter()
            .find(|s| &s.id == g)
            .map_or(g.as_str(), |s| s.name.as_str());
        x.leaf("groupId", g).leaf("groupName", name);
    });
    if let Some(a) = &e.attachment {
        x.el("attachment", |x| {
            x.leaf("attachmentId", &a.id)
                .leaf("instanceId", &a.instance)
                .leaf("instanceOwnerId", &m.account)
                .leaf("deviceIndex", a.device_index)
                .leaf("networkCardIndex", 0)
                .leaf("status", "attached")
                .leaf("attachTime", iso8601(a.time))
                .leaf("deleteOnTermination", a.delete_on_termination);
        });
    }
    if let Some(a) = &e.association {
        x.el("association", |x| {
            association(x, m, a);
        });
    }
    x.tags(&e.tags);
    x.set(
        "privateIpAddressesSet",
        e.ips.iter().enumerate(),
        |x, (i, ip)| {
            x.leaf("privateIpAddress", ip)
                .leaf("privateDnsName", dns_name(m, *ip))
                .leaf("primary", i == 0);
            if i == 0
                && let Some(a) = &e.association
            {
                x.el("association", |x| association(x, m, a));
            }
        },
    );
    x.set("ipv4PrefixSet", &e.prefixes, |x, p| {
        x.leaf("ipv4Prefix", p);
    });
    x.set("ipv6AddressesSet", Vec::<u8>::new(), |_, _| {});
    x.set("ipv6PrefixSet", &e.ipv6_prefixes, |x, p| {
        x.leaf("ipv6Prefix", p);
    });
}

fn association(x: &mut Xml, m: &Model, a: &super::model::Association) {
    x.leaf("publicIp", a.public_ip)
        .leaf("publicDnsName", "")
        .leaf("ipOwnerId", &m.account)
        .leaf("allocationId", &a.allocation_id)
        .leaf("associationId", &a.id);
}

fn dns_name(m: &Model, ip: std::net::Ipv4Addr) -> String {
    let dashed = ip.to_string().replace('.', "-");
    if m.region == "us-east-1" {
        format!("ip-{dashed}.ec2.internal")
    } else {
        format!("ip-{dashed}.{}.compute.internal", m.region)
    }
}

/// A subnet item.
pub fn subnet(x: &mut Xml, m: &Model, s: &Subnet) {
    x.leaf("subnetId", &s.id)
        .leaf(
            "subnetArn",
            format!("arn:aws:ec2:{}:{}:subnet/{}", m.region, m.account, s.id),
        )
        .leaf("state", "available")
        .leaf("ownerId", &m.account)
        .leaf("vpcId", &s.vpc)
        .leaf("cidrBlock", s.cidr)
        .leaf("availableIpAddressCount", s.free())
        .leaf("availabilityZone", &s.az)
        .leaf(
            "availabilityZoneId",
            format!(
                "use1-az{}",
                s.az.chars().last().map_or(1, |c| u32::from(c) % 6 + 1)
            ),
        )
        .leaf("defaultForAz", "false")
        .leaf("mapPublicIpOnLaunch", "false")
        .leaf("assignIpv6AddressOnCreation", "false");
    x.set("ipv6CidrBlockAssociationSet", s.ipv6, |x, c| {
        x.leaf("ipv6CidrBlock", c)
            .leaf(
                "associationId",
                format!("subnet-cidr-assoc-{}", s.id.trim_start_matches("subnet-")),
            )
            .el("ipv6CidrBlockState", |x| {
                x.leaf("state", "associated");
            });
    });
    x.tags(&s.tags);
}

/// A VPC item.
pub fn vpc(x: &mut Xml, m: &Model, v: &Vpc) {
    x.leaf("vpcId", &v.id)
        .leaf("ownerId", &m.account)
        .leaf("state", "available")
        .leaf("cidrBlock", v.cidr)
        .leaf("dhcpOptionsId", "dopt-0000000000000000a")
        .leaf("instanceTenancy", "default")
        .leaf("isDefault", "false");
    let all = std::iter::once(v.cidr).chain(v.extra_cidrs.iter().copied());
    x.set("cidrBlockAssociationSet", all.enumerate(), |x, (i, c)| {
        x.leaf("cidrBlock", c)
            .leaf(
                "associationId",
                format!("vpc-cidr-assoc-{}{i}", v.id.trim_start_matches("vpc-")),
            )
            .el("cidrBlockState", |x| {
                x.leaf("state", "associated");
            });
    });
    x.tags(&v.tags);
}

/// A route table item.
pub fn route_table(x: &mut Xml, m: &Model, r: &RouteTable) {
    x.leaf("routeTableId", &r.id)
        .leaf("vpcId", &r.vpc)
        .leaf("ownerId", &m.account);
    x.set("routeSet", Vec::<u8>::new(), |_, _| {});
    let mut rows: Vec<(Option<&String>, bool)> =
        r.subnets.iter().map(|s| (Some(s), false)).collect();
    if r.main {
        rows.push((None, true));
    }
    x.set(
        "associationSet",
        rows.into_iter().enumerate(),
        |x, (i, (s, main))| {
            x.leaf(
                "routeTableAssociationId",
                format!("rtbassoc-{}{i:03}", r.id.trim_start_matches("rtb-")),
            )
            .leaf("routeTableId", &r.id)
            .opt("subnetId", s)
            .leaf("main", main)
            .el("associationState", |x| {
                x.leaf("state", "associated");
            });
        },
    );
    x.set("propagatingVgwSet", Vec::<u8>::new(), |_, _| {});
    x.set("tagSet", Vec::<u8>::new(), |_, _| {});
}

/// A DescribeSecurityGroups item.
pub fn security_group(x: &mut Xml, m: &Model, g: &SecurityGroup) {
    x.leaf("ownerId", &m.account)
        .leaf("groupId", &g.id)
        .leaf("groupName", &g.name)
        .leaf("groupDescription", &g.name)
        .leaf("vpcId", &g.vpc)
        .leaf(
            "securityGroupArn",
            format!(
                "arn:aws:ec2:{}:{}:security-group/{}",
                m.region, m.account, g.id
            ),
        );
    x.set("ipPermissions", Vec::<u8>::new(), |_, _| {});
    x.set("ipPermissionsEgress", Vec::<u8>::new(), |_, _| {});
    x.tags(&g.tags);
}

/// A GetSecurityGroupsForVpc item.
pub fn security_group_for_vpc(x: &mut Xml, m: &Model, g: &SecurityGroup) {
    x.leaf("description", &g.name)
        .leaf("groupName", &g.name)
        .leaf("ownerId", &m.account)
        .leaf("groupId", &g.id)
        .tags(&g.tags)
        .leaf("primaryVpcId", &g.vpc);
}

/// An instance item (inside a reservation's `instancesSet`).
pub fn instance(x: &mut Xml, m: &Model, i: &Instance) {
    let enis = m.instance_enis(&i.id);
    let (code, name) = if i.running {
        (16, "running")
    } else {
        (80, "stopped")
    };
    x.leaf("instanceId", &i.id)
        .leaf("imageId", "ami-0abcdef1234567890")
        .el("instanceState", |x| {
            x.leaf("code", code).leaf("name", name);
        })
        .leaf("instanceType", &i.type_name)
        .el("placement", |x| {
            x.leaf("availabilityZone", &i.az).leaf("tenancy", "default");
        })
        .leaf("subnetId", &i.subnet)
        .leaf("vpcId", &i.vpc)
        .opt("privateIpAddress", enis.first().and_then(|e| e.ips.first()));
    x.tags(&i.tags);
    x.set("networkInterfaceSet", enis, |x, e| {
        x.leaf("networkInterfaceId", &e.id)
            .leaf("subnetId", &e.subnet)
            .leaf("vpcId", &e.vpc)
            .leaf("status", e.status())
            .leaf("macAddress", &e.mac)
            .opt("privateIpAddress", e.ips.first());
        if let Some(a) = &e.attachment {
            x.el("attachment", |x| {
                x.leaf("attachmentId", &a.id)
                    .leaf("deviceIndex", a.device_index)
                    .leaf("networkCardIndex", 0)
                    .leaf("status", "attached")
                    .leaf("deleteOnTermination", a.delete_on_termination);
            });
        }
        x.set(
            "privateIpAddressesSet",
            e.ips.iter().enumerate(),
            |x, (n, ip)| {
                x.leaf("privateIpAddress", ip).leaf("primary", n == 0);
            },
        );
    });
}

/// An instance type item.
pub fn instance_type(x: &mut Xml, t: &InstanceTypeSpec) {
    x.leaf("instanceType", &t.name)
        .opt("hypervisor", t.hypervisor.as_ref())
        .leaf("bareMetal", t.bare_metal)
        .el("networkInfo", |x| {
            x.leaf("maximumNetworkInterfaces", t.max_interfaces)
                .leaf("maximumNetworkCards", 1)
                .leaf("defaultNetworkCardIndex", 0)
                .set("networkCards", [()], |x, ()| {
                    x.leaf("networkCardIndex", 0)
                        .leaf("maximumNetworkInterfaces", t.max_interfaces);
                })
                .leaf("ipv4AddressesPerInterface", t.ipv4_per_interface)
                .leaf("ipv6AddressesPerInterface", t.ipv6_per_interface)
                .leaf("ipv6Supported", "true");
        });
}

/// An Elastic IP item.
pub fn address(x: &mut Xml, m: &Model, a: &Eip) {
    x.leaf("publicIp", a.public_ip)
        .leaf("allocationId", &a.allocation_id)
        .leaf("domain", "vpc");
    if let Some((eni, assoc)) = &a.association {
        x.leaf("associationId", assoc)
            .leaf("networkInterfaceId", eni)
            .leaf("networkInterfaceOwnerId", &m.account);
        if let Some(e) = m.enis.get(eni) {
            x.opt("privateIpAddress", e.ips.first());
            x.opt("instanceId", e.attachment.as_ref().map(|a| &a.instance));
        }
    }
    x.tags(&a.tags);
}

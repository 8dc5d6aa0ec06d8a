//! The read actions: DescribeVpcs, DescribeSubnets, DescribeRouteTables,
//! GetSecurityGroupsForVpc, DescribeSecurityGroups, DescribeNetworkInterfaces,
//! DescribeInstances, DescribeInstanceTypes, DescribeTags and DescribeAddresses, with their ID
//! lists, the filters each knows (an unknown one is refused as EC2 does), and paging where EC2
//! pages. Each returns the answer's XML; nothing here changes the model.

use super::{
    error::Ec2Error,
    model::Model,
    query::{Paging, Params},
    render,
    scenario::Tags,
    xml::{NAMESPACE, Xml},
};

/// `tag:K` and `tag-key` values of an object.
fn tag_field(tags: &Tags, name: &str) -> Option<Vec<String>> {
    if let Some(key) = name.strip_prefix("tag:") {
        return Some(tags.get(key).cloned().into_iter().collect());
    }
    (name == "tag-key").then(|| tags.keys().cloned().collect())
}

fn one(v: &impl ToString) -> Vec<String> {
    vec![v.to_string()]
}

/// IDs asked for by `list` that are not in `known`: the first answers `not_found`.
fn check_ids(
    ids: &[String],
    mut known: impl FnMut(&str) -> bool,
    not_found: impl Fn(&str) -> Ec2Error,
) -> Result<(), Ec2Error> {
    ids.iter()
        .find(|id| !known(id))
        .map_or(Ok(()), |id| Err(not_found(id)))
}

fn answer(action: &str, rid: &str, body: impl FnOnce(&mut Xml)) -> String {
    Xml::response(action, NAMESPACE, rid, body)
}

/// DescribeVpcs.
pub fn vpcs(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("VpcId");
    check_ids(
        &ids,
        |id| m.vpcs.iter().any(|v| v.id == id),
        Ec2Error::vpc_not_found,
    )?;
    let f = p.filters();
    f.check(&[
        "vpc-id",
        "cidr",
        "cidr-block-association.cidr-block",
        "state",
        "tag:",
        "tag-key",
    ])?;
    let items: Vec<_> = m
        .vpcs
        .iter()
        .filter(|v| ids.is_empty() || ids.contains(&v.id))
        .filter(|v| {
            f.pass(|n| match n {
                "vpc-id" => one(&v.id),
                "cidr" => one(&v.cidr),
                "cidr-block-association.cidr-block" => std::iter::once(v.cidr)
                    .chain(v.extra_cidrs.iter().copied())
                    .map(|c| c.to_string())
                    .collect(),
                "state" => one(&"available"),
                n => tag_field(&v.tags, n).unwrap_or_default(),
            })
        })
        .collect();
    Ok(answer("DescribeVpcs", rid, |x| {
        x.set("vpcSet", items, |x, v| render::vpc(x, m, v));
    }))
}

/// DescribeSubnets (pages with `MaxResults` 5–1000).
pub fn subnets(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("SubnetId");
    check_ids(
        &ids,
        |id| m.subnets.contains_key(id),
        Ec2Error::subnet_not_found,
    )?;
    let f = p.filters();
    f.check(&[
        "subnet-id",
        "vpc-id",
        "availability-zone",
        "cidr-block",
        "cidr",
        "state",
        "tag:",
        "tag-key",
    ])?;
    let paging = p.paging(5, 1000)?;
    let items: Vec<_> = m
        .subnets
        .values()
        .filter(|s| ids.is_empty() || ids.contains(&s.id))
        .filter(|s| {
            f.pass(|n| match n {
                "subnet-id" => one(&s.id),
                "vpc-id" => one(&s.vpc),
                "availability-zone" => one(&s.az),
                "cidr-block" | "cidr" => one(&s.cidr),
                "state" => one(&"available"),
                n => tag_field(&s.tags, n).unwrap_or_default(),
            })
        })
        .collect();
    let (items, next) = paging.page("DescribeSubnets", items, None)?;
    Ok(answer("DescribeSubnets", rid, |x| {
        x.set("subnetSet", items, |x, s| render::subnet(x, m, s));
        x.opt("nextToken", next);
    }))
}

/// DescribeRouteTables.
pub fn route_tables(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("RouteTableId");
    let f = p.filters();
    f.check(&[
        "vpc-id",
        "route-table-id",
        "association.subnet-id",
        "association.main",
    ])?;
    let paging = p.paging(5, 100)?;
    let items: Vec<_> = m
        .route_tables
        .iter()
        .filter(|r| ids.is_empty() || ids.contains(&r.id))
        .filter(|r| {
            f.pass(|n| match n {
                "vpc-id" => one(&r.vpc),
                "route-table-id" => one(&r.id),
                "association.subnet-id" => r.subnets.clone(),
                _ => one(&r.main),
            })
        })
        .collect();
    let (items, next) = paging.page("DescribeRouteTables", items, None)?;
    Ok(answer("DescribeRouteTables", rid, |x| {
        x.set("routeTableSet", items, |x, r| render::route_table(x, m, r));
        x.opt("nextToken", next);
    }))
}

/// GetSecurityGroupsForVpc (`VpcId` required; pages with `MaxResults` 5–1000).
pub fn security_groups_for_vpc(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let vpc = p.required("VpcId")?;
    m.vpc(vpc)?;
    let f = p.filters();
    f.check(&[
        "group-id",
        "group-name",
        "owner-id",
        "description",
        "tag:",
        "tag-key",
    ])?;
    let paging = p.paging(5, 1000)?;
    let items: Vec<_> = m
        .groups
        .iter()
        .filter(|g| g.vpc == vpc)
        .filter(|g| {
            f.pass(|n| match n {
                "group-id" => one(&g.id),
                "group-name" | "description" => one(&g.name),
                "owner-id" => one(&m.account),
                n => tag_field(&g.tags, n).unwrap_or_default(),
            })
        })
        .collect();
    let (items, next) = paging.page("GetSecurityGroupsForVpc", items, m.unpaged_limit)?;
    Ok(answer("GetSecurityGroupsForVpc", rid, |x| {
        x.set("securityGroupForVpcSet", items, |x, g| {
            render::security_group_for_vpc(x, m, g);
        });
        x.opt("nextToken", next);
    }))
}

/// DescribeSecurityGroups (pages with `MaxResults` 5–1000).
pub fn security_groups(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("GroupId");
    check_ids(
        &ids,
        |id| m.groups.iter().any(|g| g.id == id),
        Ec2Error::group_not_found,
    )?;
    let f = p.filters();
    f.check(&[
        "vpc-id",
        "group-id",
        "group-name",
        "owner-id",
        "tag:",
        "tag-key",
    ])?;
    let paging = p.paging(5, 1000)?;
    if !ids.is_empty() && paging.max_results.is_some() {
        return Err(Ec2Error::combination(
            "The parameter groupIdSet cannot be used with the parameter maxResults",
        ));
    }
    let items: Vec<_> = m
        .groups
        .iter()
        .filter(|g| ids.is_empty() || ids.contains(&g.id))
        .filter(|g| {
            f.pass(|n| match n {
                "vpc-id" => one(&g.vpc),
                "group-id" => one(&g.id),
                "group-name" => one(&g.name),
                "owner-id" => one(&m.account),
                n => tag_field(&g.tags, n).unwrap_or_default(),
            })
        })
        .collect();
    let (items, next) = paging.page("DescribeSecurityGroups", items, m.unpaged_limit)?;
    Ok(answer("DescribeSecurityGroups", rid, |x| {
        x.set("securityGroupInfo", items, |x, g| {
            render::security_group(x, m, g);
        });
        x.opt("nextToken", next);
    }))
}

/// The filters DescribeNetworkInterfaces knows.
const ENI_FILTERS: &[&str] = &[
    "attachment.instance-id",
    "attachment.attachment-id",
    "attachment.device-index",
    "attachment.status",
    "availability-zone",
    "description",
    "group-id",
    "mac-address",
    "network-interface-id",
    "private-ip-address",
    "addresses.private-ip-address",
    "subnet-id",
    "status",
    "vpc-id",
    "tag:",
    "tag-key",
];

/// DescribeNetworkInterfaces (`NetworkInterfaceId.N`, filters, pages with `MaxResults` 5–1000;
/// IDs and `MaxResults` together are refused).
pub fn network_interfaces(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("NetworkInterfaceId");
    check_ids(&ids, |id| m.enis.contains_key(id), Ec2Error::eni_not_found)?;
    let f = p.filters();
    f.check(ENI_FILTERS)?;
    let paging = p.paging(5, 1000)?;
    if !ids.is_empty() && paging.max_results.is_some() {
        return Err(Ec2Error::combination(
            "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults",
        ));
    }
    let items: Vec<_> = m
        .enis
        .values()
        .filter(|e| ids.is_empty() || ids.contains(&e.id))
        .filter(|e| f.pass(|n| eni_field(e, n)))
        .collect();
    let (items, next) = paging.page("DescribeNetworkInterfaces", items, m.unpaged_limit)?;
    Ok(answer("DescribeNetworkInterfaces", rid, |x| {
        x.set("networkInterfaceSet", items, |x, e| render::eni(x, m, e));
        x.opt("nextToken", next);
    }))
}

fn eni_field(e: &super::model::Eni, name: &str) -> Vec<String> {
    let a = e.attachment.as_ref();
    match name {
        "attachment.instance-id" => a.map(|a| a.instance.clone()).into_iter().collect(),
        "attachment.attachment-id" => a.map(|a| a.id.clone()).into_iter().collect(),
        "attachment.device-index" => a.map(|a| a.device_index.to_string()).into_iter().collect(),
        "attachment.status" => a.map(|_| "attached".to_owned()).into_iter().collect(),
        "availability-zone" => one(&e.az),
        "description" => one(&e.description),
        "group-id" => e.groups.clone(),
        "mac-address" => one(&e.mac),
        "network-interface-id" => one(&e.id),
        "private-ip-address" | "addresses.private-ip-address" => {
            e.ips.iter().map(ToString::to_string).collect()
        }
        "subnet-id" => one(&e.subnet),
        "status" => one(&e.status()),
        "vpc-id" => one(&e.vpc),
        n => tag_field(&e.tags, n).unwrap_or_default(),
    }
}

/// DescribeInstances (`InstanceId.N`, filters, pages with `MaxResults` 5–1000).
pub fn instances(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("InstanceId");
    check_ids(
        &ids,
        |id| m.instances.contains_key(id),
        Ec2Error::instance_not_found,
    )?;
    let f = p.filters();
    f.check(&[
        "instance-id",
        "instance-type",
        "instance-state-name",
        "subnet-id",
        "vpc-id",
        "availability-zone",
        "network-interface.network-interface-id",
        "tag:",
        "tag-key",
    ])?;
    let paging = p.paging(5, 1000)?;
    if !ids.is_empty() && paging.max_results.is_some() {
        return Err(Ec2Error::combination(
            "The parameter instancesSet cannot be used with the parameter maxResults",
        ));
    }
    let items: Vec<_> = m
        .instances
        .values()
        .filter(|i| ids.is_empty() || ids.contains(&i.id))
        .filter(|i| {
            f.pass(|n| match n {
                "instance-id" => one(&i.id),
                "instance-type" => one(&i.type_name),
                "instance-state-name" => one(&if i.running { "running" } else { "stopped" }),
                "subnet-id" => one(&i.subnet),
                "vpc-id" => one(&i.vpc),
                "availability-zone" => one(&i.az),
                "network-interface.network-interface-id" => m
                    .instance_enis(&i.id)
                    .iter()
                    .map(|e| e.id.clone())
                    .collect(),
                n => tag_field(&i.tags, n).unwrap_or_default(),
            })
        })
        .collect();
    let (items, next) = paging.page("DescribeInstances", items, None)?;
    Ok(answer("DescribeInstances", rid, |x| {
        x.set("reservationSet", items, |x, i| {
            x.leaf(
                "reservationId",
                format!("r-{}", i.id.trim_start_matches("i-")),
            )
            .leaf("ownerId", &m.account)
            .set("groupSet", Vec::<u8>::new(), |_, _| {})
            .set("instancesSet", [i], |x, i| render::instance(x, m, i));
        });
        x.opt("nextToken", next);
    }))
}

/// DescribeInstanceTypes (`InstanceType.N`, filter `instance-type`, pages with `MaxResults`
/// 5–100, and at the scenario's page size without it, as AWS pages at 100).
pub fn instance_types(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let names = p.list("InstanceType");
    if let Some(n) = names.iter().find(|n| !m.types.contains_key(*n)) {
        return Err(Ec2Error::invalid_value(format!(
            "The following supplied instance types do not exist: [{n}]"
        )));
    }
    let f = p.filters();
    f.check(&["instance-type", "hypervisor", "bare-metal"])?;
    let paging = p.paging(5, 100)?;
    let items: Vec<_> = m
        .types
        .values()
        .filter(|t| names.is_empty() || names.contains(&t.name))
        .filter(|t| {
            f.pass(|n| match n {
                "instance-type" => one(&t.name),
                "hypervisor" => t.hypervisor.iter().cloned().collect(),
                _ => one(&t.bare_metal),
            })
        })
        .collect();
    let paging = Paging {
        max_results: paging.max_results.or(Some(m.types_page)),
        ..paging
    };
    let (items, next) = paging.page("DescribeInstanceTypes", items, None)?;
    Ok(answer("DescribeInstanceTypes", rid, |x| {
        x.set("instanceTypeSet", items, render::instance_type);
        x.opt("nextToken", next);
    }))
}

/// DescribeTags (filters `resource-type`, `resource-id`, `key`, `value`; pages with
/// `MaxResults` 5–1000).
pub fn tags(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let f = p.filters();
    f.check(&["resource-type", "resource-id", "key", "value"])?;
    let paging = p.paging(5, 1000)?;
    let mut rows: Vec<(&str, &str, &String, &String)> = Vec::new();
    rows.extend(m.instances.values().flat_map(|i| {
        i.tags
            .iter()
            .map(move |(k, v)| (i.id.as_str(), "instance", k, v))
    }));
    rows.extend(m.enis.values().flat_map(|e| {
        e.tags
            .iter()
            .map(move |(k, v)| (e.id.as_str(), "network-interface", k, v))
    }));
    rows.extend(m.subnets.values().flat_map(|s| {
        s.tags
            .iter()
            .map(move |(k, v)| (s.id.as_str(), "subnet", k, v))
    }));
    rows.extend(m.vpcs.iter().flat_map(|s| {
        s.tags
            .iter()
            .map(move |(k, v)| (s.id.as_str(), "vpc", k, v))
    }));
    rows.extend(m.groups.iter().flat_map(|s| {
        s.tags
            .iter()
            .map(move |(k, v)| (s.id.as_str(), "security-group", k, v))
    }));
    rows.extend(m.eips.iter().flat_map(|s| {
        s.tags
            .iter()
            .map(move |(k, v)| (s.allocation_id.as_str(), "elastic-ip", k, v))
    }));
    let items: Vec<_> = rows
        .into_iter()
        .filter(|(id, ty, k, v)| {
            f.pass(|n| match n {
                "resource-type" => one(&ty),
                "resource-id" => one(&id),
                "key" => one(&k),
                _ => one(&v),
            })
        })
        .collect();
    let (items, next) = paging.page("DescribeTags", items, None)?;
    Ok(answer("DescribeTags", rid, |x| {
        x.set("tagSet", items, |x, (id, ty, k, v)| {
            x.leaf("resourceId", id)
                .leaf("resourceType", ty)
                .leaf("key", k)
                .leaf("value", v);
        });
        x.opt("nextToken", next);
    }))
}

/// DescribeAddresses (`AllocationId.N`, `PublicIp.N`, filters).
pub fn addresses(m: &Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("AllocationId");
    let ips = p.list("PublicIp");
    let f = p.filters();
    f.check(&[
        "allocation-id",
        "association-id",
        "network-interface-id",
        "public-ip",
        "domain",
        "tag:",
        "tag-key",
    ])?;
    let items: Vec<_> = m
        .eips
        .iter()
        .filter(|a| ids.is_empty() || ids.contains(&a.allocation_id))
        .filter(|a| ips.is_empty() || ips.contains(&a.public_ip.to_string()))
        .filter(|a| {
            f.pass(|n| match n {
                "allocation-id" => one(&a.allocation_id),
                "association-id" => a.association.iter().map(|(_, id)| id.clone()).collect(),
                "network-interface-id" => a.association.iter().map(|(e, _)| e.clone()).collect(),
                "public-ip" => one(&a.public_ip),
                "domain" => one(&"vpc"),
                n => tag_field(&a.tags, n).unwrap_or_default(),
            })
        })
        .collect();
    Ok(answer("DescribeAddresses", rid, |x| {
        x.set("addressesSet", items, |x, a| render::address(x, m, a));
    }))
}

//! Reading Query-protocol XML answers (EC2, STS) into [`super::model`]: elements are matched on
//! their local names (namespaces ignored; moto's differs from AWS's), unknown elements are
//! ignored, lists are `<xxxSet><item>…</item></xxxSet>` (an empty set is `<xxxSet/>`). A
//! document that is not well-formed, has the wrong root, or lacks a list or an ID the client
//! needs is an [`Ec2Error`] naming the action and the element — never a panic. Also the AWS
//! error document (`<Response><Errors><Error>` and STS's `<ErrorResponse><Error>`). Pure.

use roxmltree::{Document, Node};

use super::{
    Ec2Error,
    model::{
        Address, Attachment, Instance, InstanceTypeInfo, NetworkInterface, ResourceTag, RouteTable,
        RouteTableAssociation, SecurityGroup, Subnet, Tags, Vpc,
    },
};

/// One page of a listing.
#[derive(Debug)]
pub struct Page<T> {
    /// The page's items.
    pub items: Vec<T>,
    /// `nextToken`, when non-empty.
    pub next_token: Option<String>,
}

/// A parsed answer, for the reading helpers.
pub(crate) fn parse<'i>(action: &'static str, body: &'i str) -> Result<Document<'i>, Ec2Error> {
    let doc = Document::parse(body).map_err(|source| Ec2Error::Xml { action, source })?;
    let root = doc.root_element().tag_name().name();
    if root != format!("{action}Response") {
        return Err(Ec2Error::Missing {
            action,
            what: format!("{action}Response (the document is <{root}>)"),
        });
    }
    Ok(doc)
}

/// The first child element named `name`.
pub(crate) fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

/// The element at `a/b/c` below `node`.
pub(crate) fn at<'a, 'i>(node: Node<'a, 'i>, path: &str) -> Option<Node<'a, 'i>> {
    path.split('/').try_fold(node, child)
}

/// The trimmed, non-empty text at `path`.
pub(crate) fn text(node: Node<'_, '_>, path: &str) -> Option<String> {
    let t = at(node, path)?.text()?.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// The text at `path`, or empty.
fn text_or_empty(node: Node<'_, '_>, path: &str) -> String {
    text(node, path).unwrap_or_default()
}

/// The text at `path`, which must be there.
pub(crate) fn required(
    action: &'static str,
    node: Node<'_, '_>,
    path: &str,
    context: &str,
) -> Result<String, Ec2Error> {
    text(node, path).ok_or_else(|| Ec2Error::Missing {
        action,
        what: format!("{context}/{path}"),
    })
}

/// A number at `path`: 0 when absent, an error when not a number.
fn number<T: std::str::FromStr + Default>(
    action: &'static str,
    node: Node<'_, '_>,
    path: &str,
    context: &str,
) -> Result<T, Ec2Error> {
    match text(node, path) {
        None => Ok(T::default()),
        Some(t) => t.parse().map_err(|_| Ec2Error::Missing {
            action,
            what: format!("{context}/{path} (not a number: {t:?})"),
        }),
    }
}

/// The `item`s of the set at `path` (none if the set is absent).
pub(crate) fn items<'a, 'i>(node: Node<'a, 'i>, path: &str) -> impl Iterator<Item = Node<'a, 'i>> {
    at(node, path)
        .into_iter()
        .flat_map(|set| set.children())
        .filter(|c| c.is_element() && c.tag_name().name() == "item")
}

/// The text at `field` of every item of `set`.
fn item_texts(node: Node<'_, '_>, set: &str, field: &str) -> Vec<String> {
    items(node, set).filter_map(|i| text(i, field)).collect()
}

/// `tagSet/item/{key,value}`.
fn tags(node: Node<'_, '_>) -> Tags {
    items(node, "tagSet")
        .filter_map(|i| Some((text(i, "key")?, text_or_empty(i, "value"))))
        .collect()
}

/// The items of the top-level list `set` (which must be present) and `nextToken`.
fn page<T>(
    action: &'static str,
    body: &str,
    set: &str,
    item: impl Fn(Node<'_, '_>) -> Result<T, Ec2Error>,
) -> Result<Page<T>, Ec2Error> {
    let doc = parse(action, body)?;
    let root = doc.root_element();
    if at(root, set).is_none() {
        return Err(Ec2Error::Missing {
            action,
            what: set.to_owned(),
        });
    }
    let items = items(root, set).map(item).collect::<Result<_, _>>()?;
    Ok(Page {
        items,
        next_token: text(root, "nextToken"),
    })
}

/// AWS's error document: `(code, message, request ID)`; `None` if `body` is not one.
#[must_use]
pub fn error_document(body: &str) -> Option<(String, String, String)> {
    let doc = Document::parse(body).ok()?;
    let error = doc
        .descendants()
        .find(|n| n.is_element() && n.tag_name().name() == "Error")?;
    let code = text(error, "Code")?;
    let request_id = doc
        .descendants()
        .find(|n| {
            n.is_element() && matches!(n.tag_name().name(), "RequestID" | "RequestId" | "requestId")
        })
        .and_then(|n| n.text())
        .map(|t| t.trim().to_owned())
        .unwrap_or_default();
    Some((code, text_or_empty(error, "Message"), request_id))
}

/// DescribeVpcs.
pub fn vpcs(body: &str) -> Result<Page<Vpc>, Ec2Error> {
    const A: &str = "DescribeVpcs";
    page(A, body, "vpcSet", |i| {
        Ok(Vpc {
            id: required(A, i, "vpcId", "vpcSet/item")?,
            primary_cidr: text_or_empty(i, "cidrBlock"),
            cidrs: item_texts(i, "cidrBlockAssociationSet", "cidrBlock"),
        })
    })
}

/// DescribeSubnets.
pub fn subnets(body: &str) -> Result<Page<Subnet>, Ec2Error> {
    const A: &str = "DescribeSubnets";
    const C: &str = "subnetSet/item";
    page(A, body, "subnetSet", |i| {
        Ok(Subnet {
            id: required(A, i, "subnetId", C)?,
            cidr: text_or_empty(i, "cidrBlock"),
            available_addresses: number(A, i, "availableIpAddressCount", C)?,
            availability_zone: text_or_empty(i, "availabilityZone"),
            vpc_id: text_or_empty(i, "vpcId"),
            tags: tags(i),
        })
    })
}

/// DescribeRouteTables.
pub fn route_tables(body: &str) -> Result<Page<RouteTable>, Ec2Error> {
    const A: &str = "DescribeRouteTables";
    page(A, body, "routeTableSet", |i| {
        Ok(RouteTable {
            id: required(A, i, "routeTableId", "routeTableSet/item")?,
            vpc_id: text_or_empty(i, "vpcId"),
            associations: items(i, "associationSet")
                .map(|a| RouteTableAssociation {
                    subnet_id: text(a, "subnetId"),
                    state: text(a, "associationState/state"),
                })
                .collect(),
        })
    })
}

/// GetSecurityGroupsForVpc (`securityGroupForVpcSet`, `primaryVpcId`) or
/// DescribeSecurityGroups (`securityGroupInfo`, `vpcId`).
pub fn security_groups(action: &'static str, body: &str) -> Result<Page<SecurityGroup>, Ec2Error> {
    let (set, vpc) = if action == "GetSecurityGroupsForVpc" {
        ("securityGroupForVpcSet", "primaryVpcId")
    } else {
        ("securityGroupInfo", "vpcId")
    };
    page(action, body, set, |i| {
        Ok(SecurityGroup {
            id: required(action, i, "groupId", set)?,
            vpc_id: text_or_empty(i, vpc),
            tags: tags(i),
        })
    })
}

/// One network interface element.
pub(crate) fn network_interface(
    action: &'static str,
    i: Node<'_, '_>,
    context: &str,
) -> Result<NetworkInterface, Ec2Error> {
    let attachment = child(i, "attachment").map(|a| {
        Ok::<_, Ec2Error>(Attachment {
            device_index: text(a, "deviceIndex")
                .map(|t| {
                    t.parse().map_err(|_| Ec2Error::Missing {
                        action,
                        what: format!("{context}/attachment/deviceIndex (not a number: {t:?})"),
                    })
                })
                .transpose()?,
            instance_id: text(a, "instanceId"),
            attachment_id: text(a, "attachmentId"),
        })
    });
    Ok(NetworkInterface {
        id: required(action, i, "networkInterfaceId", context)?,
        primary_ip: text(i, "privateIpAddress"),
        mac: text_or_empty(i, "macAddress"),
        description: text_or_empty(i, "description"),
        subnet_id: text_or_empty(i, "subnetId"),
        vpc_id: text_or_empty(i, "vpcId"),
        availability_zone: text_or_empty(i, "availabilityZone"),
        status: text_or_empty(i, "status"),
        attachment: attachment.transpose()?,
        private_ips: item_texts(i, "privateIpAddressesSet", "privateIpAddress"),
        ipv4_prefixes: item_texts(i, "ipv4PrefixSet", "ipv4Prefix"),
        ipv6_prefixes: item_texts(i, "ipv6PrefixSet", "ipv6Prefix"),
        ipv6_addresses: item_texts(i, "ipv6AddressesSet", "ipv6Address"),
        public_ip: text(i, "association/publicIp"),
        security_groups: item_texts(i, "groupSet", "groupId"),
        tags: tags(i),
    })
}

/// DescribeNetworkInterfaces.
pub fn network_interfaces(body: &str) -> Result<Page<NetworkInterface>, Ec2Error> {
    const A: &str = "DescribeNetworkInterfaces";
    page(A, body, "networkInterfaceSet", |i| {
        network_interface(A, i, "networkInterfaceSet/item")
    })
}

/// CreateNetworkInterface: `networkInterface`.
pub fn created_interface(body: &str) -> Result<NetworkInterface, Ec2Error> {
    const A: &str = "CreateNetworkInterface";
    let doc = parse(A, body)?;
    let eni = child(doc.root_element(), "networkInterface").ok_or_else(|| Ec2Error::Missing {
        action: A,
        what: "networkInterface".to_owned(),
    })?;
    network_interface(A, eni, "networkInterface")
}

/// DescribeInstances: each instance with its interfaces' IDs.
pub fn instances(body: &str) -> Result<Page<Instance>, Ec2Error> {
    const A: &str = "DescribeInstances";
    let reservations = page(A, body, "reservationSet", |r| {
        items(r, "instancesSet")
            .map(|i| {
                Ok(Instance {
                    id: required(A, i, "instanceId", "reservationSet/item/instancesSet/item")?,
                    interface_ids: item_texts(i, "networkInterfaceSet", "networkInterfaceId"),
                })
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    Ok(Page {
        items: reservations.items.into_iter().flatten().collect(),
        next_token: reservations.next_token,
    })
}

/// DescribeInstanceTypes.
pub fn instance_types(body: &str) -> Result<Page<InstanceTypeInfo>, Ec2Error> {
    const A: &str = "DescribeInstanceTypes";
    const C: &str = "instanceTypeSet/item";
    page(A, body, "instanceTypeSet", |i| {
        Ok(InstanceTypeInfo {
            instance_type: required(A, i, "instanceType", C)?,
            hypervisor: text_or_empty(i, "hypervisor"),
            bare_metal: text(i, "bareMetal").as_deref() == Some("true"),
            max_interfaces: number(A, i, "networkInfo/maximumNetworkInterfaces", C)?,
            ipv4_per_interface: number(A, i, "networkInfo/ipv4AddressesPerInterface", C)?,
            ipv6_per_interface: number(A, i, "networkInfo/ipv6AddressesPerInterface", C)?,
        })
    })
}

/// DescribeTags.
pub fn resource_tags(body: &str) -> Result<Page<ResourceTag>, Ec2Error> {
    const A: &str = "DescribeTags";
    page(A, body, "tagSet", |i| {
        Ok(ResourceTag {
            resource_id: text_or_empty(i, "resourceId"),
            key: required(A, i, "key", "tagSet/item")?,
            value: text_or_empty(i, "value"),
        })
    })
}

/// DescribeAddresses.
pub fn addresses(body: &str) -> Result<Page<Address>, Ec2Error> {
    const A: &str = "DescribeAddresses";
    const C: &str = "addressesSet/item";
    page(A, body, "addressesSet", |i| {
        Ok(Address {
            allocation_id: required(A, i, "allocationId", C)?,
            association_id: text(i, "associationId"),
            public_ip: required(A, i, "publicIp", C)?,
            tags: tags(i),
        })
    })
}

/// AssignPrivateIpAddresses: `assignedPrivateIpAddressesSet/item/privateIpAddress` and
/// `assignedIpv4PrefixSet/item/ipv4Prefix` (informational: moto lists every address).
pub fn assigned(body: &str) -> Result<Vec<String>, Ec2Error> {
    let doc = parse("AssignPrivateIpAddresses", body)?;
    let root = doc.root_element();
    let mut out = item_texts(root, "assignedPrivateIpAddressesSet", "privateIpAddress");
    out.extend(item_texts(root, "assignedIpv4PrefixSet", "ipv4Prefix"));
    Ok(out)
}

/// A required top-level value of a one-result action (`attachmentId`, `associationId`).
pub fn single(action: &'static str, body: &str, field: &str) -> Result<String, Ec2Error> {
    let doc = parse(action, body)?;
    required(
        action,
        doc.root_element(),
        field,
        &format!("{action}Response"),
    )
}

/// An action answering only `return`/`requestId`: the document must be well-formed and
/// `return` must not be `false`.
pub fn acknowledged(action: &'static str, body: &str) -> Result<(), Ec2Error> {
    let doc = parse(action, body)?;
    match text(doc.root_element(), "return").as_deref() {
        Some("false") => Err(Ec2Error::Missing {
            action,
            what: "return (it is false)".to_owned(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;

//! The mutating actions: CreateNetworkInterface (with `ClientToken` idempotency),
//! AttachNetworkInterface, ModifyNetworkInterfaceAttribute, DeleteNetworkInterface,
//! AssignPrivateIpAddresses, UnassignPrivateIpAddresses, AssignIpv6Addresses, AssociateAddress
//! and CreateTags. Each decodes its parameters, applies the model's rule ([`super::model::enis`])
//! and returns the answer's XML; a refused request changes nothing.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::{
    error::Ec2Error,
    model::{Model, addresses::Assign, enis::NewEni},
    query::Params,
    render,
    scenario::Tags,
    xml::{NAMESPACE, Xml},
};

fn answer(action: &str, rid: &str, body: impl FnOnce(&mut Xml)) -> String {
    Xml::response(action, NAMESPACE, rid, body)
}

fn returned_true(action: &str, rid: &str) -> String {
    answer(action, rid, |x| {
        x.leaf("return", "true");
    })
}

fn parse_all<T: std::str::FromStr>(name: &str, values: &[String]) -> Result<Vec<T>, Ec2Error> {
    values
        .iter()
        .map(|v| v.parse().map_err(|_| Ec2Error::bad_value(name, v)))
        .collect()
}

/// CreateNetworkInterface.
pub fn create_network_interface(m: &mut Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let subnet = p.required("SubnetId")?.to_owned();
    let token = p
        .get("ClientToken")
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let fingerprint = {
        let mut rest = p.0.clone();
        for k in ["ClientToken", "Action", "Version"] {
            rest.remove(k);
        }
        format!("{rest:?}")
    };
    if let Some(t) = &token
        && let Some((seen, eni)) = m.client_tokens.get(t)
    {
        if *seen != fingerprint {
            return Err(Ec2Error::client(
                "IdempotentParameterMismatch",
                format!("The client token {t} was used before with different parameters."),
            ));
        }
        let eni = m.eni(eni)?;
        return Ok(answer("CreateNetworkInterface", rid, |x| {
            x.el("networkInterface", |x| render::eni(x, m, eni));
            x.leaf("clientToken", t);
        }));
    }
    let primary = p
        .get("PrivateIpAddress")
        .map(|v| {
            v.parse::<Ipv4Addr>()
                .map_err(|_| Ec2Error::bad_value("PrivateIpAddress", v))
        })
        .transpose()?;
    let req = NewEni {
        id: None,
        subnet,
        description: p.get("Description").unwrap_or("").to_owned(),
        groups: p.list("SecurityGroupId"),
        tags: p.tag_specification("network-interface"),
        primary,
        secondary: p.number("SecondaryPrivateIpAddressCount")?.unwrap_or(0),
        prefixes: p.number("Ipv4PrefixCount")?.unwrap_or(0),
        ipv6_prefixes: p.number("Ipv6PrefixCount")?.unwrap_or(0),
    };
    let id = m.create_eni(&req)?;
    if let Some(t) = &token {
        m.client_tokens.insert(t.clone(), (fingerprint, id.clone()));
    }
    let eni = m.eni(&id)?;
    Ok(answer("CreateNetworkInterface", rid, |x| {
        x.el("networkInterface", |x| render::eni(x, m, eni));
        x.opt("clientToken", token.as_ref());
    }))
}

/// AttachNetworkInterface (`NetworkCardIndex` other than 0 is refused: one card modelled).
pub fn attach_network_interface(m: &mut Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let eni = p.required("NetworkInterfaceId")?;
    let instance = p.required("InstanceId")?;
    let index = p
        .number("DeviceIndex")?
        .ok_or_else(|| Ec2Error::missing("DeviceIndex"))?;
    if let Some(card) = p.number("NetworkCardIndex")?
        && card != 0
    {
        return Err(Ec2Error::invalid_value(format!(
            "Network card index {card} is not valid for this instance type."
        )));
    }
    let id = m.attach(eni, instance, index)?;
    Ok(answer("AttachNetworkInterface", rid, |x| {
        x.leaf("attachmentId", id).leaf("networkCardIndex", 0);
    }))
}

/// ModifyNetworkInterfaceAttribute (`Attachment.DeleteOnTermination`, `Description.Value`,
/// `SecurityGroupId.N`).
pub fn modify_network_interface_attribute(
    m: &mut Model,
    p: &Params,
    rid: &str,
) -> Result<String, Ec2Error> {
    let id = p.required("NetworkInterfaceId")?;
    m.eni(id)?;
    let mut changed = false;
    if let Some(value) = p.boolean("Attachment.DeleteOnTermination")? {
        let attachment = p.required("Attachment.AttachmentId")?;
        m.set_delete_on_termination(id, attachment, value)?;
        changed = true;
    }
    let groups = p.list("SecurityGroupId");
    if !groups.is_empty() {
        if let Some(g) = groups
            .iter()
            .find(|g| !m.groups.iter().any(|s| &&s.id == g))
        {
            return Err(Ec2Error::group_not_found(g));
        }
        m.enis.get_mut(id).expect("looked up above").groups = groups;
        changed = true;
    }
    if let Some(d) = p.get("Description.Value") {
        d.clone_into(&mut m.enis.get_mut(id).expect("looked up above").description);
        changed = true;
    }
    if !changed {
        return Err(Ec2Error::missing(
            "Attachment, Description or SecurityGroupId",
        ));
    }
    Ok(returned_true("ModifyNetworkInterfaceAttribute", rid))
}

/// DeleteNetworkInterface.
pub fn delete_network_interface(m: &mut Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    m.delete_eni(p.required("NetworkInterfaceId")?)?;
    Ok(returned_true("DeleteNetworkInterface", rid))
}

/// AssignPrivateIpAddresses (`SecondaryPrivateIpAddressCount`, `PrivateIpAddress.N` or
/// `Ipv4PrefixCount`, exactly one).
pub fn assign_private_ip_addresses(
    m: &mut Model,
    p: &Params,
    rid: &str,
) -> Result<String, Ec2Error> {
    let id = p.required("NetworkInterfaceId")?;
    let count = p.number("SecondaryPrivateIpAddressCount")?;
    let prefixes = p.number("Ipv4PrefixCount")?;
    let addresses: Vec<Ipv4Addr> = parse_all("PrivateIpAddress", &p.list("PrivateIpAddress"))?;
    let what = match (count, prefixes, addresses.is_empty()) {
        (Some(n), None, true) => Assign::Count(n),
        (None, Some(n), true) => Assign::Prefixes(n),
        (None, None, false) => Assign::Addresses(addresses),
        (None, None, true) => {
            return Err(Ec2Error::missing(
                "SecondaryPrivateIpAddressCount, PrivateIpAddress or Ipv4PrefixCount",
            ));
        }
        _ => {
            return Err(Ec2Error::combination(
                "Only one of SecondaryPrivateIpAddressCount, PrivateIpAddress and Ipv4PrefixCount may be given",
            ));
        }
    };
    let got = m.assign(id, &what)?;
    Ok(answer("AssignPrivateIpAddresses", rid, |x| {
        x.leaf("networkInterfaceId", id);
        x.set("assignedPrivateIpAddressesSet", &got.ips, |x, ip| {
            x.leaf("privateIpAddress", ip);
        });
        x.set("assignedIpv4PrefixSet", &got.prefixes, |x, p| {
            x.leaf("ipv4Prefix", p);
        });
    }))
}

/// UnassignPrivateIpAddresses (`PrivateIpAddress.N` and/or `Ipv4Prefix.N`).
pub fn unassign_private_ip_addresses(
    m: &mut Model,
    p: &Params,
    rid: &str,
) -> Result<String, Ec2Error> {
    let id = p.required("NetworkInterfaceId")?;
    let ips: Vec<Ipv4Addr> = parse_all("PrivateIpAddress", &p.list("PrivateIpAddress"))?;
    let prefixes: Vec<Ipv4Net> = parse_all("Ipv4Prefix", &p.list("Ipv4Prefix"))?;
    if ips.is_empty() && prefixes.is_empty() {
        return Err(Ec2Error::missing("PrivateIpAddress or Ipv4Prefix"));
    }
    m.unassign(id, &ips, &prefixes)?;
    Ok(returned_true("UnassignPrivateIpAddresses", rid))
}

/// AssignIpv6Addresses (`Ipv6PrefixCount` only: addresses are not modelled).
pub fn assign_ipv6_addresses(m: &mut Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let id = p.required("NetworkInterfaceId")?;
    let count = p
        .number("Ipv6PrefixCount")?
        .ok_or_else(|| Ec2Error::missing("Ipv6PrefixCount"))?;
    let new = m.assign_ipv6_prefixes(id, count)?;
    Ok(answer("AssignIpv6Addresses", rid, |x| {
        x.set("assignedIpv6Addresses", Vec::<u8>::new(), |_, _| {});
        x.set("assignedIpv6PrefixSet", &new, |x, p| {
            x.leaf("ipv6Prefix", p);
        });
        x.leaf("networkInterfaceId", id);
    }))
}

/// AssociateAddress (`AllocationId` + `NetworkInterfaceId`).
pub fn associate_address(m: &mut Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let allocation = p.required("AllocationId")?;
    let eni = p.required("NetworkInterfaceId")?;
    let reassociate = p.boolean("AllowReassociation")?.unwrap_or(false);
    let id = m.associate(allocation, eni, reassociate)?;
    Ok(answer("AssociateAddress", rid, |x| {
        x.leaf("return", "true").leaf("associationId", id);
    }))
}

/// CreateTags (`ResourceId.N`, `Tag.N.Key`/`Value`) on instances, ENIs, subnets, VPCs,
/// security groups and Elastic IPs.
pub fn create_tags(m: &mut Model, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    let ids = p.list("ResourceId");
    if ids.is_empty() {
        return Err(Ec2Error::missing("ResourceId"));
    }
    let tags = p.tags("Tag");
    if let Some(id) = ids.iter().find(|id| tags_of(m, id).is_none()) {
        return Err(Ec2Error::client(
            "InvalidID",
            format!("The ID '{id}' is not valid"),
        ));
    }
    for id in &ids {
        tags_of(m, id).expect("checked above").extend(tags.clone());
    }
    Ok(returned_true("CreateTags", rid))
}

/// The tags of the taggable object with this id.
fn tags_of<'a>(m: &'a mut Model, id: &str) -> Option<&'a mut Tags> {
    if let Some(i) = m.instances.get_mut(id) {
        return Some(&mut i.tags);
    }
    if let Some(e) = m.enis.get_mut(id) {
        return Some(&mut e.tags);
    }
    if let Some(s) = m.subnets.get_mut(id) {
        return Some(&mut s.tags);
    }
    if let Some(v) = m.vpcs.iter_mut().find(|v| v.id == id) {
        return Some(&mut v.tags);
    }
    if let Some(g) = m.groups.iter_mut().find(|g| g.id == id) {
        return Some(&mut g.tags);
    }
    m.eips
        .iter_mut()
        .find(|a| a.allocation_id == id)
        .map(|a| &mut a.tags)
}

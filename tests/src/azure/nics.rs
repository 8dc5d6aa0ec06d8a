//! NIC writes: reconciling a NIC's ipConfigurations to what a PUT asks (kept configs keep their
//! address, new ones get the subnet's lowest free address or their static one, removed ones
//! give theirs back; at most 256; a full subnet is `SubnetIsFull`), public IPs attached,
//! created from a prefix, or (for scale sets) managed by a `publicIPAddressConfiguration`, the
//! linked-access checks each new reference needs, and `Interfaces.CreateOrUpdate` itself.
//! Read-only fields and `etag` in bodies are ignored; unknown fields are kept.

use std::{collections::BTreeMap, net::Ipv4Addr};

use serde_json::{Map, Value, json};

use super::{
    error::{ArmError, IP_CONFIGS_PER_NIC},
    model::{Model, PublicIp, same},
};

/// RBAC actions a PUT needs on the resources it links to: (action, linked scope).
pub type Linked = Vec<(String, String)>;

/// Action to reference a subnet from a new ipConfiguration.
pub const SUBNET_JOIN: &str = "Microsoft.Network/virtualNetworks/subnets/join/action";
/// Action to put an ipConfiguration in an application security group.
pub const ASG_JOIN: &str = "Microsoft.Network/applicationSecurityGroups/joinIpConfiguration/action";
/// Action to attach a network security group to a NIC.
pub const NSG_JOIN: &str = "Microsoft.Network/networkSecurityGroups/join/action";
/// Action to take a public IP from a prefix.
pub const PREFIX_JOIN: &str = "Microsoft.Network/publicIPPrefixes/join/action";
/// Action to create a public IP.
pub const PUBLIC_IP_WRITE: &str = "Microsoft.Network/publicIPAddresses/write";
/// Action to attach a public IP to an ipConfiguration.
pub const PUBLIC_IP_JOIN: &str = "Microsoft.Network/publicIPAddresses/join/action";

/// The public IP an ipConfiguration asks for.
#[derive(Clone, Debug)]
pub enum Public {
    /// None.
    None,
    /// An existing public IP by id.
    Existing(String),
    /// A new public IP `name` taken from prefix `prefix` (a NIC PUT without an id).
    Create {
        /// Its name.
        name: String,
        /// The prefix id.
        prefix: String,
    },
    /// A scale set `publicIPAddressConfiguration` named `name` on prefix `prefix`.
    Vmss {
        /// Its name.
        name: String,
        /// The prefix id.
        prefix: String,
    },
}

/// One ipConfiguration as a PUT asks for it.
#[derive(Clone, Debug)]
pub struct Wanted {
    /// Its name.
    pub name: String,
    /// Its properties as sent, without the read-only ones.
    pub props: Map<String, Value>,
    /// `subnet.id` as sent.
    pub subnet: String,
    /// `primary`.
    pub primary: bool,
    /// A static address asked for.
    pub static_ip: Option<Ipv4Addr>,
    /// ASG ids.
    pub asgs: Vec<String>,
    /// Its public IP.
    pub public: Public,
}

/// Read one ipConfiguration of a NIC body (`vmss` false) or a scale set model (`vmss` true).
///
/// # Errors
/// No name or no subnet.
pub fn wanted(cfg: &Value, vmss: bool) -> Result<Wanted, ArmError> {
    let name = cfg["name"]
        .as_str()
        .ok_or_else(|| ArmError::invalid_body("an ipConfiguration has no name"))?
        .to_owned();
    let mut props = cfg["properties"].as_object().cloned().unwrap_or_default();
    let subnet = props
        .get("subnet")
        .and_then(|s| s["id"].as_str())
        .ok_or_else(|| ArmError::invalid_body(&format!("ipConfiguration {name} has no subnet.id")))?
        .to_owned();
    let static_ip = (props
        .get("privateIPAllocationMethod")
        .and_then(Value::as_str)
        == Some("Static"))
    .then(|| {
        props
            .get("privateIPAddress")
            .and_then(Value::as_str)?
            .parse()
            .ok()
    })
    .flatten();
    let asgs = props
        .get("applicationSecurityGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a["id"].as_str().map(str::to_owned))
        .collect();
    let public = if vmss {
        match props.get("publicIPAddressConfiguration") {
            Some(c) if !c.is_null() => Public::Vmss {
                name: c["name"].as_str().unwrap_or("publicip").to_owned(),
                prefix: c["properties"]["publicIPPrefix"]["id"]
                    .as_str()
                    .ok_or_else(|| ArmError::invalid_body("publicIPAddressConfiguration without publicIPPrefix.id (the emulator models prefix IPs only)"))?
                    .to_owned(),
            },
            _ => Public::None,
        }
    } else {
        match props.get("publicIPAddress") {
            Some(p) if !p.is_null() => match p["id"].as_str() {
                Some(id) => Public::Existing(id.to_owned()),
                None => Public::Create {
                    name: p["name"].as_str().unwrap_or("publicip").to_owned(),
                    prefix: p["properties"]["publicIPPrefix"]["id"]
                        .as_str()
                        .ok_or_else(|| {
                            ArmError::invalid_body(
                                "publicIPAddress without id or publicIPPrefix.id",
                            )
                        })?
                        .to_owned(),
                },
            },
            _ => Public::None,
        }
    };
    for read_only in [
        "provisioningState",
        "privateIPAddress",
        "publicIPAddress",
        "publicIPAddressConfiguration",
    ] {
        props.remove(read_only);
    }
    Ok(Wanted {
        primary: props
            .get("primary")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        name,
        props,
        subnet,
        static_ip,
        asgs,
        public,
    })
}

struct Old {
    address: Option<Ipv4Addr>,
    subnet: String,
    state: String,
    asgs: Vec<String>,
}

fn old_configs(old: &[Value]) -> BTreeMap<String, Old> {
    old.iter()
        .filter_map(|c| {
            let p = &c["properties"];
            Some((
                c["name"].as_str()?.to_ascii_lowercase(),
                Old {
                    address: p["privateIPAddress"].as_str().and_then(|a| a.parse().ok()),
                    subnet: p["subnet"]["id"]
                        .as_str()
                        .unwrap_or("")
                        .to_ascii_lowercase(),
                    state: p["provisioningState"]
                        .as_str()
                        .unwrap_or("Succeeded")
                        .to_owned(),
                    asgs: p["applicationSecurityGroups"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a["id"].as_str().map(str::to_ascii_lowercase))
                        .collect(),
                },
            ))
        })
        .collect()
}

/// Reconcile NIC `nic_id`'s ipConfigurations (`old`, as stored) to `wanted`: the configs to
/// store. New configs (and changed ones) get `state`; kept ones keep theirs.
///
/// # Errors
/// More than 256 configs, an unknown subnet or prefix, a full subnet or prefix, a taken static
/// address.
pub fn reconcile(
    m: &mut Model,
    nic_id: &str,
    old: &[Value],
    mut wanted: Vec<Wanted>,
    state: &str,
    linked: &mut Linked,
) -> Result<Vec<Value>, ArmError> {
    if wanted.len() > IP_CONFIGS_PER_NIC {
        return Err(ArmError::too_many_ip_configs(nic_id, wanted.len()));
    }
    if !wanted.iter().any(|w| w.primary)
        && let Some(first) = wanted.first_mut()
    {
        first.primary = true;
    }
    let olds = old_configs(old);
    let cfg_id = |name: &str| format!("{nic_id}/ipConfigurations/{name}");
    // Configs gone, or moved to another subnet, give their address back first.
    for (name, o) in &olds {
        let stays = wanted
            .iter()
            .any(|w| same(&w.name, name) && same(&w.subnet, &o.subnet));
        if !stays {
            m.release(&cfg_id(name));
        }
        if !wanted.iter().any(|w| same(&w.name, name)) {
            detach_public(m, &cfg_id(name));
        }
    }
    // Capacity per subnet, checked before any address is handed out.
    let mut needed: BTreeMap<usize, usize> = BTreeMap::new();
    for w in &wanted {
        let subnet = m
            .subnet_by_id(&w.subnet)
            .ok_or_else(|| ArmError::invalid_reference(&w.subnet, nic_id))?;
        let kept = olds
            .get(&w.name.to_ascii_lowercase())
            .is_some_and(|o| same(&o.subnet, &w.subnet));
        if !kept {
            *needed.entry(subnet).or_default() += 1;
        }
    }
    for (subnet, n) in &needed {
        let s = &m.subnets[*subnet];
        if s.free() < *n as u64 {
            return Err(ArmError::subnet_full(&s.id, &s.cidr.to_string(), *n));
        }
    }
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let id = cfg_id(&w.name);
        let subnet = m.subnet_by_id(&w.subnet).expect("checked above");
        let subnet_id = m.subnets[subnet].id.clone();
        let old = olds
            .get(&w.name.to_ascii_lowercase())
            .filter(|o| same(&o.subnet, &w.subnet));
        let (address, cfg_state) = match (old, w.static_ip) {
            (Some(o), None) if o.address.is_some() => {
                (o.address.expect("checked"), o.state.clone())
            }
            (Some(o), Some(a)) if o.address == Some(a) => (a, o.state.clone()),
            (kept, requested) => {
                m.release(&id);
                let a = match requested {
                    Some(a) => {
                        m.claim(subnet, &id, a)?;
                        a
                    }
                    None => m.allocate(subnet, &id)?,
                };
                if kept.is_none() {
                    linked.push((SUBNET_JOIN.to_owned(), subnet_id.clone()));
                }
                (a, state.to_owned())
            }
        };
        let old_asgs = old.map(|o| o.asgs.clone()).unwrap_or_default();
        for asg in &w.asgs {
            if !old_asgs.contains(&asg.to_ascii_lowercase()) {
                linked.push((ASG_JOIN.to_owned(), asg.clone()));
            }
        }
        let public = attach_public(m, &id, &w.public, nic_id, linked)?;
        let mut props = w.props;
        props.insert("provisioningState".into(), json!(cfg_state));
        props.insert("privateIPAddress".into(), json!(address.to_string()));
        props
            .entry("privateIPAllocationMethod")
            .or_insert_with(|| json!("Dynamic"));
        props.insert("privateIPAddressVersion".into(), json!("IPv4"));
        props.insert("subnet".into(), json!({"id": subnet_id}));
        props.insert("primary".into(), json!(w.primary));
        if let Some(p) = public {
            props.insert("publicIPAddress".into(), json!({"id": p}));
        }
        out.push(json!({"name": w.name, "id": id, "etag": m.etag(),
            "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
            "properties": props}));
    }
    Ok(out)
}

/// Unhook every public IP from config `cfg_id` (scale set ones are deleted).
fn detach_public(m: &mut Model, cfg_id: &str) {
    let on = |p: &PublicIp| p.ip_config.as_deref().is_some_and(|c| same(c, cfg_id));
    m.public_ips.retain(|p| !(p.vmss_managed && on(p)));
    for p in &mut m.public_ips {
        if on(p) {
            p.ip_config = None;
        }
    }
}

/// Give config `cfg_id` the public IP `public` asks for; its id.
fn attach_public(
    m: &mut Model,
    cfg_id: &str,
    public: &Public,
    nic_id: &str,
    linked: &mut Linked,
) -> Result<Option<String>, ArmError> {
    let current = m
        .public_ips
        .iter()
        .find(|p| p.ip_config.as_deref().is_some_and(|c| same(c, cfg_id)))
        .map(|p| (p.id.clone(), p.name.clone(), p.vmss_managed));
    match public {
        Public::None => {
            detach_public(m, cfg_id);
            Ok(None)
        }
        Public::Existing(id) => {
            if current.as_ref().is_some_and(|(c, _, _)| same(c, id)) {
                return Ok(current.map(|c| c.0));
            }
            detach_public(m, cfg_id);
            let ip = m
                .public_ips
                .iter_mut()
                .find(|p| same(&p.id, id))
                .ok_or_else(|| ArmError::invalid_reference(id, nic_id))?;
            ip.ip_config = Some(cfg_id.to_owned());
            let id = ip.id.clone();
            linked.push((PUBLIC_IP_JOIN.to_owned(), id.clone()));
            Ok(Some(id))
        }
        Public::Create { name, prefix } | Public::Vmss { name, prefix } => {
            let vmss = matches!(public, Public::Vmss { .. });
            if let Some((id, current_name, managed)) = &current
                && same(current_name, name)
                && *managed == vmss
            {
                return Ok(Some(id.clone()));
            }
            detach_public(m, cfg_id);
            let prefix_id = m
                .prefixes
                .iter()
                .find(|p| same(&p.id, prefix))
                .map(|p| p.id.clone())
                .ok_or_else(|| ArmError::invalid_reference(prefix, nic_id))?;
            let address = m
                .prefix_free(&prefix_id)
                .ok_or_else(|| ArmError::prefix_full(&prefix_id, vmss))?;
            let (id, name) = if vmss {
                (format!("{cfg_id}/publicIPAddresses/{name}"), name.clone())
            } else {
                let nic_name = nic_id.rsplit('/').next().unwrap_or("nic");
                let mut candidate = name.clone();
                let mut n = 1;
                while m
                    .public_ips
                    .iter()
                    .any(|p| !p.vmss_managed && same(&p.name, &candidate))
                {
                    candidate = if n == 1 {
                        format!("{name}-{nic_name}")
                    } else {
                        format!("{name}-{nic_name}-{n}")
                    };
                    n += 1;
                }
                (m.network_id("publicIPAddresses", &candidate), candidate)
            };
            if !vmss {
                linked.push((PUBLIC_IP_WRITE.to_owned(), id.clone()));
                linked.push((PUBLIC_IP_JOIN.to_owned(), id.clone()));
            }
            linked.push((PREFIX_JOIN.to_owned(), prefix_id.clone()));
            m.public_ips.push(PublicIp {
                id: id.clone(),
                name,
                address,
                prefix_id: Some(prefix_id),
                ip_config: Some(cfg_id.to_owned()),
                vmss_managed: vmss,
            });
            Ok(Some(id))
        }
    }
}

/// Fields of a NIC body that only the server sets.
const NIC_READ_ONLY: [&str; 7] = [
    "provisioningState",
    "resourceGuid",
    "macAddress",
    "virtualMachine",
    "primary",
    "hostedWorkloads",
    "vnetEncryptionSupported",
];

/// `Interfaces.CreateOrUpdate` of NIC `name` with `body`; whether it was created.
///
/// # Errors
/// A body that is not a NIC, or any error of [`reconcile`].
pub fn put_nic(
    m: &mut Model,
    name: &str,
    body: Value,
    state: &str,
    linked: &mut Linked,
) -> Result<bool, ArmError> {
    let Value::Object(mut nic) = body else {
        return Err(ArmError::invalid_body("the body is not a JSON object"));
    };
    let existing = m.nic_index(&m.network_id("networkInterfaces", name));
    let old = existing.map(|i| m.nics[i].clone());
    let id = old
        .as_ref()
        .and_then(|o| o["id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| m.network_id("networkInterfaces", name));
    let mut props = match nic.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    let configs = props
        .remove("ipConfigurations")
        .and_then(|c| c.as_array().cloned())
        .unwrap_or_default();
    if configs.is_empty() {
        return Err(ArmError::new(
            400,
            "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
            format!("Network interface {id} must have at least one IP configuration."),
        ));
    }
    let wanted = configs
        .iter()
        .map(|c| wanted(c, false))
        .collect::<Result<Vec<_>, _>>()?;
    let old_configs = old
        .as_ref()
        .and_then(|o| o["properties"]["ipConfigurations"].as_array().cloned())
        .unwrap_or_default();
    let rendered = reconcile(m, &id, &old_configs, wanted, state, linked)?;
    let old_props = old
        .as_ref()
        .map_or(Value::Null, |o| o["properties"].clone());
    let nsg = props
        .get("networkSecurityGroup")
        .and_then(|n| n["id"].as_str());
    if let Some(nsg) = nsg
        && !old_props["networkSecurityGroup"]["id"]
            .as_str()
            .is_some_and(|o| same(o, nsg))
    {
        linked.push((NSG_JOIN.to_owned(), nsg.to_owned()));
    }
    for field in NIC_READ_ONLY {
        props.remove(field);
        if !old_props[field].is_null() {
            props.insert(field.to_owned(), old_props[field].clone());
        }
    }
    props.insert("provisioningState".into(), json!(state));
    if !props.contains_key("resourceGuid") {
        props.insert("resourceGuid".into(), json!(m.uuid()));
    }
    if !props.contains_key("macAddress") {
        props.insert("macAddress".into(), json!(m.mac()));
    }
    props.insert("ipConfigurations".into(), Value::Array(rendered));
    let stored_name = old
        .as_ref()
        .and_then(|o| o["name"].as_str().map(str::to_owned))
        .unwrap_or_else(|| name.to_owned());
    nic.insert("name".into(), json!(stored_name));
    nic.insert("id".into(), json!(id));
    nic.insert("etag".into(), json!(m.etag()));
    nic.insert("type".into(), json!("Microsoft.Network/networkInterfaces"));
    nic.entry("location").or_insert_with(|| json!(m.location));
    nic.insert("properties".into(), Value::Object(props));
    let nic = Value::Object(nic);
    match existing {
        Some(i) => m.nics[i] = nic,
        None => m.nics.push(nic),
    }
    Ok(existing.is_none())
}

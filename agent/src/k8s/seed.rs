//! What node discovery writes into the agent's own CiliumNode, computed from the v1.Node, the
//! agent configuration and the custom CNI configuration (Cilium's `pkg/nodediscovery`,
//! `../shared/spec/cilium-ipam.md` §5 and §6.4). Pure: the caller fetches and writes.
//!
//! Seeded: the Node's labels, an owner reference to the Node, `spec.instance-id` (in `eni` mode
//! from the instance metadata the caller read, else from the provider ID), `spec.addresses`
//! from the Node's addresses, the IPAM watermarks and static IP tags (cloud and CRD modes),
//! `spec.eni` (eni: the `eni-*` keys, the instance metadata, the custom configuration, in
//! §6.4's precedence), `spec.azure.interface-name` (azure), and in `kubernetes` mode the Node's
//! pod CIDRs as `spec.ipam.podCIDRs`. Every other field is left as it is.

use std::collections::BTreeMap;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{config::NodeSeedConfig, ipam::mode::IpamMode};

/// The custom CNI configuration's parts that override the seeding keys (`read-cni-conf`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct CustomCniConf {
    /// `ipam` overrides.
    #[serde(default)]
    pub ipam: CustomIpam,
    /// `azure` overrides.
    #[serde(default)]
    pub azure: CustomAzure,
    /// `eni` overrides (present: the configuration has an `eni` section).
    #[serde(default)]
    pub eni: Option<crate::crd::eni::EniSpec>,
}

/// `ipam` in a custom CNI configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct CustomIpam {
    /// Overrides `ipam-min-allocate` when non-zero.
    #[serde(rename = "min-allocate", default)]
    pub min_allocate: u32,
    /// Overrides `ipam-pre-allocate` when non-zero.
    #[serde(rename = "pre-allocate", default)]
    pub pre_allocate: u32,
    /// Overrides `ipam-static-ip-tags` when non-empty.
    #[serde(rename = "static-ip-tags", default)]
    pub static_ip_tags: BTreeMap<String, String>,
}

/// `azure` in a custom CNI configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct CustomAzure {
    /// Overrides `azure-interface-name` when non-empty.
    #[serde(rename = "interface-name", default)]
    pub interface_name: String,
}

/// What the EC2 instance metadata service said about this node (`eni` mode); a field it did
/// not answer is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceMetadata {
    /// `meta-data/instance-id`.
    pub instance_id: String,
    /// `meta-data/instance-type`.
    pub instance_type: String,
    /// `meta-data/placement/availability-zone`.
    pub availability_zone: String,
    /// The VPC of the primary interface (`…/macs/<mac>/vpc-id`).
    pub vpc_id: String,
    /// The subnet of the primary interface (`…/macs/<mac>/subnet-id`).
    pub subnet_id: String,
}

/// The seed for one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seed {
    /// The CiliumNode's labels (the Node's).
    pub labels: BTreeMap<String, String>,
    /// The owner reference to the Node.
    pub owner: Value,
    /// `spec.instance-id`: the instance metadata's (eni), else the provider ID's, if any.
    pub instance_id: Option<String>,
    /// `spec.addresses`.
    pub addresses: Vec<Value>,
    /// `spec.ipam` fields to set.
    pub ipam: Map<String, Value>,
    /// `spec.azure.interface-name`.
    pub azure_interface: Option<String>,
    /// `spec.eni` fields to set (eni mode).
    pub eni: Map<String, Value>,
}

/// Why a node cannot be seeded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SeedError {
    /// Azure IPAM and the Node has no provider ID (Cilium's fatal message).
    #[error("Spec.ProviderID in k8s node resource must be set for Azure IPAM")]
    NoProviderId,
    /// Azure IPAM and the Node's provider ID is not an `azure://` one (Cilium's fatal message).
    #[error("Spec.ProviderID in k8s node resource must have prefix azure://")]
    NotAzureProviderId {
        /// The Node's `spec.providerID`.
        provider_id: String,
    },
    /// `kubernetes` mode and the Node has no pod CIDR yet.
    #[error(
        "v1.Node {node} has no pod CIDR (spec.podCIDRs, spec.podCIDR or the \
         network.cilium.io/ipv4-pod-cidr annotation); ipam=kubernetes needs the controller \
         manager's --allocate-node-cidrs, or use another IPAM mode"
    )]
    NoPodCidr {
        /// The node.
        node: String,
    },
}

/// Compute the seed; `instance` is what IMDS said (read in `eni` mode only).
///
/// # Errors
/// Azure mode without an `azure://` provider ID; `kubernetes` mode without a pod CIDR.
pub fn seed(
    node: &Node,
    mode: IpamMode,
    config: &NodeSeedConfig,
    custom: &CustomCniConf,
    instance: &InstanceMetadata,
) -> Result<Seed, SeedError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let provider = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap_or_default();
    let mut out = Seed {
        labels: node.metadata.labels.clone().unwrap_or_default(),
        owner: json!({
            "apiVersion": "v1",
            "kind": "Node",
            "name": name,
            "uid": node.metadata.uid.clone().unwrap_or_default(),
        }),
        instance_id: instance_id(&provider),
        addresses: addresses(node),
        ..Seed::default()
    };
    if mode == IpamMode::Azure {
        if provider.is_empty() {
            return Err(SeedError::NoProviderId);
        }
        if !provider.starts_with("azure://") {
            return Err(SeedError::NotAzureProviderId {
                provider_id: provider,
            });
        }
        let interface = first_non_empty(&custom.azure.interface_name, &config.azure_interface_name);
        out.azure_interface = (!interface.is_empty()).then(|| interface.to_owned());
    }
    if mode == IpamMode::Eni {
        out.eni = eni_seed(&config.eni, custom.eni.as_ref(), instance, &provider);
        if !instance.instance_id.is_empty() {
            out.instance_id = Some(instance.instance_id.clone());
        }
    }
    let cloud = matches!(
        mode,
        IpamMode::Crd | IpamMode::Eni | IpamMode::Azure | IpamMode::AlibabaCloud
    );
    if cloud {
        let min = non_zero(custom.ipam.min_allocate, config.min_allocate);
        let pre = non_zero(custom.ipam.pre_allocate, config.pre_allocate);
        // Cilium does not apply the custom configuration's max-allocate.
        for (key, value) in [
            ("min-allocate", min),
            ("pre-allocate", pre),
            ("max-allocate", config.max_allocate),
        ] {
            if value != 0 {
                out.ipam.insert(key.to_owned(), json!(value));
            }
        }
    }
    let tags = if custom.ipam.static_ip_tags.is_empty() {
        &config.static_ip_tags
    } else {
        &custom.ipam.static_ip_tags
    };
    if !tags.is_empty() {
        out.ipam.insert("static-ip-tags".to_owned(), json!(tags));
    }
    if mode == IpamMode::Kubernetes {
        let cidrs = pod_cidrs(node);
        if cidrs.is_empty() {
            return Err(SeedError::NoPodCidr { node: name });
        }
        let text: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
        out.ipam.insert("podCIDRs".to_owned(), json!(text));
    }
    Ok(out)
}

/// `spec.eni` from the `eni-*` keys and the instance metadata (type, zone, VPC, node subnet),
/// overridden by the custom configuration's non-empty values (its `vpc-id` wins over IMDS's;
/// its `delete-on-termination` is copied even when unset, Cilium's quirk), and the
/// availability zone from an `aws:///<zone>/<id>` provider ID when IMDS did not say it.
fn eni_seed(
    config: &crate::crd::eni::EniSpec,
    custom: Option<&crate::crd::eni::EniSpec>,
    instance: &InstanceMetadata,
    provider: &str,
) -> Map<String, Value> {
    let mut eni = config.clone();
    for (mine, imds) in [
        (&mut eni.instance_type, &instance.instance_type),
        (&mut eni.availability_zone, &instance.availability_zone),
        (&mut eni.vpc_id, &instance.vpc_id),
        (&mut eni.node_subnet_id, &instance.subnet_id),
    ] {
        if !imds.is_empty() {
            mine.clone_from(imds);
        }
    }
    if let Some(c) = custom {
        if c.first_interface_index.is_some_and(|i| i != 0) {
            eni.first_interface_index = c.first_interface_index;
        }
        for (mine, theirs) in [
            (&mut eni.security_groups, &c.security_groups),
            (&mut eni.subnet_ids, &c.subnet_ids),
        ] {
            if !theirs.is_empty() {
                mine.clone_from(theirs);
            }
        }
        for (mine, theirs) in [
            (&mut eni.security_group_tags, &c.security_group_tags),
            (&mut eni.subnet_tags, &c.subnet_tags),
            (&mut eni.exclude_interface_tags, &c.exclude_interface_tags),
        ] {
            if !theirs.is_empty() {
                mine.clone_from(theirs);
            }
        }
        if !c.vpc_id.is_empty() {
            eni.vpc_id.clone_from(&c.vpc_id);
        }
        if c.use_primary_address.is_some() {
            eni.use_primary_address = c.use_primary_address;
        }
        if c.disable_prefix_delegation.is_some() {
            eni.disable_prefix_delegation = c.disable_prefix_delegation;
        }
        eni.delete_on_termination = c.delete_on_termination;
    }
    if eni.availability_zone.is_empty()
        && let Some(rest) = provider.strip_prefix("aws:///")
        && let Some((zone, _)) = rest.split_once('/')
    {
        zone.clone_into(&mut eni.availability_zone);
    }
    match serde_json::to_value(&eni) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

fn non_zero(custom: u32, config: u32) -> u32 {
    if custom != 0 { custom } else { config }
}

fn first_non_empty<'a>(custom: &'a str, config: &'a str) -> &'a str {
    if custom.is_empty() { config } else { custom }
}

/// `spec.instance-id` from a provider ID: Azure's resource ID lower-cased (as Cilium), AWS's
/// instance ID (`aws:///<zone>/<i-…>`).
#[must_use]
pub fn instance_id(provider: &str) -> Option<String> {
    if let Some(id) = provider.strip_prefix("azure://") {
        return (!id.is_empty()).then(|| id.to_lowercase());
    }
    if let Some(rest) = provider.strip_prefix("aws://") {
        let id = rest.rsplit('/').next().unwrap_or_default();
        return id.starts_with("i-").then(|| id.to_owned());
    }
    None
}

fn addresses(node: &Node) -> Vec<Value> {
    let Some(list) = node.status.as_ref().and_then(|s| s.addresses.as_ref()) else {
        return Vec::new();
    };
    list.iter()
        .filter(|a| matches!(a.type_.as_str(), "InternalIP" | "ExternalIP"))
        .filter(|a| a.address.parse::<std::net::IpAddr>().is_ok())
        .map(|a| json!({"type": a.type_, "ip": a.address}))
        .collect()
}

/// The Node's pod CIDRs in Cilium's order of preference: `spec.podCIDRs` (at most two), else
/// `spec.podCIDR`, else the `network.cilium.io/ipv{4,6}-pod-cidr` annotations (and their
/// `io.cilium.network.*` aliases). Masked, as Go's `net.ParseCIDR` does.
#[must_use]
pub fn pod_cidrs(node: &Node) -> Vec<IpNet> {
    let spec = node.spec.as_ref();
    let parse = |s: &str| s.parse::<IpNet>().ok().map(|n| n.trunc());
    if let Some(list) = spec.and_then(|s| s.pod_cidrs.as_ref())
        && !list.is_empty()
        && list.len() <= 2
    {
        return list.iter().filter_map(|s| parse(s)).collect();
    }
    if let Some(one) = spec.and_then(|s| s.pod_cidr.as_deref())
        && let Some(net) = parse(one)
    {
        return vec![net];
    }
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let mut out = Vec::new();
    for family in ["ipv4", "ipv6"] {
        let found = [
            format!("network.cilium.io/{family}-pod-cidr"),
            format!("io.cilium.network.{family}-pod-cidr"),
        ]
        .iter()
        .find_map(|k| annotations.get(k).and_then(|v| parse(v)));
        out.extend(found);
    }
    out
}

/// Write the seed into a CiliumNode's JSON; returns whether anything changed.
pub fn apply(doc: &mut Value, seed: &Seed) -> bool {
    let before = doc.clone();
    let root = object(doc);
    let meta = object(root.entry("metadata").or_insert_with(|| json!({})));
    if seed.labels.is_empty() {
        meta.remove("labels");
    } else {
        meta.insert("labels".to_owned(), json!(seed.labels));
    }
    let owners = meta.entry("ownerReferences").or_insert_with(|| json!([]));
    if !owners.is_array() {
        *owners = json!([]);
    }
    if let Value::Array(list) = owners {
        let kind_name = |o: &Value| (o["kind"].clone(), o["name"].clone());
        list.retain(|o| kind_name(o) != kind_name(&seed.owner));
        list.push(seed.owner.clone());
    }
    let spec = object(root.entry("spec").or_insert_with(|| json!({})));
    if let Some(id) = &seed.instance_id {
        spec.insert("instance-id".to_owned(), json!(id));
    }
    if !seed.addresses.is_empty() {
        // The router addresses (`CiliumInternalIP`) are the agent's own: they stay.
        let internal = crate::store::writeback::CILIUM_INTERNAL_IP;
        let routers: Vec<Value> = spec
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|a| a.get("type").and_then(Value::as_str) == Some(internal))
            .cloned()
            .collect();
        let mut addresses = seed.addresses.clone();
        addresses.extend(routers);
        spec.insert("addresses".to_owned(), Value::Array(addresses));
    }
    if !seed.ipam.is_empty() {
        let ipam = object(spec.entry("ipam").or_insert_with(|| json!({})));
        for (k, v) in &seed.ipam {
            ipam.insert(k.clone(), v.clone());
        }
    }
    if !seed.eni.is_empty() {
        let eni = object(spec.entry("eni").or_insert_with(|| json!({})));
        for (k, v) in &seed.eni {
            eni.insert(k.clone(), v.clone());
        }
        if seed.eni.get("delete-on-termination").is_none() {
            eni.remove("delete-on-termination");
        }
    }
    if let Some(name) = &seed.azure_interface {
        let azure = object(spec.entry("azure").or_insert_with(|| json!({})));
        azure.insert("interface-name".to_owned(), json!(name));
    }
    *doc != before
}

/// `value` as an object, replacing anything else by `{}`.
fn object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

#[cfg(test)]
mod tests;

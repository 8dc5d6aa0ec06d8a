//! The emulated estate in memory: subnets with their address bookkeeping (Azure reserves the
//! network address, the first three host addresses and the broadcast address; a subnet's
//! `properties.ipConfigurations` lists every address holder), NICs stored as their ARM JSON
//! (standalone and scale set ones alike, unknown fields kept), standalone VMs, scale sets with
//! their instances' models, public IP prefixes and public IPs, and pending async operations.
//! Built from a [`Scenario`]; the PUT logic lives in `nics.rs` and `vmss.rs`, HTTP elsewhere.

use std::{collections::BTreeMap, net::Ipv4Addr};

use ipnet::Ipv4Net;
use serde_json::{Map, Value};

mod inventory;
mod render;

use super::{
    error::ArmError,
    scenario::{LroSpec, NicSpec, Scenario},
};

/// A subnet and who holds its addresses.
#[derive(Clone, Debug)]
pub struct Subnet {
    /// Canonical ARM id (`.../Microsoft.Network/virtualNetworks/V/subnets/S`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// `addressPrefix`.
    pub cidr: Ipv4Net,
    /// lower(ipConfiguration id) → (id as created, address).
    pub holders: BTreeMap<String, (String, Ipv4Addr)>,
}

impl Subnet {
    /// `2^host - 5 - len(ipConfigurations)`, as Cilium computes it from a subnet GET.
    #[must_use]
    pub fn free(&self) -> u64 {
        let host = 32 - u32::from(self.cidr.prefix_len());
        let size = 1u64 << host;
        size.saturating_sub(5)
            .saturating_sub(self.holders.len() as u64)
    }

    /// The lowest address no one holds (skipping the 4 reserved at the bottom and broadcast).
    #[must_use]
    pub fn lowest_free(&self) -> Option<Ipv4Addr> {
        let start = u32::from(self.cidr.network()) + 4;
        let end = u32::from(self.cidr.broadcast());
        let used: std::collections::BTreeSet<Ipv4Addr> =
            self.holders.values().map(|(_, a)| *a).collect();
        (start..end).map(Ipv4Addr::from).find(|a| !used.contains(a))
    }

    /// Whether `addr` may be given out (in range, not reserved, not held).
    #[must_use]
    pub fn usable(&self, addr: Ipv4Addr) -> bool {
        let n = u32::from(addr);
        n >= u32::from(self.cidr.network()) + 4
            && n < u32::from(self.cidr.broadcast())
            && !self.holders.values().any(|(_, a)| *a == addr)
    }
}

/// A standalone VM.
#[derive(Clone, Debug)]
pub struct Vm {
    /// Its name.
    pub name: String,
    /// ARM id.
    pub id: String,
    /// `properties.vmId`.
    pub unique_id: String,
    /// Its NICs' ids (primary first).
    pub nic_ids: Vec<String>,
}

/// A scale set.
#[derive(Clone, Debug)]
pub struct ScaleSet {
    /// Its name.
    pub name: String,
    /// ARM id.
    pub id: String,
    /// The NIC configurations new instances get.
    pub model: Vec<NicSpec>,
    /// Its instances.
    pub instances: Vec<Instance>,
}

/// A scale set instance.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Instance id (`virtualMachines/{index}`).
    pub index: String,
    /// ARM id.
    pub id: String,
    /// `properties.vmId`.
    pub vm_id: String,
    /// Its `properties` as last written (networkProfileConfiguration, storageProfile, unknown
    /// fields), without the read-only ones.
    pub properties: Map<String, Value>,
    /// `provisioningState`.
    pub state: String,
}

/// A public IP prefix.
#[derive(Clone, Debug)]
pub struct Prefix {
    /// ARM id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// `ipPrefix`.
    pub cidr: Ipv4Net,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// `provisioningState`.
    pub state: String,
}

/// A public IP.
#[derive(Clone, Debug)]
pub struct PublicIp {
    /// ARM id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// `ipAddress`.
    pub address: Ipv4Addr,
    /// The prefix it came from.
    pub prefix_id: Option<String>,
    /// The ipConfiguration it is attached to.
    pub ip_config: Option<String>,
    /// Created by a scale set `publicIPAddressConfiguration` (deleted with it).
    pub vmss_managed: bool,
}

/// What an async operation finishes.
#[derive(Clone, Debug)]
pub struct AsyncOp {
    /// Operation id.
    pub id: String,
    /// `Microsoft.Network` or `Microsoft.Compute`.
    pub namespace: String,
    /// `InProgress` polls left.
    pub remaining: u32,
    /// Done.
    pub done: bool,
    /// lower(NIC id)s whose states become `Succeeded`.
    pub nics: Vec<String>,
    /// (scale set, instance) whose state becomes `Succeeded`.
    pub instance: Option<(String, String)>,
    /// RFC 3339 start.
    pub started: String,
}

/// The whole estate.
#[derive(Clone, Debug)]
pub struct Model {
    /// Subscription id.
    pub subscription: String,
    /// The nodes' resource group.
    pub group: String,
    /// Region.
    pub location: String,
    /// Resource groups that exist (the nodes' and the vnets').
    pub groups: Vec<String>,
    /// Subnets.
    pub subnets: Vec<Subnet>,
    /// Every NIC (standalone and scale set) as ARM JSON.
    pub nics: Vec<Value>,
    /// Standalone VMs.
    pub vms: Vec<Vm>,
    /// Scale sets.
    pub scale_sets: Vec<ScaleSet>,
    /// Public IP prefixes.
    pub prefixes: Vec<Prefix>,
    /// Public IPs.
    pub public_ips: Vec<PublicIp>,
    /// Async operations.
    pub ops: Vec<AsyncOp>,
    /// How PUTs answer.
    pub lro: LroSpec,
    /// Items per list page.
    pub page_size: usize,
    serial: u64,
}

/// Case-insensitive equality.
#[must_use]
pub fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

impl Model {
    /// Build the estate a scenario describes.
    ///
    /// # Errors
    /// The scenario is inconsistent (unknown subnet, duplicate names, a subnet too small).
    pub fn new(s: &Scenario) -> Result<Self, ArmError> {
        let mut m = Self {
            subscription: s.subscription_id.clone(),
            group: s.resource_group.clone(),
            location: s.location.clone(),
            groups: vec![s.resource_group.clone()],
            subnets: Vec::new(),
            nics: Vec::new(),
            vms: Vec::new(),
            scale_sets: Vec::new(),
            prefixes: Vec::new(),
            public_ips: Vec::new(),
            ops: Vec::new(),
            lro: s.lro.clone(),
            page_size: s.page_size.max(1),
            serial: 0,
        };
        for vnet in &s.vnets {
            let rg = vnet
                .resource_group
                .clone()
                .unwrap_or_else(|| s.resource_group.clone());
            if !m.groups.iter().any(|g| same(g, &rg)) {
                m.groups.push(rg.clone());
            }
            for sn in &vnet.subnets {
                m.subnets.push(Subnet {
                    id: format!(
                        "/subscriptions/{}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{}/subnets/{}",
                        s.subscription_id, vnet.name, sn.name
                    ),
                    name: sn.name.clone(),
                    cidr: sn.cidr.trunc(),
                    holders: BTreeMap::new(),
                });
            }
        }
        for p in &s.public_ip_prefixes {
            let id = m.network_id("publicIPPrefixes", &p.name);
            m.prefixes.push(Prefix {
                id: id.clone(),
                name: p.name.clone(),
                cidr: p.prefix.trunc(),
                tags: p.tags.clone(),
                state: p.provisioning_state.clone(),
            });
            for ip in &p.public_ips {
                let address = match ip.address {
                    Some(a) => a,
                    None => m
                        .prefix_free(&id)
                        .ok_or_else(|| ArmError::prefix_full(&id, false))?,
                };
                m.public_ips.push(PublicIp {
                    id: m.network_id("publicIPAddresses", &ip.name),
                    name: ip.name.clone(),
                    address,
                    prefix_id: Some(id.clone()),
                    ip_config: None,
                    vmss_managed: false,
                });
            }
        }
        for vm in &s.vms {
            m.add_vm(&vm.name, &vm.nics)?;
        }
        for set in &s.scale_sets {
            let indices: Vec<(u32, Option<Vec<NicSpec>>)> = match &set.instances {
                Some(list) => list.iter().map(|i| (i.index, i.nics.clone())).collect(),
                None => (0..set.capacity.unwrap_or(0)).map(|i| (i, None)).collect(),
            };
            m.scale_sets.push(ScaleSet {
                id: m.compute_id("virtualMachineScaleSets", &set.name),
                name: set.name.clone(),
                model: set.nics.clone(),
                instances: Vec::new(),
            });
            for (index, nics) in indices {
                m.add_instance(&set.name, index, nics.as_deref())?;
            }
        }
        Ok(m)
    }

    /// A fresh number (etags, MACs, ids).
    pub fn next(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    /// A UUID-shaped string unique to this model.
    pub fn uuid(&mut self) -> String {
        let n = self.next();
        let r = fastrand::u64(..);
        format!(
            "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
            (r >> 32) as u32,
            (r >> 16) & 0xffff,
            r & 0xfff,
            n & 0xfff,
            n
        )
    }

    /// A fresh weak etag.
    pub fn etag(&mut self) -> String {
        format!("W/\"{}\"", self.uuid())
    }

    /// `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/{kind}/{name}`.
    #[must_use]
    pub fn network_id(&self, kind: &str, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/{kind}/{name}",
            self.subscription, self.group
        )
    }

    /// `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/{kind}/{name}`.
    #[must_use]
    pub fn compute_id(&self, kind: &str, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/{kind}/{name}",
            self.subscription, self.group
        )
    }

    /// Resolve a scenario subnet reference (`vnet/subnet` or a unique subnet name).
    ///
    /// # Errors
    /// No such subnet, or the name is ambiguous.
    pub fn subnet_ref(&self, reference: &str) -> Result<usize, ArmError> {
        let found: Vec<usize> = self
            .subnets
            .iter()
            .enumerate()
            .filter(|(_, s)| match reference.split_once('/') {
                Some((vnet, name)) => {
                    same(&s.name, name)
                        && s.id
                            .to_ascii_lowercase()
                            .contains(&format!("/virtualnetworks/{}/", vnet.to_ascii_lowercase()))
                }
                None => same(&s.name, reference),
            })
            .map(|(i, _)| i)
            .collect();
        match found.as_slice() {
            [i] => Ok(*i),
            [] => Err(ArmError::new(
                400,
                "InvalidScenario",
                format!("no subnet {reference:?}"),
            )),
            _ => Err(ArmError::new(
                400,
                "InvalidScenario",
                format!("subnet {reference:?} is ambiguous: name the vnet"),
            )),
        }
    }

    /// The subnet with this id (case-insensitive).
    #[must_use]
    pub fn subnet_by_id(&self, id: &str) -> Option<usize> {
        self.subnets.iter().position(|s| same(&s.id, id))
    }

    /// The NIC with this id (case-insensitive).
    #[must_use]
    pub fn nic_index(&self, id: &str) -> Option<usize> {
        self.nics
            .iter()
            .position(|n| same(n["id"].as_str().unwrap_or(""), id))
    }

    /// The scale set with this name.
    #[must_use]
    pub fn scale_set(&self, name: &str) -> Option<usize> {
        self.scale_sets.iter().position(|s| same(&s.name, name))
    }

    /// (scale set, instance) positions.
    #[must_use]
    pub fn instance(&self, set: &str, index: &str) -> Option<(usize, usize)> {
        let s = self.scale_set(set)?;
        let i = self.scale_sets[s]
            .instances
            .iter()
            .position(|i| same(&i.index, index))?;
        Some((s, i))
    }

    /// Give the lowest free address of subnet `subnet` to `holder`.
    ///
    /// # Errors
    /// `SubnetIsFull`.
    pub fn allocate(&mut self, subnet: usize, holder: &str) -> Result<Ipv4Addr, ArmError> {
        let s = &mut self.subnets[subnet];
        if s.free() == 0 {
            return Err(ArmError::subnet_full(&s.id, &s.cidr.to_string(), 1));
        }
        let addr = s
            .lowest_free()
            .ok_or_else(|| ArmError::subnet_full(&s.id, &s.cidr.to_string(), 1))?;
        s.holders
            .insert(holder.to_ascii_lowercase(), (holder.to_owned(), addr));
        Ok(addr)
    }

    /// Give `addr` of subnet `subnet` to `holder`.
    ///
    /// # Errors
    /// The address is taken, reserved or outside the subnet.
    pub fn claim(&mut self, subnet: usize, holder: &str, addr: Ipv4Addr) -> Result<(), ArmError> {
        let s = &mut self.subnets[subnet];
        if !s.usable(addr) {
            return Err(ArmError::address_unavailable(&addr.to_string(), &s.id));
        }
        s.holders
            .insert(holder.to_ascii_lowercase(), (holder.to_owned(), addr));
        Ok(())
    }

    /// Take an address back from `holder`, whichever subnet it is in.
    pub fn release(&mut self, holder: &str) {
        let key = holder.to_ascii_lowercase();
        for s in &mut self.subnets {
            s.holders.remove(&key);
        }
    }

    /// The lowest address of prefix `prefix_id` no public IP has.
    #[must_use]
    pub fn prefix_free(&self, prefix_id: &str) -> Option<Ipv4Addr> {
        let p = self.prefixes.iter().find(|p| same(&p.id, prefix_id))?;
        (u32::from(p.cidr.network())..=u32::from(p.cidr.broadcast()))
            .map(Ipv4Addr::from)
            .find(|a| !self.public_ips.iter().any(|ip| ip.address == *a))
    }
}

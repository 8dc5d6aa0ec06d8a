//! The cloud interfaces of the own CiliumNode as the node side of the cloud IPAM modes reads
//! them (`eni`, `azure`, `alibabacloud`): the result metadata of an allocated address (Cilium's
//! `buildENIAllocationResult` and `buildAllocationResult`: the master MAC, gateway, CIDRs and
//! interface number its source routing is built from) and the ENIs the device configurator
//! brings up, checked as Cilium's `validateENIConfig` does. Pure: it reads what
//! `observe_node` handed it and never touches links, rules or the cloud.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr},
};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::mode::IpamMode;
use crate::crd::{
    azure::AzureInterface,
    eni::{Eni, EniSpec},
    node::CiliumNode,
};

/// Tag of an `AlibabaCloud` ENI holding its device index (Cilium's `cilium-eni-index`).
pub const ALIBABA_ENI_INDEX_TAG: &str = "cilium-eni-index";

/// Where a pod address's traffic must leave the node: the result metadata of §6.1/§3.3.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PodRouting {
    /// The pod address.
    pub ip: IpAddr,
    /// MAC of the interface owning the address (`master-mac`).
    pub mac: String,
    /// The interface's subnet gateway.
    pub gateway: IpAddr,
    /// Destinations reached through the interface when masquerading (`cidrs`).
    pub cidrs: Vec<IpNet>,
    /// The interface's device index (`interface-number`); the table is `10 +` it.
    pub interface_number: u32,
    /// Azure's "compat" form: priority 110, table = ifindex of the MAC's link.
    #[serde(default)]
    pub compat: bool,
}

/// Why an address has no routing metadata (Cilium's wording).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RoutingError {
    /// No ENI of `status.eni.enis` holds the address.
    #[error("unable to find ENI for IP {ip}")]
    NoEniForIp {
        /// The address.
        ip: IpAddr,
    },
    /// The interface named by the address's `spec.ipam.pool` resource is not in the status.
    #[error("failed to associate IP {ip} inside CiliumNode: unable to find ENI {resource}")]
    NoEni {
        /// The address.
        ip: IpAddr,
        /// Its `resource`.
        resource: String,
    },
    /// The interface's subnet gives no gateway.
    #[error("invalid gateway for IP {ip} on interface {interface}")]
    InvalidGateway {
        /// The address.
        ip: IpAddr,
        /// The interface.
        interface: String,
    },
    /// The interface has no MAC.
    #[error("invalid mac {mac:?} of interface {interface}")]
    InvalidMac {
        /// The interface.
        interface: String,
        /// The MAC as written.
        mac: String,
    },
}

/// Why `status.eni.enis` is not consistent yet (Cilium's `validateENIConfig` texts).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EniConfigError {
    /// An ENI has no `ip`.
    #[error("primary IP not set for ENI {id}")]
    NoPrimaryIp {
        /// The ENI.
        id: String,
    },
    /// An ENI has no `subnet.cidr`.
    #[error("subnet CIDR not set for ENI {id}")]
    NoSubnetCidr {
        /// The ENI.
        id: String,
    },
    /// An ENI has no `vpc.primary-cidr`.
    #[error("VPC Primary CIDR not set for ENI {id}")]
    NoVpcPrimaryCidr {
        /// The ENI.
        id: String,
    },
    /// A `spec.ipam.pool` entry names an ENI the status does not have.
    #[error("ENI {id} not found in status")]
    NotInStatus {
        /// The ENI.
        id: String,
    },
    /// A `spec.ipam.pool` entry's ENI does not have that address.
    #[error("ENI {id} does not have address {ip}")]
    NoAddress {
        /// The ENI.
        id: String,
        /// The address.
        ip: String,
    },
}

/// One ENI the device configurator brings up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EniDevice {
    /// ENI id.
    pub id: String,
    /// MAC (the link is found by it).
    pub mac: String,
    /// Device index.
    pub number: i64,
    /// `<primary ip>/<subnet bits>`, added to the link unless `use-primary-address`.
    pub primary: Option<IpNet>,
}

/// The own CiliumNode's cloud parts, as last observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloudInput {
    eni_spec: EniSpec,
    enis: BTreeMap<String, Eni>,
    azure: Vec<AzureInterface>,
    alibaba: Vec<AlibabaEni>,
    /// `spec.ipam.pool`: address → resource.
    resources: BTreeMap<String, String>,
}

/// The fields of an `AlibabaCloud` ENI (`status.alibaba-cloud.enis`, kept opaque on the wire).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct AlibabaEni {
    id: String,
    mac: String,
    vswitch_cidr: Option<IpNet>,
    number: u32,
}

impl From<&CiliumNode> for CloudInput {
    fn from(node: &CiliumNode) -> Self {
        let status = node.status.as_ref();
        Self {
            eni_spec: node.spec.eni.clone().unwrap_or_default(),
            enis: status
                .and_then(|s| s.eni.as_ref())
                .map(|e| e.enis.clone())
                .unwrap_or_default(),
            azure: status
                .and_then(|s| s.azure.as_ref())
                .map(|a| a.interfaces.clone())
                .unwrap_or_default(),
            alibaba: status
                .and_then(|s| s.alibaba_cloud.as_ref())
                .map(alibaba_enis)
                .unwrap_or_default(),
            resources: node
                .spec
                .ipam
                .as_ref()
                .map(|i| {
                    i.pool
                        .iter()
                        .map(|(ip, a)| (ip.clone(), a.resource.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// `status.alibaba-cloud.enis` read tolerantly: an ENI without an id is skipped.
fn alibaba_enis(status: &Value) -> Vec<AlibabaEni> {
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_owned();
    status["enis"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, eni)| AlibabaEni {
            id: text(eni, "network-interface-id"),
            mac: text(eni, "mac-address"),
            vswitch_cidr: eni["vswitch"]["cidr"].as_str().and_then(|c| c.parse().ok()),
            number: eni["tags"][ALIBABA_ENI_INDEX_TAG]
                .as_str()
                .and_then(|n| n.parse().ok())
                .unwrap_or_default(),
        })
        .filter(|eni| !eni.id.is_empty())
        .collect()
}

impl CloudInput {
    /// `spec.eni.use-primary-address` (default false).
    #[must_use]
    pub fn use_primary_address(&self) -> bool {
        self.eni_spec.use_primary_address.unwrap_or(false)
    }

    /// Cilium's `validateENIConfig`: every ENI has its primary IP, its subnet CIDR and its VPC's
    /// primary CIDR (a VPC may have no other CIDR), and
    /// every `spec.ipam.pool` entry names an ENI of the status holding that address.
    ///
    /// # Errors
    /// The first inconsistency, in Cilium's words.
    pub fn validate_enis(&self) -> Result<(), EniConfigError> {
        for (id, eni) in &self.enis {
            let id = id.clone();
            if eni.ip.is_none() {
                return Err(EniConfigError::NoPrimaryIp { id });
            }
            if eni.subnet.as_ref().and_then(|s| s.cidr).is_none() {
                return Err(EniConfigError::NoSubnetCidr { id });
            }
            let vpc = eni.vpc.as_ref();
            if vpc.and_then(|v| v.primary_cidr).is_none() {
                return Err(EniConfigError::NoVpcPrimaryCidr { id });
            }
        }
        for (ip, resource) in &self.resources {
            let Some(eni) = self.enis.get(resource) else {
                return Err(EniConfigError::NotInStatus {
                    id: resource.clone(),
                });
            };
            if !eni.addresses.iter().any(|a| a.to_string() == *ip) {
                return Err(EniConfigError::NoAddress {
                    id: resource.clone(),
                    ip: ip.clone(),
                });
            }
        }
        Ok(())
    }

    /// The ENIs the device configurator handles: those not excluded by `spec.eni`.
    #[must_use]
    pub fn eni_devices(&self) -> Vec<EniDevice> {
        self.enis
            .values()
            .filter(|eni| !eni.is_excluded_by_spec(&self.eni_spec))
            .map(|eni| EniDevice {
                id: eni.id.clone(),
                mac: eni.mac.clone(),
                number: eni.number,
                primary: eni
                    .ip
                    .zip(eni.subnet.as_ref().and_then(|s| s.cidr))
                    .and_then(|(ip, subnet)| IpNet::new(ip, subnet.prefix_len()).ok()),
            })
            .collect()
    }

    /// The routing metadata of `ip` in `mode` (`None` outside the cloud modes). `extra` are
    /// the CIDRs every result carries besides the interface's (the native-routing CIDR).
    ///
    /// # Errors
    /// No interface owns the address, or it lacks a gateway or MAC (Cilium's wording).
    pub fn pod_routing(
        &self,
        mode: IpamMode,
        ip: IpAddr,
        extra: &[IpNet],
    ) -> Result<Option<PodRouting>, RoutingError> {
        match mode {
            IpamMode::Eni => self.eni_routing(ip, extra).map(Some),
            IpamMode::Azure => self.azure_routing(ip, extra).map(Some),
            IpamMode::AlibabaCloud => self.alibaba_routing(ip).map(Some),
            _ => Ok(None),
        }
    }

    fn eni_routing(&self, ip: IpAddr, extra: &[IpNet]) -> Result<PodRouting, RoutingError> {
        let eni = self
            .enis
            .values()
            .find(|eni| {
                eni.ip == Some(ip)
                    || eni.addresses.contains(&ip)
                    || eni.prefixes.iter().any(|p| p.contains(&ip))
            })
            .ok_or(RoutingError::NoEniForIp { ip })?;
        let subnet = eni.subnet.as_ref().and_then(|s| s.cidr);
        let gateway =
            subnet
                .and_then(|s| nth_address(s, 1))
                .ok_or_else(|| RoutingError::InvalidGateway {
                    ip,
                    interface: eni.id.clone(),
                })?;
        let vpc = eni.vpc.clone().unwrap_or_default();
        let cidrs = vpc
            .primary_cidr
            .into_iter()
            .chain(vpc.cidrs)
            .chain(extra.iter().copied())
            .collect();
        routing(ip, &eni.id, &eni.mac, gateway, cidrs, eni.number, false)
    }

    fn resource(&self, ip: IpAddr) -> String {
        self.resources
            .get(&ip.to_string())
            .cloned()
            .unwrap_or_default()
    }

    fn azure_routing(&self, ip: IpAddr, extra: &[IpNet]) -> Result<PodRouting, RoutingError> {
        let resource = self.resource(ip);
        let nic = self
            .azure
            .iter()
            .find(|nic| !resource.is_empty() && nic.id == resource)
            .ok_or_else(|| RoutingError::NoEni {
                ip,
                resource: resource.clone(),
            })?;
        let gateway = nic.gateway.ok_or_else(|| RoutingError::InvalidGateway {
            ip,
            interface: nic.id.clone(),
        })?;
        let cidrs = nic
            .subnet_cidr()
            .into_iter()
            .chain(extra.iter().copied())
            .collect();
        // Cilium hard-codes the interface number "0" for Azure.
        routing(ip, &nic.id, &nic.mac, gateway, cidrs, 0, true)
    }

    fn alibaba_routing(&self, ip: IpAddr) -> Result<PodRouting, RoutingError> {
        let resource = self.resource(ip);
        let eni = self
            .alibaba
            .iter()
            .find(|eni| !resource.is_empty() && eni.id == resource)
            .ok_or_else(|| RoutingError::NoEni {
                ip,
                resource: resource.clone(),
            })?;
        // The vswitch's gateway is its last address minus 2 (x.x.x.253 in a /24).
        let gateway = eni
            .vswitch_cidr
            .and_then(|c| match c {
                IpNet::V4(v4) => Some(IpAddr::V4(Ipv4Addr::from(
                    u32::from(v4.broadcast()).checked_sub(2)?,
                ))),
                IpNet::V6(_) => None,
            })
            .ok_or_else(|| RoutingError::InvalidGateway {
                ip,
                interface: eni.id.clone(),
            })?;
        let cidrs = eni.vswitch_cidr.into_iter().collect();
        routing(
            ip,
            &eni.id,
            &eni.mac,
            gateway,
            cidrs,
            i64::from(eni.number),
            false,
        )
    }
}

/// The `n`th address of `net` (IPv4 only: Cilium's gateway of an ENI subnet is `.1`).
fn nth_address(net: IpNet, n: u32) -> Option<IpAddr> {
    match net.trunc() {
        IpNet::V4(v4) => Some(IpAddr::V4(Ipv4Addr::from(
            u32::from(v4.network()).checked_add(n)?,
        ))),
        IpNet::V6(_) => None,
    }
}

fn routing(
    ip: IpAddr,
    interface: &str,
    mac: &str,
    gateway: IpAddr,
    cidrs: Vec<IpNet>,
    number: i64,
    compat: bool,
) -> Result<PodRouting, RoutingError> {
    if parse_mac(mac).is_none() {
        return Err(RoutingError::InvalidMac {
            interface: interface.to_owned(),
            mac: mac.to_owned(),
        });
    }
    Ok(PodRouting {
        ip,
        mac: mac.to_ascii_lowercase(),
        gateway,
        cidrs: IpNet::aggregate(
            &cidrs
                .into_iter()
                .filter(|c| c.addr().is_ipv4() == ip.is_ipv4())
                .map(|c| c.trunc())
                .collect(),
        ),
        interface_number: u32::try_from(number).unwrap_or_default(),
        compat,
    })
}

/// `aa:bb:cc:dd:ee:ff` as six bytes.
#[must_use]
pub fn parse_mac(mac: &str) -> Option<[u8; 6]> {
    let parts: Vec<u8> = mac
        .split(':')
        .map(|p| u8::from_str_radix(p, 16).ok().filter(|_| p.len() == 2))
        .collect::<Option<_>>()?;
    parts.try_into().ok()
}

#[cfg(test)]
mod tests;

//! The estate's address mutations with EC2's rules: AssignPrivateIpAddresses (the instance
//! type's per-interface limit with the primary and every /28 counted, a full subnet, no whole
//! /28 free, an address in use), UnassignPrivateIpAddresses (never the primary, only what the
//! ENI holds), IPv6 /80 prefixes, and Elastic IP association. Every failure is EC2's error and
//! changes nothing.

use std::net::Ipv4Addr;

use ipnet::{Ipv4Net, Ipv6Net};

use super::{Association, Eni, Model};
use crate::ec2::error::Ec2Error;

/// What AssignPrivateIpAddresses asks for.
#[derive(Clone, Debug)]
pub enum Assign {
    /// `SecondaryPrivateIpAddressCount`.
    Count(u32),
    /// `PrivateIpAddress.N`.
    Addresses(Vec<Ipv4Addr>),
    /// `Ipv4PrefixCount`.
    Prefixes(u32),
}

/// What AssignPrivateIpAddresses gave.
#[derive(Clone, Debug, Default)]
pub struct Assigned {
    /// New addresses.
    pub ips: Vec<Ipv4Addr>,
    /// New prefixes.
    pub prefixes: Vec<Ipv4Net>,
}

impl Model {
    /// The most address slots `eni` may hold: its instance type's, or the detached limit.
    fn slot_limit(&self, eni: &Eni) -> u32 {
        eni.attachment
            .as_ref()
            .and_then(|a| self.instances.get(&a.instance))
            .and_then(|i| self.types.get(&i.type_name))
            .map_or(self.unattached_limit, |t| t.ipv4_per_interface)
    }

    /// AssignPrivateIpAddresses.
    ///
    /// # Errors
    /// Unknown ENI, the address limit (`PrivateIpAddressLimitExceeded`), a full subnet, no
    /// free /28 (`InvalidParameterValue` "There aren't sufficient free Ipv4 addresses or
    /// prefixes"), an address in use.
    pub fn assign(&mut self, eni_id: &str, what: &Assign) -> Result<Assigned, Ec2Error> {
        let eni = self.eni(eni_id)?;
        let limit = self.slot_limit(eni);
        let adding = match what {
            Assign::Count(n) | Assign::Prefixes(n) => *n,
            Assign::Addresses(a) => u32::try_from(a.len()).unwrap_or(u32::MAX),
        };
        if eni.slots() + adding > limit {
            return Err(Ec2Error::ip_limit(eni_id, limit));
        }
        let subnet = eni.subnet.clone();
        let sn = self
            .subnets
            .get_mut(&subnet)
            .expect("an ENI's subnet exists");
        let mut out = Assigned::default();
        match what {
            Assign::Count(n) => {
                out.ips = sn
                    .take(*n, eni_id)
                    .ok_or_else(|| Ec2Error::subnet_full(&sn.id))?;
            }
            Assign::Prefixes(n) => {
                out.prefixes = sn
                    .take_prefixes(*n, eni_id)
                    .ok_or_else(Ec2Error::no_free_prefixes)?;
            }
            Assign::Addresses(ips) => {
                for ip in ips {
                    if !sn.hold(*ip, eni_id) {
                        sn.release(&out.ips);
                        return Err(Ec2Error::client(
                            "InvalidIPAddress.InUse",
                            format!("Address {ip} is in use or not in subnet {}.", sn.id),
                        ));
                    }
                    out.ips.push(*ip);
                }
            }
        }
        let eni = self.enis.get_mut(eni_id).expect("looked up above");
        eni.ips.extend(&out.ips);
        eni.prefixes.extend(&out.prefixes);
        Ok(out)
    }

    /// UnassignPrivateIpAddresses: addresses and /28 prefixes.
    ///
    /// # Errors
    /// Unknown ENI, the primary address, an address or prefix the ENI does not hold.
    pub fn unassign(
        &mut self,
        eni_id: &str,
        ips: &[Ipv4Addr],
        prefixes: &[Ipv4Net],
    ) -> Result<(), Ec2Error> {
        let eni = self.eni(eni_id)?;
        for ip in ips {
            if eni.ips.first() == Some(ip) {
                return Err(Ec2Error::invalid_value(format!(
                    "The primary private IP address {ip} cannot be unassigned from network interface {eni_id}."
                )));
            }
            if !eni.ips.contains(ip) {
                return Err(Ec2Error::invalid_value(format!(
                    "Some of the specified addresses are not assigned to interface {eni_id}"
                )));
            }
        }
        for p in prefixes {
            if !eni.prefixes.contains(p) {
                return Err(Ec2Error::invalid_value(format!(
                    "Some of the specified prefixes are not assigned to interface {eni_id}"
                )));
            }
        }
        let subnet = eni.subnet.clone();
        let sn = self
            .subnets
            .get_mut(&subnet)
            .expect("an ENI's subnet exists");
        sn.release(ips);
        for p in prefixes {
            sn.release_prefix(*p);
        }
        let eni = self.enis.get_mut(eni_id).expect("looked up above");
        eni.ips.retain(|ip| !ips.contains(ip));
        eni.prefixes.retain(|p| !prefixes.contains(p));
        Ok(())
    }

    /// AssignIpv6Addresses with `Ipv6PrefixCount`: the new /80s.
    ///
    /// # Errors
    /// Unknown ENI, or a subnet without IPv6.
    pub fn assign_ipv6_prefixes(
        &mut self,
        eni_id: &str,
        count: u32,
    ) -> Result<Vec<Ipv6Net>, Ec2Error> {
        let subnet = self.eni(eni_id)?.subnet.clone();
        let sn = self
            .subnets
            .get_mut(&subnet)
            .expect("an ENI's subnet exists");
        if sn.ipv6.is_none() {
            return Err(Ec2Error::invalid_value(format!(
                "Subnet {subnet} does not have an IPv6 CIDR block"
            )));
        }
        let new: Vec<_> = (0..count).filter_map(|_| sn.take_ipv6_prefix()).collect();
        self.enis
            .get_mut(eni_id)
            .expect("looked up above")
            .ipv6_prefixes
            .extend(&new);
        Ok(new)
    }

    /// AssociateAddress: the association id.
    ///
    /// # Errors
    /// Unknown allocation or ENI, or an associated address without `AllowReassociation`.
    pub fn associate(
        &mut self,
        allocation: &str,
        eni_id: &str,
        reassociate: bool,
    ) -> Result<String, Ec2Error> {
        self.eni(eni_id)?;
        let i = self
            .eips
            .iter()
            .position(|a| a.allocation_id == allocation)
            .ok_or_else(|| {
                Ec2Error::client(
                    "InvalidAllocationID.NotFound",
                    format!("The allocation ID '{allocation}' does not exist"),
                )
            })?;
        if let Some((old, _)) = &self.eips[i].association {
            if !reassociate {
                return Err(Ec2Error::client(
                    "Resource.AlreadyAssociated",
                    format!("resource {allocation} is already associated with associate-id {old}"),
                ));
            }
            let old = old.clone();
            if let Some(e) = self.enis.get_mut(&old) {
                e.association = None;
            }
        }
        let id = self.new_id("eipassoc");
        let public_ip = self.eips[i].public_ip;
        self.eips[i].association = Some((eni_id.to_owned(), id.clone()));
        self.enis
            .get_mut(eni_id)
            .expect("looked up above")
            .association = Some(Association {
            id: id.clone(),
            allocation_id: allocation.to_owned(),
            public_ip,
        });
        Ok(id)
    }
}

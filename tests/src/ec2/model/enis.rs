//! The estate's mutations with EC2's rules: instances with their primary ENI, ENI creation
//! (addresses, /28 and /80 prefixes from the subnet), attach (running instance, same AZ, free
//! device index, the type's interface and address limits), delete-on-termination, delete (never
//! an attached ENI), assign and unassign (the type's address limit, never the primary), Elastic
//! IP association and instance termination. Every failure is EC2's error and changes nothing.

use std::{net::Ipv4Addr, time::SystemTime};

use ipnet::Ipv4Net;

use super::{Association, Attachment, Eni, Instance, Model};
use crate::ec2::{error::Ec2Error, scenario::InstanceSpec, scenario::Tags};

/// What CreateNetworkInterface (or a scenario) asks for.
#[derive(Clone, Debug, Default)]
pub struct NewEni {
    /// A fixed id (scenarios); none: a fresh one.
    pub id: Option<String>,
    /// The subnet.
    pub subnet: String,
    /// `Description`.
    pub description: String,
    /// `SecurityGroupId.N`.
    pub groups: Vec<String>,
    /// Tags.
    pub tags: Tags,
    /// `PrivateIpAddress` (the primary), if given.
    pub primary: Option<Ipv4Addr>,
    /// `SecondaryPrivateIpAddressCount`.
    pub secondary: u32,
    /// `Ipv4PrefixCount`.
    pub prefixes: u32,
    /// `Ipv6PrefixCount`.
    pub ipv6_prefixes: u32,
}

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
    /// Add an instance and its primary ENI at device 0.
    ///
    /// # Errors
    /// Unknown type or subnet, or no address for the primary ENI.
    pub fn add_instance(&mut self, spec: &InstanceSpec) -> Result<(), Ec2Error> {
        if self.instances.contains_key(&spec.id) {
            return Err(Ec2Error::invalid_value(format!(
                "instance {} exists",
                spec.id
            )));
        }
        if !self.types.contains_key(&spec.instance_type) {
            return Err(Ec2Error::invalid_value(format!(
                "The instance type '{}' does not exist",
                spec.instance_type
            )));
        }
        let subnet = self.subnet(&spec.subnet)?.clone();
        let primary_eni = spec
            .primary_eni
            .clone()
            .unwrap_or_else(|| format!("eni-{}", spec.id.trim_start_matches("i-")));
        self.instances.insert(
            spec.id.clone(),
            Instance {
                id: spec.id.clone(),
                type_name: spec.instance_type.clone(),
                subnet: subnet.id.clone(),
                vpc: subnet.vpc.clone(),
                az: subnet.az.clone(),
                tags: spec.tags.clone(),
                running: true,
            },
        );
        let created = self.create_eni(&NewEni {
            id: Some(primary_eni),
            subnet: subnet.id,
            description: "Primary network interface".to_owned(),
            groups: spec.security_groups.clone(),
            primary: spec.primary_ip,
            secondary: spec.secondary_ips,
            ..NewEni::default()
        });
        let attached = created.and_then(|eni| self.attach(&eni, &spec.id, 0));
        if let Err(e) = attached {
            self.instances.remove(&spec.id);
            return Err(e);
        }
        let instance = self.instances.get_mut(&spec.id).expect("just inserted");
        instance.running = spec.running;
        Ok(())
    }

    /// CreateNetworkInterface: the new ENI's id.
    ///
    /// # Errors
    /// Unknown subnet or group, too many addresses, a full subnet (`InsufficientFreeAddressesInSubnet`),
    /// no free /28 (`InsufficientCidrBlocks`), no IPv6 block.
    pub fn create_eni(&mut self, req: &NewEni) -> Result<String, Ec2Error> {
        let subnet = self.subnet(&req.subnet)?.clone();
        for g in &req.groups {
            let group = self
                .groups
                .iter()
                .find(|x| &x.id == g)
                .ok_or_else(|| Ec2Error::group_not_found(g))?;
            if group.vpc != subnet.vpc {
                return Err(Ec2Error::invalid_value(format!(
                    "Security group {g} and subnet {} belong to different networks.",
                    subnet.id
                )));
            }
        }
        if req.secondary > 0 && req.prefixes > 0 {
            return Err(Ec2Error::combination(
                "SecondaryPrivateIpAddressCount and Ipv4PrefixCount cannot be used together",
            ));
        }
        let id = match &req.id {
            Some(id) if self.enis.contains_key(id) => {
                return Err(Ec2Error::invalid_value(format!(
                    "network interface {id} exists"
                )));
            }
            Some(id) => id.clone(),
            None => self.new_id("eni"),
        };
        let slots = 1 + req.secondary + req.prefixes;
        if slots > self.unattached_limit {
            return Err(Ec2Error::ip_limit(&id, self.unattached_limit));
        }
        if req.ipv6_prefixes > 0 && subnet.ipv6.is_none() {
            return Err(Ec2Error::invalid_value(format!(
                "Subnet {} does not have an IPv6 CIDR block",
                subnet.id
            )));
        }
        let sn = self.subnets.get_mut(&req.subnet).expect("looked up above");
        let mut ips = Vec::new();
        if let Some(p) = req.primary {
            if !sn.hold(p, &id) {
                return Err(Ec2Error::client(
                    "InvalidIPAddress.InUse",
                    format!("Address {p} is in use."),
                ));
            }
            ips.push(p);
        }
        let count = req.secondary + u32::from(req.primary.is_none());
        let Some(more) = sn.take(count, &id) else {
            sn.release(&ips);
            return Err(Ec2Error::subnet_full(&sn.id));
        };
        ips.extend(more);
        let prefixes = if req.prefixes > 0 {
            let Some(p) = sn.take_prefixes(req.prefixes, &id) else {
                sn.release(&ips);
                return Err(Ec2Error::no_cidr_blocks(&sn.id));
            };
            p
        } else {
            Vec::new()
        };
        let ipv6_prefixes = (0..req.ipv6_prefixes)
            .filter_map(|_| sn.take_ipv6_prefix())
            .collect();
        let mac = self.new_mac();
        self.enis.insert(
            id.clone(),
            Eni {
                id: id.clone(),
                subnet: subnet.id.clone(),
                vpc: subnet.vpc.clone(),
                az: subnet.az.clone(),
                description: req.description.clone(),
                mac,
                ips,
                prefixes,
                ipv6_prefixes,
                groups: req.groups.clone(),
                tags: req.tags.clone(),
                attachment: None,
                association: None,
            },
        );
        Ok(id)
    }

    /// AttachNetworkInterface: the attachment id.
    ///
    /// # Errors
    /// Unknown ENI or instance, ENI in use, instance not running, another AZ, the device index
    /// taken, the type's interface limit (`AttachmentLimitExceeded`) or address limit.
    pub fn attach(
        &mut self,
        eni_id: &str,
        instance_id: &str,
        index: u32,
    ) -> Result<String, Ec2Error> {
        let eni = self.eni(eni_id)?;
        let instance = self.instance(instance_id)?;
        if eni.attachment.is_some() {
            return Err(Ec2Error::client(
                "InvalidNetworkInterface.InUse",
                format!("Interface: [{eni_id}] in use."),
            ));
        }
        if !instance.running {
            return Err(Ec2Error::not_running(instance_id));
        }
        if eni.az != instance.az {
            return Err(Ec2Error::invalid_value(format!(
                "The network interface {eni_id} and instance {instance_id} are in different availability zones."
            )));
        }
        let limits = &self.types[&instance.type_name];
        let attached = self.instance_enis(instance_id);
        if attached.iter().any(|e| {
            e.attachment
                .as_ref()
                .is_some_and(|a| a.device_index == index)
        }) {
            return Err(Ec2Error::index_taken(instance_id, index));
        }
        let count = u32::try_from(attached.len()).unwrap_or(u32::MAX) + 1;
        if count > limits.max_interfaces || index >= limits.max_interfaces {
            return Err(Ec2Error::attachment_limit(
                count.max(index + 1),
                &limits.name,
            ));
        }
        if eni.slots() > limits.ipv4_per_interface {
            return Err(Ec2Error::ip_limit(eni_id, limits.ipv4_per_interface));
        }
        let id = self.new_id("eni-attach");
        self.enis
            .get_mut(eni_id)
            .expect("looked up above")
            .attachment = Some(Attachment {
            id: id.clone(),
            instance: instance_id.to_owned(),
            device_index: index,
            delete_on_termination: index == 0,
            time: SystemTime::now(),
        });
        Ok(id)
    }

    /// ModifyNetworkInterfaceAttribute `Attachment.DeleteOnTermination`.
    ///
    /// # Errors
    /// Unknown ENI, or an attachment id that is not the ENI's.
    pub fn set_delete_on_termination(
        &mut self,
        eni_id: &str,
        attachment: &str,
        value: bool,
    ) -> Result<(), Ec2Error> {
        let eni = self
            .enis
            .get_mut(eni_id)
            .ok_or_else(|| Ec2Error::eni_not_found(eni_id))?;
        match &mut eni.attachment {
            Some(a) if a.id == attachment => {
                a.delete_on_termination = value;
                Ok(())
            }
            _ => Err(Ec2Error::client(
                "InvalidAttachmentID.NotFound",
                format!("The attachment ID '{attachment}' does not exist"),
            )),
        }
    }

    /// DeleteNetworkInterface.
    ///
    /// # Errors
    /// Unknown ENI, or an attached one.
    pub fn delete_eni(&mut self, eni_id: &str) -> Result<(), Ec2Error> {
        let eni = self.eni(eni_id)?;
        if eni.attachment.is_some() {
            return Err(Ec2Error::invalid_value(format!(
                "Network interface '{eni_id}' is currently in use."
            )));
        }
        let eni = self.enis.remove(eni_id).expect("looked up above");
        self.free_eni(&eni);
        Ok(())
    }

    fn free_eni(&mut self, eni: &Eni) {
        if let Some(sn) = self.subnets.get_mut(&eni.subnet) {
            sn.release(&eni.ips);
            for p in &eni.prefixes {
                sn.release_prefix(*p);
            }
        }
        for a in &mut self.eips {
            if a.association.as_ref().is_some_and(|(e, _)| *e == eni.id) {
                a.association = None;
            }
        }
    }

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
    ) -> Result<Vec<ipnet::Ipv6Net>, Ec2Error> {
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

    /// Terminate an instance: ENIs marked delete-on-termination go, the others are detached.
    ///
    /// # Errors
    /// Unknown instance.
    pub fn terminate(&mut self, instance_id: &str) -> Result<(), Ec2Error> {
        self.instance(instance_id)?;
        let ids: Vec<String> = self
            .instance_enis(instance_id)
            .iter()
            .map(|e| e.id.clone())
            .collect();
        for id in ids {
            let eni = self.enis.get_mut(&id).expect("listed above");
            let delete = eni
                .attachment
                .take()
                .is_some_and(|a| a.delete_on_termination);
            if delete {
                let eni = self.enis.remove(&id).expect("listed above");
                self.free_eni(&eni);
            }
        }
        self.instances.remove(instance_id);
        Ok(())
    }

    /// Detach an ENI (as DetachNetworkInterface would, for tests that leak one).
    ///
    /// # Errors
    /// Unknown ENI.
    pub fn detach(&mut self, eni_id: &str) -> Result<(), Ec2Error> {
        self.enis
            .get_mut(eni_id)
            .ok_or_else(|| Ec2Error::eni_not_found(eni_id))?
            .attachment = None;
        Ok(())
    }
}

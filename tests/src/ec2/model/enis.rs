//! The estate's mutations with EC2's rules: instances with their primary ENI, ENI creation
//! (addresses, /28 and /80 prefixes from the subnet), attach (running instance, same AZ, free
//! device index, the type's interface and address limits), delete-on-termination, delete (never
//! an attached ENI) and instance termination (addresses: [`super::addresses`]). Every failure
//! is EC2's error and changes nothing.

use std::{net::Ipv4Addr, time::SystemTime};

use super::{Attachment, Eni, Instance, Model};
use crate::ec2::{
    error::Ec2Error,
    scenario::{InstanceSpec, Tags},
};

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

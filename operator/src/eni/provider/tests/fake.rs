//! An in-memory EC2 for the provider's tests: instances and their ENIs, detached ENIs, a
//! subnet's free count, the calls made, and errors injected per action.

use std::{
    collections::{BTreeMap, VecDeque},
    net::IpAddr,
    sync::{Arc, Mutex},
};

use ipnet::IpNet;
use weft_k8s::crd::eni::{AwsSubnet, Eni};

use crate::eni::{
    instances::{Assigned, AttachedEni, Inventory, NetworkState},
    limits::Limits,
    ops::{Classify, Ec2Ops, NewEni, Size},
    vpc::Subnet,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub(super) struct FakeError {
    code: &'static str,
    message: &'static str,
}

impl Classify for FakeError {
    fn is_transient(&self) -> bool {
        self.code == "RequestLimitExceeded"
    }
    fn is_unauthorized(&self) -> bool {
        self.code == "UnauthorizedOperation"
    }
    fn is_prefix_capacity(&self) -> bool {
        self.code == "InsufficientCidrBlocks"
    }
    fn is_index_conflict(&self) -> bool {
        self.message.contains("interface attached at device")
    }
    fn is_not_running(&self) -> bool {
        self.message.contains("is not 'running'")
    }
}

pub(super) const PREFIX_CAPACITY: FakeError = FakeError {
    code: "InsufficientCidrBlocks",
    message: "no /28",
};
pub(super) const INDEX_TAKEN: FakeError = FakeError {
    code: "InvalidParameterValue",
    message: "Instance i-1 already has an interface attached at device index 1",
};
pub(super) const ATTACH_LIMIT: FakeError = FakeError {
    code: "AttachmentLimitExceeded",
    message: "limit",
};

#[derive(Debug, Default)]
pub(super) struct Ec2 {
    /// Instance → its ENIs.
    pub(super) instances: BTreeMap<String, BTreeMap<String, Eni>>,
    /// Detached ENIs.
    pub(super) detached: BTreeMap<String, Eni>,
    pub(super) subnet_free: u64,
    pub(super) next_ip: u32,
    pub(super) next_eni: u32,
    pub(super) calls: Vec<String>,
    /// Errors to answer, per action, in order.
    pub(super) faults: BTreeMap<&'static str, VecDeque<FakeError>>,
    pub(super) elastic_ips: Vec<(String, IpAddr)>,
    /// The `ClientToken` of every creation.
    pub(super) tokens: Vec<String>,
    /// Assignments answer with nothing listed (an answer that could not be read).
    pub(super) silent_answers: bool,
    /// Reads of one instance's ENIs (instance syncs).
    pub(super) instance_reads: usize,
}

impl Ec2 {
    fn fault(&mut self, action: &'static str) -> Result<(), FakeError> {
        match self.faults.get_mut(action).and_then(VecDeque::pop_front) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    fn ip(&mut self) -> IpAddr {
        self.next_ip += 1;
        IpAddr::from([10, 0, 1, u8::try_from(self.next_ip).expect("few")])
    }
    fn eni_mut(&mut self, id: &str) -> Option<&mut Eni> {
        self.instances
            .values_mut()
            .find_map(|i| i.get_mut(id))
            .or_else(|| self.detached.get_mut(id))
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Fake(pub(super) Arc<Mutex<Ec2>>);

impl Fake {
    pub(super) fn calls(&self) -> Vec<String> {
        self.0.lock().unwrap().calls.clone()
    }
    pub(super) fn inject(&self, action: &'static str, error: FakeError) {
        (self.0.lock().unwrap().faults.entry(action).or_default()).push_back(error);
    }
}

pub(super) fn subnet_of(id: &str) -> AwsSubnet {
    AwsSubnet {
        id: id.into(),
        cidr: Some("10.0.0.0/16".parse().unwrap()),
        ..AwsSubnet::default()
    }
}

impl Inventory for Fake {
    type Error = FakeError;

    async fn network(&self) -> Result<NetworkState, FakeError> {
        let ec2 = self.0.lock().unwrap();
        let mut network = NetworkState::default();
        network.subnets.insert(
            "subnet-1".into(),
            Subnet {
                id: "subnet-1".into(),
                availability_zone: "us-east-1a".into(),
                vpc_id: "vpc-1".into(),
                available: ec2.subnet_free,
                ..Subnet::default()
            },
        );
        Ok(network)
    }
    async fn enis(&self, _: &NetworkState) -> Result<Vec<AttachedEni>, FakeError> {
        let ec2 = self.0.lock().unwrap();
        Ok((ec2.instances.iter())
            .flat_map(|(instance, enis)| {
                enis.values().map(|eni| AttachedEni {
                    instance: instance.clone(),
                    eni: eni.clone(),
                })
            })
            .collect())
    }
    async fn instance_enis(&self, instance: &str, _: &NetworkState) -> Result<Vec<Eni>, FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.instance_reads += 1;
        Ok(ec2
            .instances
            .get(instance)
            .map_or_else(Vec::new, |e| e.values().cloned().collect()))
    }
    async fn instance_types(&self) -> Result<BTreeMap<String, Limits>, FakeError> {
        Ok(BTreeMap::from([(
            "m5.large".to_owned(),
            Limits {
                adapters: 3,
                ipv4: 10,
                ipv6: 10,
                hypervisor: "nitro".into(),
                bare_metal: false,
            },
        )]))
    }
}

impl Ec2Ops for Fake {
    async fn assign(&self, eni: &str, size: Size) -> Result<Assigned, FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.calls.push(format!("assign {eni} {size:?}"));
        ec2.fault("assign")?;
        let count = match size {
            Size::Addresses(n) => n,
            Size::Prefixes(n) => n * 16,
        };
        let ips: Vec<IpAddr> = (0..count).map(|_| ec2.ip()).collect();
        let mut prefixes = Vec::new();
        if let Size::Prefixes(n) = size {
            prefixes = (0..n)
                .map(|i| format!("10.0.{}.0/28", 100 + i).parse().unwrap())
                .collect();
            ec2.eni_mut(eni).unwrap().prefixes.extend(prefixes.clone());
        }
        ec2.eni_mut(eni).unwrap().addresses.extend(ips.clone());
        if ec2.silent_answers {
            return Ok(Assigned::default());
        }
        Ok(Assigned {
            addresses: ips,
            prefixes,
        })
    }
    async fn unassign(
        &self,
        eni: &str,
        addresses: &[IpAddr],
        prefixes: &[IpNet],
    ) -> Result<(), FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.calls
            .push(format!("unassign {eni} {addresses:?} {prefixes:?}"));
        ec2.fault("unassign")?;
        let found = ec2.eni_mut(eni).unwrap();
        found
            .addresses
            .retain(|a| !addresses.contains(a) && !prefixes.iter().any(|p| p.contains(a)));
        found.prefixes.retain(|p| !prefixes.contains(p));
        Ok(())
    }
    async fn assign_ipv6_prefix(&self, eni: &str) -> Result<(), FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.calls.push(format!("assign_ipv6 {eni}"));
        ec2.fault("assign_ipv6")?;
        let prefix = "2600:1f18::/80".parse().unwrap();
        ec2.eni_mut(eni).unwrap().ipv6_prefixes.push(prefix);
        Ok(())
    }
    async fn create(&self, new: &NewEni, _: &NetworkState) -> Result<Eni, FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.calls.push(format!(
            "create {} {:?} {:?}{}",
            new.subnet,
            new.size,
            new.security_groups,
            if new.ipv6_prefix { " +ipv6" } else { "" }
        ));
        ec2.tokens.push(new.client_token.clone());
        ec2.fault("create")?;
        ec2.next_eni += 1;
        let id = format!("eni-new{}", ec2.next_eni);
        let primary = ec2.ip();
        let count = match new.size {
            Size::Addresses(n) => n,
            Size::Prefixes(n) => n * 16,
        };
        let mut addresses = vec![primary];
        addresses.extend((0..count).map(|_| ec2.ip()));
        let eni = Eni {
            id: id.clone(),
            ip: Some(primary),
            addresses,
            subnet: Some(subnet_of(&new.subnet)),
            security_groups: new.security_groups.clone(),
            tags: new.tags.clone(),
            description: new.description.clone(),
            ipv6_prefixes: if new.ipv6_prefix {
                vec!["2600:1f18:0:1::/80".parse().unwrap()]
            } else {
                Vec::new()
            },
            ..Eni::default()
        };
        ec2.detached.insert(id, eni.clone());
        Ok(eni)
    }
    async fn attach(&self, eni: &str, instance: &str, index: u64) -> Result<String, FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.calls.push(format!("attach {eni} {instance} {index}"));
        ec2.fault("attach")?;
        let mut found = ec2.detached.remove(eni).unwrap();
        found.number = i64::try_from(index).unwrap();
        ec2.instances
            .entry(instance.into())
            .or_default()
            .insert(eni.into(), found);
        Ok(format!("attach-{eni}"))
    }
    async fn delete_on_termination(&self, eni: &str, _: &str) -> Result<(), FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.calls.push(format!("delete_on_termination {eni}"));
        ec2.fault("modify")
    }
    async fn delete(&self, eni: &str) -> Result<(), FakeError> {
        let mut ec2 = self.0.lock().unwrap();
        ec2.calls.push(format!("delete {eni}"));
        ec2.detached.remove(eni);
        Ok(())
    }
    async fn free_elastic_ips(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, IpAddr)>, FakeError> {
        let ec2 = self.0.lock().unwrap();
        let _ = tags;
        Ok(ec2.elastic_ips.clone())
    }
    async fn detached(
        &self,
        tags: &BTreeMap<String, String>,
        _: &[String],
    ) -> Result<Vec<String>, FakeError> {
        let ec2 = self.0.lock().unwrap();
        Ok((ec2.detached.values())
            .filter(|e| crate::eni::vpc::tags_match(&e.tags, tags))
            .map(|e| e.id.clone())
            .collect())
    }
    async fn associate(&self, allocation: &str, eni: &str) -> Result<(), FakeError> {
        self.0
            .lock()
            .unwrap()
            .calls
            .push(format!("associate {allocation} {eni}"));
        Ok(())
    }
}

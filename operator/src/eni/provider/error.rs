//! Why an ENI operation failed: the EC2 call that failed ([`Call`], typed, so that Cilium's
//! creation conditions are read from it) or a decision that found nothing to do it with.

use std::collections::BTreeMap;

use crate::eni::{
    interfaces::InterfacesError,
    vpc::{NoSecurityGroups, NoSubnet, UnknownSubnets},
};

/// The EC2 call of the allocator that failed, with its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// The full resync.
    Resync,
    /// The instance types' limits.
    Limits,
    /// One instance's ENIs.
    InstanceSync(String),
    /// Addresses (or prefixes) assigned to an ENI.
    Assign {
        /// The ENI.
        eni: String,
        /// /28 prefixes, not addresses.
        prefixes: bool,
    },
    /// Addresses (or prefixes) unassigned from an ENI.
    Unassign {
        /// The ENI.
        eni: String,
        /// /28 prefixes, not addresses.
        prefixes: bool,
    },
    /// A new ENI in a subnet.
    Create(String),
    /// An ENI attached to an instance at a device index.
    Attach {
        /// The ENI.
        eni: String,
        /// The instance.
        instance: String,
        /// The device index.
        index: u64,
    },
    /// An IPv6 /80 prefix assigned to an ENI.
    AssignIpv6(String),
    /// An ENI marked delete-on-termination.
    Mark(String),
    /// The Elastic IPs listed.
    ElasticIps,
    /// An Elastic IP associated with an ENI.
    Associate {
        /// The allocation.
        allocation: String,
        /// The ENI.
        eni: String,
    },
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = |prefixes: bool| if prefixes { "prefixes" } else { "addresses" };
        match self {
            Self::Resync => write!(f, "synchronizing with EC2"),
            Self::Limits => write!(f, "reading the instance types' limits"),
            Self::InstanceSync(instance) => write!(f, "reading the ENIs of {instance}"),
            Self::Assign { eni, prefixes } => write!(f, "assigning {} to {eni}", what(*prefixes)),
            Self::Unassign { eni, prefixes } => {
                write!(f, "unassigning {} from {eni}", what(*prefixes))
            }
            Self::Create(subnet) => write!(f, "creating an ENI in subnet {subnet}"),
            Self::Attach {
                eni,
                instance,
                index,
            } => write!(f, "attaching {eni} to {instance} at index {index}"),
            Self::AssignIpv6(eni) => write!(f, "assigning an IPv6 /80 prefix to {eni}"),
            Self::Mark(eni) => write!(f, "marking {eni} delete-on-termination"),
            Self::ElasticIps => write!(f, "listing the Elastic IPs"),
            Self::Associate { allocation, eni } => write!(f, "associating {allocation} with {eni}"),
        }
    }
}

/// Why an ENI operation failed.
#[derive(Debug, thiserror::Error)]
pub enum EniError<E: std::error::Error + 'static> {
    /// An EC2 call failed.
    #[error("{call}")]
    Ec2 {
        /// The call, with its object.
        call: Call,
        /// EC2's error.
        #[source]
        source: E,
    },
    /// The node's ENIs cannot be read.
    #[error(transparent)]
    Interfaces(#[from] InterfacesError),
    /// The instance is not in the cache.
    #[error("instance {instance} is not known to the instances cache")]
    UnknownInstance {
        /// `spec.instance-id`.
        instance: String,
    },
    /// No subnet for a new ENI.
    #[error(transparent)]
    NoSubnet(#[from] NoSubnet),
    /// `spec.eni.subnet-ids` names subnets EC2 does not list.
    #[error(transparent)]
    UnknownSubnets(#[from] UnknownSubnets),
    /// No security group for a new ENI.
    #[error(transparent)]
    NoSecurityGroups(#[from] NoSecurityGroups),
    /// Every device index tried was taken.
    #[error("no free device index for a new ENI on instance {instance} after {tries} tries")]
    NoIndex {
        /// The instance.
        instance: String,
        /// Attachments tried.
        tries: u32,
    },
    /// No Elastic IP carries the static-IP tags, unassociated.
    #[error("no unassociated EIPs found for tags {tags:?}")]
    NoElasticIp {
        /// `spec.ipam.static-ip-tags`.
        tags: BTreeMap<String, String>,
    },
    /// The instance has no device-0 ENI to take the static IP.
    #[error("no primary ENI found")]
    NoPrimaryEni,
}

impl<E: std::error::Error + 'static> EniError<E> {
    pub(crate) fn ec2(call: Call) -> impl FnOnce(E) -> Self {
        move |source| Self::Ec2 { call, source }
    }
}

//! Start-up sanity rules, pure: pod ranges must stay out of the node's own networks, and the
//! IPAM mode may only change under existing pods the one way Cilium supports (cluster-pool →
//! multi-pool). The daemon gathers the inputs (netlink, the state directory) and decides what
//! is fatal; nothing here does IO.
//!
//! What counts as a clash depends on where the mode's addresses come from:
//! - host-scope modes (`cluster-pool`, `kubernetes`: `spec.ipam.podCIDRs`) and `multi-pool`
//!   (`spec.ipam.pools.allocated`) carve pods out of ranges of their own, so any overlap with
//!   a network the node has an address on, or routes to, is a clash (`10.0.0.0/8` against a
//!   node on `10.0.3.0/24` is the classic one);
//! - the cloud and CRD modes (`crd`, `azure`, `alibabacloud`, `eni`) hand pods secondary
//!   addresses of the node's own subnet by design, so only an address (or ENI prefix) that
//!   contains one of the node's own addresses is a clash.
//!
//! The node's networks never include default routes or the agent's own pod devices
//! ([`is_agent_device`]), whose /32 and /128 routes point at pods.

use std::{fmt, net::IpAddr};

use ipnet::IpNet;

use super::{Family, input::NodeInput, mode::IpamMode};
use crate::config::reference::{ENABLE_IPV4, ENABLE_IPV6};

/// Prefix of the host-side veth of every pod the agent wires (`datapath::host_ifname`).
pub const AGENT_DEVICE_PREFIX: &str = "wft";

/// Whether `device` is one the agent created for a pod (its routes are the agent's own).
#[must_use]
pub fn is_agent_device(device: &str) -> bool {
    device.len() == 15
        && device
            .strip_prefix(AGENT_DEVICE_PREFIX)
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A network the node sits on: the network of one of its addresses, or a route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeNetwork {
    /// The network, host bits cleared.
    pub cidr: IpNet,
    /// Its device.
    pub device: String,
    /// The node's address on it; `None` when it is a route.
    pub address: Option<IpAddr>,
}

impl fmt::Display for NodeNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.address {
            Some(ip) => write!(f, "{} on {} (node address {ip})", self.cidr, self.device),
            None => write!(f, "route {} dev {}", self.cidr, self.device),
        }
    }
}

/// The node's networks worth checking: no default routes, nothing on the agent's pod devices,
/// each network once (an address's network wins over the kernel route for it).
#[must_use]
pub fn node_networks(all: impl IntoIterator<Item = NodeNetwork>) -> Vec<NodeNetwork> {
    let mut out: Vec<NodeNetwork> = Vec::new();
    let mut all: Vec<NodeNetwork> = all
        .into_iter()
        .filter(|n| n.cidr.prefix_len() > 0 && !is_agent_device(&n.device))
        .collect();
    all.sort_by_key(|n| n.address.is_none());
    for n in all {
        let seen = out.iter().any(|o| {
            o.cidr == n.cidr
                && o.device == n.device
                && (o.address == n.address || n.address.is_none())
        });
        if !seen {
            out.push(n);
        }
    }
    out
}

/// Where a pod range comes from (for the message and the fix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeOrigin {
    /// `spec.ipam.podCIDRs` of the node (host-scope modes).
    PodCidr {
        /// The mode (`cluster-pool` or `kubernetes`).
        mode: IpamMode,
    },
    /// A multi-pool CIDR the operator allocated to the node.
    Pool {
        /// Pool name.
        pool: String,
    },
    /// An address (or ENI prefix) of the node's CRD pool, in a cloud or CRD mode.
    Address {
        /// The mode.
        mode: IpamMode,
    },
}

/// A range pods get addresses from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRange {
    /// The range, host bits cleared.
    pub cidr: IpNet,
    /// Where it comes from.
    pub origin: RangeOrigin,
}

impl fmt::Display for PodRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            RangeOrigin::PodCidr { mode } => write!(f, "{mode} pod CIDR {}", self.cidr),
            RangeOrigin::Pool { pool } => write!(f, "pool {pool} CIDR {}", self.cidr),
            RangeOrigin::Address { mode } => write!(f, "{mode} pool address {}", self.cidr),
        }
    }
}

impl PodRange {
    /// How to get out of a clash with this range.
    #[must_use]
    pub fn fix(&self) -> String {
        let family = if self.cidr.addr().is_ipv4() {
            "ipv4"
        } else {
            "ipv6"
        };
        match &self.origin {
            RangeOrigin::PodCidr {
                mode: IpamMode::Kubernetes,
            } => "pick a pod CIDR outside the node's networks: change the cluster CIDR \
                  (kube-controller-manager --cluster-cidr) so the node's spec.podCIDRs do not \
                  overlap them"
                .to_owned(),
            RangeOrigin::PodCidr { .. } => format!(
                "pick a pod CIDR outside the node's networks: change cluster-pool-{family}-cidr \
                 of the operator (and this node's spec.ipam.podCIDRs), or move the node's \
                 network"
            ),
            RangeOrigin::Pool { pool } => format!(
                "pick a pod CIDR outside the node's networks: change spec.{family}.cidrs of \
                 CiliumPodIPPool {pool} (the operator then allocates new blocks), or move the \
                 node's network"
            ),
            RangeOrigin::Address { .. } => format!(
                "remove {} from the node's spec.ipam.pool (or the ENI's addresses): it is the \
                 node's own address",
                self.cidr
            ),
        }
    }
}

/// The ranges `node` gives pods in `mode`.
#[must_use]
pub fn pod_ranges(mode: IpamMode, node: &NodeInput) -> Vec<PodRange> {
    match mode {
        IpamMode::Kubernetes | IpamMode::ClusterPool => node
            .pod_cidrs
            .iter()
            .map(|c| PodRange {
                cidr: c.trunc(),
                origin: RangeOrigin::PodCidr { mode },
            })
            .collect(),
        IpamMode::MultiPool => node
            .pools_allocated
            .iter()
            .flat_map(|a| {
                a.cidrs.iter().map(|c| PodRange {
                    cidr: c.trunc(),
                    origin: RangeOrigin::Pool {
                        pool: a.pool.clone(),
                    },
                })
            })
            .collect(),
        IpamMode::Eni => node
            .eni_allocated
            .iter()
            .flat_map(|a| &a.cidrs)
            .map(|c| PodRange {
                cidr: c.trunc(),
                origin: RangeOrigin::Address { mode },
            })
            .collect(),
        IpamMode::Crd | IpamMode::Azure | IpamMode::AlibabaCloud => node
            .crd_pool
            .iter()
            .flat_map(|pool| pool.keys())
            .filter_map(|ip| ip.parse::<IpAddr>().ok())
            .map(|ip| PodRange {
                cidr: IpNet::from(ip),
                origin: RangeOrigin::Address { mode },
            })
            .collect(),
        IpamMode::DelegatedPlugin => Vec::new(),
    }
}

/// A pod range that clashes with a network of the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// The pod range.
    pub range: PodRange,
    /// The node's network.
    pub network: NodeNetwork,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} overlaps {}: {}",
            self.range,
            self.network,
            self.range.fix()
        )
    }
}

/// Whether two networks share an address.
#[must_use]
pub fn nets_overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

fn clashes(range: &PodRange, network: &NodeNetwork) -> bool {
    match range.origin {
        RangeOrigin::Address { .. } => network.address.is_some_and(|ip| range.cidr.contains(&ip)),
        _ => nets_overlap(&range.cidr, &network.cidr),
    }
}

/// Every clash between `ranges` and `networks`.
#[must_use]
pub fn overlaps(ranges: &[PodRange], networks: &[NodeNetwork]) -> Vec<Overlap> {
    ranges
        .iter()
        .flat_map(|r| {
            networks.iter().filter(|n| clashes(r, n)).map(|n| Overlap {
                range: r.clone(),
                network: n.clone(),
            })
        })
        .collect()
}

/// The node network an address handed out in `mode` would clash with, if any.
#[must_use]
pub fn address_clash(mode: IpamMode, ip: IpAddr, networks: &[NodeNetwork]) -> Option<&NodeNetwork> {
    let range = PodRange {
        cidr: IpNet::from(ip),
        origin: match mode {
            IpamMode::Crd | IpamMode::Azure | IpamMode::AlibabaCloud | IpamMode::Eni => {
                RangeOrigin::Address { mode }
            }
            _ => RangeOrigin::PodCidr { mode },
        },
    };
    networks.iter().find(|n| clashes(&range, n))
}

/// What to do about the IPAM mode recorded in the state directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeDecision {
    /// Same mode (or nothing recorded and no pods): go on.
    Keep,
    /// Record the current mode (first start, a change with no pods, or the supported
    /// migration).
    Record,
}

/// Why start-up was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SanityError {
    /// Pod ranges overlap the node's own networks.
    #[error("{}", overlaps.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Overlap {
        /// Every clash found.
        overlaps: Vec<Overlap>,
    },
    /// The IPAM mode changed while pods still hold addresses of the old one.
    #[error(
        "the IPAM mode changed from {from} to {to}, but {pods} pod(s) on this node still hold \
         {from} addresses (endpoint records in {state_dir}); only cluster-pool → multi-pool can \
         be changed in place (as in Cilium). Drain the node's pods first (kubectl drain), or \
         delete {state_dir} once no pod uses the node's network, then start the agent again; or \
         set ipam back to {from}"
    )]
    ModeChange {
        /// The mode the state was created with.
        from: IpamMode,
        /// The configured mode.
        to: IpamMode,
        /// Live pods with endpoint records.
        pods: usize,
        /// The state directory.
        state_dir: String,
    },
    /// Endpoint records hold addresses of a family the configuration turned off.
    #[error(
        "{count} address(es) of live pods in the endpoint records in {records_dir} are {family} \
         ({shown}), but {flag} is now false: they can never be restored, and no new pod would \
         get an address while they wait. Set {flag}=true again, or drain the node's pods \
         (kubectl drain) and remove their records from {records_dir} once no pod uses them, \
         then start the agent again",
        count = held.len(),
        shown = held.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            + if held.len() > 3 { ", …" } else { "" }
    )]
    FamilyOff {
        /// The family turned off.
        family: Family,
        /// Its configuration key.
        flag: &'static str,
        /// `owner address` of each address the records hold in it.
        held: Vec<String>,
        /// The endpoint records directory.
        records_dir: String,
    },
}

/// Refuse records that a configuration without one of their families can never restore:
/// `addrs` are the `(owner, address)` pairs of the live endpoint records in `records_dir`.
///
/// # Errors
/// [`SanityError::FamilyOff`] for the first disabled family that records still hold.
pub fn check_record_families(
    ipv4: bool,
    ipv6: bool,
    addrs: &[(String, IpAddr)],
    records_dir: &str,
) -> Result<(), SanityError> {
    for (family, on, flag) in [
        (Family::V4, ipv4, ENABLE_IPV4.name()),
        (Family::V6, ipv6, ENABLE_IPV6.name()),
    ] {
        let held: Vec<String> = addrs
            .iter()
            .filter(|(_, ip)| Family::of(ip) == family)
            .map(|(owner, ip)| format!("{owner} {ip}"))
            .collect();
        if on || held.is_empty() {
            continue;
        }
        return Err(SanityError::FamilyOff {
            family,
            flag,
            held,
            records_dir: records_dir.to_owned(),
        });
    }
    Ok(())
}

/// Decide about a start in `current` mode when the state directory recorded `recorded` and
/// `live_pods` pods still have endpoint records.
///
/// # Errors
/// [`SanityError::ModeChange`] for any change under live pods other than cluster-pool →
/// multi-pool.
pub fn check_mode_change(
    recorded: Option<IpamMode>,
    current: IpamMode,
    live_pods: usize,
    state_dir: &str,
) -> Result<ModeDecision, SanityError> {
    match recorded {
        Some(from) if from == current => Ok(ModeDecision::Keep),
        // Nothing recorded (first start, or state from before the mode was recorded): the
        // pods' addresses are taken to be of the current mode.
        None => Ok(ModeDecision::Record),
        Some(_) if live_pods == 0 => Ok(ModeDecision::Record),
        Some(IpamMode::ClusterPool) if current == IpamMode::MultiPool => Ok(ModeDecision::Record),
        Some(from) => Err(SanityError::ModeChange {
            from,
            to: current,
            pods: live_pods,
            state_dir: state_dir.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests;

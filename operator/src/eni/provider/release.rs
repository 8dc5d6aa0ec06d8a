//! The releases: the addresses a 1.19 agent's handshake gives back (those inside a prefix
//! as the whole prefix), and for 1.20+ agents (§6.6) the CIDRs on a node's usable ENIs that
//! the agent may give back (its prefixes and single addresses, never an ENI's primary
//! address) and their removal, per ENI whole /28 prefixes first, then single addresses. What
//! the manager marks and when it is due are the manager's ([`crate::cloud::release`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use ipnet::{IpNet, Ipv4Net};
use weft_k8s::crd::eni::{Eni, EniSpec};

use super::{Call, EniError, EniProvider};
use crate::{
    cloud::{CidrRelease, NodeRef, ReleaseAction},
    eni::ops::Ec2Ops,
};

/// What one ENI gives back.
#[derive(Debug, Default)]
struct OnEni {
    subnet: String,
    prefixes: Vec<Ipv4Net>,
    addresses: Vec<Ipv4Net>,
}

/// The IPv4 CIDRs of `eni` an agent may give back.
fn releasable(eni: &Eni) -> impl Iterator<Item = Ipv4Net> + '_ {
    let prefixes = eni.prefixes.iter().filter_map(|p| match p.trunc() {
        IpNet::V4(v4) => Some(v4),
        IpNet::V6(_) => None,
    });
    let singles = (eni.addresses.iter())
        .filter(|a| Some(**a) != eni.ip && !eni.prefixes.iter().any(|p| p.contains(*a)))
        .filter_map(|a| match a {
            IpAddr::V4(v4) => Some(Ipv4Net::from(*v4)),
            IpAddr::V6(_) => None,
        });
    prefixes.chain(singles)
}

impl<C: Ec2Ops> EniProvider<C> {
    /// The 1.19 handshake's release: `action`'s addresses leave their ENI, those inside one
    /// of its prefixes as the whole prefix.
    pub(super) async fn release_addresses(
        &self,
        node: NodeRef<'_, EniSpec>,
        action: &ReleaseAction,
    ) -> Result<(), EniError<C::Error>> {
        let addresses: Vec<IpAddr> = action.ips.iter().filter_map(|a| a.parse().ok()).collect();
        // Addresses inside the ENI's prefixes go back as whole prefixes.
        let prefixes = self
            .with_node(node, |view, _| {
                view.enis
                    .get(&action.interface_id)
                    .map(|eni| {
                        (eni.prefixes.iter())
                            .filter(|p| addresses.iter().any(|a| p.contains(a)))
                            .copied()
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let singles: Vec<IpAddr> = (addresses.iter().copied())
            .filter(|a| !prefixes.iter().any(|p| p.contains(a)))
            .collect();
        let ops = &self.instances.inventory;
        let eni = &action.interface_id;
        if !prefixes.is_empty() {
            ops.unassign(eni, &[], &prefixes)
                .await
                .map_err(EniError::ec2(Call::Unassign {
                    eni: eni.clone(),
                    prefixes: true,
                }))?;
        }
        if !singles.is_empty() {
            ops.unassign(eni, &singles, &[])
                .await
                .map_err(EniError::ec2(Call::Unassign {
                    eni: eni.clone(),
                    prefixes: false,
                }))?;
        }
        let removed: Vec<IpNet> = (prefixes.iter().copied())
            .chain(singles.iter().copied().map(IpNet::from))
            .collect();
        self.instances.remove(node.instance_id, eni, &removed);
        Ok(())
    }

    /// The node's releasable CIDRs (`None`: the instance is not cached).
    pub(super) fn releasable_of(&self, node: NodeRef<'_, EniSpec>) -> Option<BTreeSet<Ipv4Net>> {
        self.with_node(node, |view, _| {
            (view.enis.values())
                .filter(|eni| !eni.is_excluded_by_spec(node.spec))
                .flat_map(releasable)
                .collect()
        })
        .ok()
    }

    /// Remove `cidrs` from the node's ENIs.
    pub(super) async fn release_cidr_list(
        &self,
        node: NodeRef<'_, EniSpec>,
        cidrs: &[Ipv4Net],
    ) -> CidrRelease<EniError<C::Error>> {
        let mut outcome = CidrRelease::default();
        let plan = self.with_node(node, |view, _| {
            let mut per_eni: BTreeMap<String, OnEni> = BTreeMap::new();
            let mut gone = Vec::new();
            for cidr in cidrs {
                let owner = (view.enis.values())
                    .filter(|eni| !eni.is_excluded_by_spec(node.spec))
                    .find(|eni| releasable(eni).any(|c| c == *cidr));
                let Some(eni) = owner else {
                    gone.push(*cidr);
                    continue;
                };
                let on = per_eni.entry(eni.id.clone()).or_insert_with(|| OnEni {
                    subnet: eni
                        .subnet
                        .as_ref()
                        .map(|s| s.id.clone())
                        .unwrap_or_default(),
                    ..OnEni::default()
                });
                if eni.prefixes.contains(&IpNet::V4(*cidr)) {
                    on.prefixes.push(*cidr);
                } else {
                    on.addresses.push(*cidr);
                }
            }
            (per_eni, gone)
        });
        let (per_eni, gone) = match plan {
            Ok(plan) => plan,
            Err(error) => {
                outcome.error = Some(error);
                return outcome;
            }
        };
        outcome.gone = gone;
        let ops = &self.instances.inventory;
        for (eni, on) in per_eni {
            for (cidrs, prefixes) in [(&on.prefixes, true), (&on.addresses, false)] {
                if cidrs.is_empty() {
                    continue;
                }
                let result = if prefixes {
                    let list: Vec<IpNet> = cidrs.iter().copied().map(IpNet::V4).collect();
                    ops.unassign(&eni, &[], &list).await
                } else {
                    let list: Vec<IpAddr> = cidrs.iter().map(|c| IpAddr::V4(c.addr())).collect();
                    ops.unassign(&eni, &list, &[]).await
                };
                if let Err(e) = result {
                    outcome.error = Some(EniError::ec2(Call::Unassign {
                        eni: eni.clone(),
                        prefixes,
                    })(e));
                    return outcome;
                }
                let removed: Vec<IpNet> = cidrs.iter().copied().map(IpNet::V4).collect();
                self.instances.remove(node.instance_id, &eni, &removed);
                (outcome.released.entry(on.subnet.clone()).or_default())
                    .extend(cidrs.iter().copied());
            }
        }
        outcome
    }
}

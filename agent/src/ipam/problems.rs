//! Input the allocators cannot use, said out loud: entries of the own `CiliumNode` that are not
//! addresses (a `spec.ipam.pool` key `10.99.0.300`, a `spec.addresses` ip `10.99.0.999`) and
//! pods whose annotation names a pool that does not exist. The allocators skip a bad entry and
//! keep serving from the good ones, as Cilium does; this module only finds and words them, so
//! `weft-agent status`, the start-up log and `ipam simulate` all list the same problems. Pure:
//! it reads the objects it is given and decides nothing about allocation.

use std::{fmt, net::IpAddr};

use super::{
    Family,
    input::{NodeInput, PoolInput},
    mode::IpamMode,
    selection::{MULTI_POOL_MODE, PoolChoice, Rule, SelectionContext, pool_for_pod},
};

/// One unusable input, with the field path (or the pod) and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpamProblem {
    /// A `spec.ipam.pool` key that is not an IP address (read in the CRD-backed modes).
    PoolKey {
        /// The CiliumNode.
        node: String,
        /// The key as written.
        key: String,
    },
    /// A `spec.addresses[index].ip` that is not an IP address.
    Address {
        /// The CiliumNode.
        node: String,
        /// Index in `spec.addresses`.
        index: usize,
        /// Its `type` (`InternalIP`, `CiliumInternalIP`, …).
        address_type: String,
        /// The value as written.
        ip: String,
    },
    /// A pod gets its addresses from a pool no `CiliumPodIPPool` defines.
    MissingPool {
        /// `namespace/pod`.
        owner: String,
        /// The families asking for it.
        families: Vec<Family>,
        /// The pool and the rule that chose it.
        choice: PoolChoice,
    },
}

impl fmt::Display for IpamProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PoolKey { node, key } => write!(
                f,
                "CiliumNode {node} spec.ipam.pool[\"{key}\"] is not an IP address: the entry \
                 is ignored and pods get only the other addresses; fix or remove the key"
            ),
            Self::Address {
                node,
                index,
                address_type,
                ip,
            } => write!(
                f,
                "CiliumNode {node} spec.addresses[{index}].ip \"{ip}\" ({address_type}) is not \
                 an IP address: it is ignored (not in the IPCache as this node's address); fix \
                 or remove it"
            ),
            Self::MissingPool {
                owner,
                families,
                choice,
            } => {
                let families: Vec<&str> = families.iter().map(|f| f.as_str()).collect();
                let fix = if matches!(
                    choice.rule,
                    Rule::PodAnnotation { .. } | Rule::NamespaceAnnotation { .. }
                ) {
                    "create the pool, or fix the annotation"
                } else {
                    "create the pool"
                };
                write!(
                    f,
                    "pod {owner} asks for pool {pool} ({rule}; {families}), but pool {pool} does \
                     not exist: no CiliumPodIPPool {pool}. Its ADD waits (code 11) until it \
                     does: {fix}",
                    pool = choice.pool,
                    rule = choice.rule,
                    families = families.join(", "),
                )
            }
        }
    }
}

impl IpamProblem {
    /// What the problem is about: the field path, or the pod.
    #[must_use]
    pub fn subject(&self) -> String {
        match self {
            Self::PoolKey { node, key } => format!("CiliumNode {node} spec.ipam.pool[\"{key}\"]"),
            Self::Address { node, index, .. } => {
                format!("CiliumNode {node} spec.addresses[{index}].ip")
            }
            Self::MissingPool { owner, .. } => format!("pod {owner}"),
        }
    }
}

/// Entries of `node` that the agent cannot use in `mode`: `spec.ipam.pool` keys (in the modes
/// that read them) and `spec.addresses` ips that are not addresses. `podCIDRs` and pool CIDRs
/// are typed: a bad one fails the decoding of the whole object, which the store reports with its
/// field path.
#[must_use]
pub fn node_problems(mode: IpamMode, node: &NodeInput) -> Vec<IpamProblem> {
    let name = &node.name;
    let mut out = Vec::new();
    if matches!(
        mode,
        IpamMode::Crd | IpamMode::Azure | IpamMode::AlibabaCloud
    ) {
        out.extend(
            node.crd_pool
                .iter()
                .flat_map(|pool| pool.keys())
                .filter(|key| key.parse::<IpAddr>().is_err())
                .map(|key| IpamProblem::PoolKey {
                    node: name.clone(),
                    key: key.clone(),
                }),
        );
    }
    out.extend(
        node.addresses
            .iter()
            .enumerate()
            .filter(|(_, (_, ip))| ip.parse::<IpAddr>().is_err())
            .map(|(index, (address_type, ip))| IpamProblem::Address {
                node: name.clone(),
                index,
                address_type: address_type.clone(),
                ip: ip.clone(),
            }),
    );
    out
}

/// Whether `pool` is one no `CiliumPodIPPool` of `pools` defines, in `ipam_mode` (multi-pool
/// only: other modes have no pool objects).
#[must_use]
pub fn pool_missing(ipam_mode: &str, pool: &str, pools: &[PoolInput]) -> bool {
    ipam_mode == MULTI_POOL_MODE && !pools.iter().any(|p| p.name == pool)
}

/// The pods of `owners` whose pool (in any of `families`) does not exist.
#[must_use]
pub fn missing_pools<'a>(
    owners: impl IntoIterator<Item = &'a str>,
    families: &[Family],
    ctx: &SelectionContext<'_>,
) -> Vec<IpamProblem> {
    let mut out = Vec::new();
    for owner in owners {
        let mut found: Vec<(PoolChoice, Vec<Family>)> = Vec::new();
        for &family in families {
            let Ok(choice) = pool_for_pod(owner, family, ctx) else {
                continue;
            };
            if !pool_missing(ctx.ipam_mode, &choice.pool, ctx.pools) {
                continue;
            }
            match found.iter_mut().find(|(c, _)| *c == choice) {
                Some((_, families)) => families.push(family),
                None => found.push((choice, vec![family])),
            }
        }
        out.extend(
            found
                .into_iter()
                .map(|(choice, families)| IpamProblem::MissingPool {
                    owner: owner.to_owned(),
                    families,
                    choice,
                }),
        );
    }
    out
}

#[cfg(test)]
mod tests;

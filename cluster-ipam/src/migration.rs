//! The cluster-pool → multi-pool migration, planned: for each CiliumNode that still holds
//! `spec.ipam.podCIDRs`, whether they can move into `spec.ipam.pools.allocated` of the default
//! pool ([`NodePlan::Move`]) or why not ([`NodePlan::Refuse`], each [`Refusal`] naming the pool
//! change that would fix it), and the CiliumNode object after the move ([`migrated`]). Pure: the
//! operator reads the objects, writes the updates and the refusals; the multi-pool allocator
//! keeps refused nodes' blocks taken (`PoolAllocator::pin`).
//!
//! Where it departs from Cilium, on purpose: a block outside the pool's CIDRs, of another size
//! than the pool's `maskSize`, of a pool that does not exist, or overlapping a block another node
//! holds is not moved (Cilium moves it, then drops it or lets a new block collide), and the
//! node's `requested` and other pools' `allocated` entries are kept (Cilium replaces them).

use std::{fmt, sync::Arc};

use ipnet::IpNet;
use serde_json::{Value, json};
use weft_k8s::error::chain;

use crate::{
    Family,
    multipool::{FamilySpec, PoolSpec},
    node::NodeView,
    pool::PoolSpecError,
};

/// The start of `status.ipam.operator-status.error` of a node the migration did not move
/// (Cilium's text).
pub const FAILED_PREFIX: &str = "migration to multi-pool IPAM failed: ";

/// The default pool as the migration finds it.
#[derive(Debug, Clone)]
pub enum PoolState {
    /// No CiliumPodIPPool of that name.
    Missing,
    /// It exists but does not convert (names the field).
    Unusable(Arc<PoolSpecError>),
    /// Its spec.
    Spec(PoolSpec),
}

/// Why one node's podCIDRs do not move; the node keeps them.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// A podCIDR that does not parse.
    #[error("spec.ipam.podCIDRs {value:?} is not a CIDR; correct or remove it")]
    NotCidr {
        /// The value as written.
        value: String,
        /// The parser's complaint.
        #[source]
        source: ipnet::AddrParseError,
    },
    /// The pool does not exist.
    #[error(
        "CiliumPodIPPool {pool} does not exist; create it with spec.{family}.cidrs covering \
         {cidr} and spec.{family}.maskSize {mask}",
        family = Family::of(cidr).flag_name(), mask = cidr.prefix_len()
    )]
    PoolMissing {
        /// The pool.
        pool: String,
        /// The node's block.
        cidr: IpNet,
    },
    /// The pool does not convert.
    #[error("CiliumPodIPPool {pool} cannot be used; correct it")]
    PoolUnusable {
        /// The pool.
        pool: String,
        /// Why.
        #[source]
        source: Arc<PoolSpecError>,
    },
    /// The pool has no CIDRs of the block's family.
    #[error(
        "CiliumPodIPPool {pool} has no spec.{family}; add spec.{family} with cidrs covering \
         {cidr} and maskSize {mask}",
        family = Family::of(cidr).flag_name(), mask = cidr.prefix_len()
    )]
    FamilyMissing {
        /// The pool.
        pool: String,
        /// The node's block.
        cidr: IpNet,
    },
    /// The block lies outside every CIDR of the pool's family.
    #[error(
        "{cidr} is outside spec.{family}.cidrs of CiliumPodIPPool {pool} ({}); add a CIDR \
         covering {cidr} to spec.{family}.cidrs",
        list(pool_cidrs), family = Family::of(cidr).flag_name()
    )]
    Outside {
        /// The pool.
        pool: String,
        /// The node's block.
        cidr: IpNet,
        /// The pool's CIDRs of that family.
        pool_cidrs: Vec<IpNet>,
    },
    /// The block's size is not the pool's.
    #[error(
        "{cidr} is a /{} block but CiliumPodIPPool {pool} hands out /{mask} blocks; its \
         spec.{family}.maskSize must be {}",
        cidr.prefix_len(), cidr.prefix_len(), family = Family::of(cidr).flag_name()
    )]
    MaskDiffers {
        /// The pool.
        pool: String,
        /// The node's block.
        cidr: IpNet,
        /// The pool's mask size of that family.
        mask: u8,
    },
    /// The block overlaps one another node holds (or moves) in the pool.
    #[error(
        "{cidr} overlaps {theirs} of CiliumNode {other}; give each node a block of its own \
         (a block cannot belong to two nodes)"
    )]
    Overlap {
        /// The node's block.
        cidr: IpNet,
        /// The other node.
        other: String,
        /// Its block.
        theirs: IpNet,
    },
}

fn list(cidrs: &[IpNet]) -> String {
    let texts: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
    texts.join(", ")
}

/// What the migration does with one node.
#[derive(Debug, Clone)]
pub enum NodePlan {
    /// No podCIDRs: nothing to move.
    Nothing,
    /// Move these blocks into the pool.
    Move {
        /// The blocks (masked), as the node lists them.
        cidrs: Vec<IpNet>,
    },
    /// Keep the podCIDRs; why.
    Refuse(Vec<Refusal>),
}

/// One node's plan.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The CiliumNode.
    pub node: String,
    /// What happens to it.
    pub plan: NodePlan,
}

impl Planned {
    /// The text of `status.ipam.operator-status.error` for a refused node (Cilium's prefix,
    /// then each refusal with its source, one per line); `None` unless refused.
    #[must_use]
    pub fn error_text(&self) -> Option<String> {
        let NodePlan::Refuse(refusals) = &self.plan else {
            return None;
        };
        let texts: Vec<String> = refusals.iter().map(|r| chain(r)).collect();
        Some(format!("{FAILED_PREFIX}{}", texts.join("\n")))
    }
}

impl fmt::Display for Planned {
    /// One line per node, for the dry run: `node: move … to pool …`, `node: nothing to move`
    /// or `node: refused: …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.plan {
            NodePlan::Nothing => write!(f, "{}: no spec.ipam.podCIDRs; nothing to move", self.node),
            NodePlan::Move { cidrs } => write!(f, "{}: move {}", self.node, list(cidrs)),
            NodePlan::Refuse(refusals) => {
                let texts: Vec<String> = refusals.iter().map(|r| chain(r)).collect();
                write!(f, "{}: refused: {}", self.node, texts.join("; "))
            }
        }
    }
}

/// The checks of one block against the pool.
fn check(cidr: IpNet, pool_name: &str, pool: &PoolState) -> Option<Refusal> {
    let name = pool_name.to_owned();
    let spec = match pool {
        PoolState::Missing => return Some(Refusal::PoolMissing { pool: name, cidr }),
        PoolState::Unusable(source) => {
            return Some(Refusal::PoolUnusable {
                pool: name,
                source: Arc::clone(source),
            });
        }
        PoolState::Spec(spec) => spec,
    };
    let family: Option<&FamilySpec> = match Family::of(&cidr) {
        Family::V4 => spec.ipv4.as_ref(),
        Family::V6 => spec.ipv6.as_ref(),
    };
    let Some(family) = family.filter(|f| !f.cidrs.is_empty()) else {
        return Some(Refusal::FamilyMissing { pool: name, cidr });
    };
    if !family.cidrs.iter().any(|c| c.trunc().contains(&cidr)) {
        return Some(Refusal::Outside {
            pool: name,
            cidr,
            pool_cidrs: family.cidrs.clone(),
        });
    }
    (cidr.prefix_len() != family.mask_size).then_some(Refusal::MaskDiffers {
        pool: name,
        cidr,
        mask: family.mask_size,
    })
}

/// One node's plan against the pool, without looking at other nodes.
#[must_use]
pub fn plan_node(node: &NodeView, pool_name: &str, pool: &PoolState) -> NodePlan {
    if node.pod_cidrs.is_empty() {
        return NodePlan::Nothing;
    }
    let mut cidrs = Vec::with_capacity(node.pod_cidrs.len());
    let mut refusals = Vec::new();
    for value in &node.pod_cidrs {
        match value.parse::<IpNet>() {
            Ok(cidr) => {
                let cidr = cidr.trunc();
                if let Some(refusal) = check(cidr, pool_name, pool) {
                    // One pool problem is said once per node.
                    if !matches!(refusal, Refusal::PoolUnusable { .. })
                        || !refusals
                            .iter()
                            .any(|r| matches!(r, Refusal::PoolUnusable { .. }))
                    {
                        refusals.push(refusal);
                    }
                }
                cidrs.push(cidr);
            }
            Err(source) => refusals.push(Refusal::NotCidr {
                value: value.clone(),
                source,
            }),
        }
    }
    if refusals.is_empty() {
        NodePlan::Move { cidrs }
    } else {
        NodePlan::Refuse(refusals)
    }
}

/// Every node's plan, by name: [`plan_node`], then a block overlapping one another node
/// already lists in `spec.ipam.pools.allocated`, or one an earlier node (by name) moves, is
/// refused, so no block ends with two nodes.
#[must_use]
pub fn plan(nodes: &[NodeView], pool_name: &str, pool: &PoolState) -> Vec<Planned> {
    let mut sorted: Vec<&NodeView> = nodes.iter().filter(|n| !n.ignored).collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut taken: Vec<(String, IpNet)> = sorted
        .iter()
        .flat_map(|n| {
            n.allocated
                .iter()
                .flat_map(|a| a.cidrs.iter().filter_map(|c| c.parse::<IpNet>().ok()))
                .map(|c| (n.name.clone(), c.trunc()))
        })
        .collect();
    let mut out = Vec::with_capacity(sorted.len());
    for node in sorted {
        let mut plan = plan_node(node, pool_name, pool);
        if let NodePlan::Move { cidrs } = &plan {
            let overlaps: Vec<Refusal> = cidrs
                .iter()
                .filter_map(|cidr| {
                    taken
                        .iter()
                        .find(|(other, theirs)| {
                            *other != node.name
                                && (theirs.contains(&cidr.network())
                                    || cidr.contains(&theirs.network()))
                        })
                        .map(|(other, theirs)| Refusal::Overlap {
                            cidr: *cidr,
                            other: other.clone(),
                            theirs: *theirs,
                        })
                })
                .collect();
            if overlaps.is_empty() {
                taken.extend(cidrs.iter().map(|c| (node.name.clone(), *c)));
            } else {
                plan = NodePlan::Refuse(overlaps);
            }
        }
        out.push(Planned {
            node: node.name.clone(),
            plan,
        });
    }
    out
}

/// The CiliumNode object `doc` after the move of `cidrs` into pool `pool_name`:
/// `spec.ipam.podCIDRs` removed, the blocks added to the pool's `spec.ipam.pools.allocated`
/// entry (created when missing; each CIDR listed once), everything else kept.
#[must_use]
pub fn migrated(doc: &Value, pool_name: &str, cidrs: &[IpNet]) -> Value {
    let mut doc = doc.clone();
    if !doc["spec"].is_object() {
        doc["spec"] = json!({});
    }
    let ipam = &doc["spec"]["ipam"];
    let mut entries: Vec<Value> = ipam["pools"]["allocated"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let index = entries
        .iter()
        .position(|e| e["pool"] == pool_name)
        .unwrap_or_else(|| {
            entries.push(json!({"pool": pool_name}));
            entries.len() - 1
        });
    let mut listed: Vec<Value> = entries[index]["cidrs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for cidr in cidrs {
        let text = Value::String(cidr.to_string());
        if !listed.contains(&text) {
            listed.push(text);
        }
    }
    entries[index]["cidrs"] = Value::Array(listed);
    let mut ipam = ipam.as_object().cloned().unwrap_or_default();
    ipam.remove("podCIDRs");
    let mut pools = ipam
        .get("pools")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    pools.insert("allocated".to_owned(), Value::Array(entries));
    ipam.insert("pools".to_owned(), Value::Object(pools));
    doc["spec"]["ipam"] = Value::Object(ipam);
    doc
}

#[cfg(test)]
mod tests;

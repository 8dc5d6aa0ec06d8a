//! Masquerade exclusions of single pools, weft's addition to Cilium's per-pool
//! `ipam.cilium.io/skip-masquerade` (which keeps a pool's addresses for every destination): a
//! CiliumPodIPPool annotated `weft.io/non-masquerade-cidrs: "<cidr>, <cidr>"` keeps its pods'
//! addresses towards those destinations only, on top of the node-wide exclusions. On every sync
//! the annotations of the pools in the store become the exclusion map's per-pool entries (keyed
//! by the pool's id, as its pods' endpoint entries are); an entry that is not a CIDR is logged
//! once with the pool and the annotation, and the pool's valid entries apply.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;
use tracing::warn;

use super::{State, chain, netdev::reload_masq};
use crate::{crd::pool::CiliumPodIPPool, masq::Masquerade};

/// The CiliumPodIPPool annotation with the destinations its pods reach unmasqueraded.
pub const NON_MASQUERADE_CIDRS: &str = "weft.io/non-masquerade-cidrs";

/// Bring the per-pool exclusions in line with the pools' annotations (nothing to do when
/// masquerading is off or nothing changed).
pub(super) fn sync(
    state: &mut State,
    pools: &BTreeMap<String, CiliumPodIPPool>,
    default_pool: &str,
) {
    let Some(masq) = state.net.masq.as_ref() else {
        return;
    };
    let mut wanted: BTreeMap<u32, Vec<IpNet>> = BTreeMap::new();
    for (name, pool) in pools {
        let cidrs = parse(name, pool, &mut state.reported_overlaps);
        if cidrs.is_empty() {
            continue;
        }
        match state.pool_ids.id(name, default_pool) {
            Ok(id) => {
                wanted.insert(id, cidrs);
            }
            Err(error) => {
                warn!(error = %chain(&error), pool = %name, "pool masquerade exclusions not applied");
            }
        }
    }
    if masq.config().pool_exclusions == wanted {
        return;
    }
    let mut config = masq.config().clone();
    config.pool_exclusions = wanted;
    state.net.masq = Some(Masquerade::new(config));
    reload_masq(state);
}

/// The CIDRs of `pool`'s annotation; each entry that is not one is reported once (keys in
/// `reported`).
fn parse(name: &str, pool: &CiliumPodIPPool, reported: &mut BTreeSet<String>) -> Vec<IpNet> {
    let Some(text) = pool.metadata.annotations.get(NON_MASQUERADE_CIDRS) else {
        return Vec::new();
    };
    let mut cidrs = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if let Ok(cidr) = entry.parse::<IpNet>() {
            cidrs.push(cidr.trunc());
            continue;
        }
        let key = format!("pool {name}: {NON_MASQUERADE_CIDRS} {entry}");
        if reported.insert(key) {
            warn!(
                pool = %name, annotation = NON_MASQUERADE_CIDRS, entry,
                "not a CIDR (write e.g. 203.0.113.0/24 or 2001:db8::/48, comma-separated); \
                 the pool's other entries apply"
            );
        }
    }
    cidrs
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::{NON_MASQUERADE_CIDRS, parse};
    use crate::crd::pool::CiliumPodIPPool;

    #[test]
    fn the_annotation_lists_cidrs_and_bad_entries_are_reported_once() {
        let mut pool = CiliumPodIPPool::default();
        pool.metadata.annotations.insert(
            NON_MASQUERADE_CIDRS.into(),
            " 203.0.113.7/24, nonsense ,2001:db8::1/48,".into(),
        );
        let mut reported = BTreeSet::new();
        let cidrs: Vec<String> = parse("mars", &pool, &mut reported)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(cidrs, ["203.0.113.0/24", "2001:db8::/48"]);
        assert_eq!(reported.len(), 1, "{reported:?}");
        parse("mars", &pool, &mut reported);
        assert_eq!(reported.len(), 1, "reported again: {reported:?}");
        assert!(parse("venus", &CiliumPodIPPool::default(), &mut reported).is_empty());
    }
}

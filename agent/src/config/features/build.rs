//! The constructors the rows are written with, and the reasons several rows share.

use super::{Area, Feature, Keys, Rule};

pub(super) const fn ignored(key: &'static str, area: Area, why: &'static str) -> Feature {
    Feature {
        keys: Keys::Exact(key),
        area,
        rule: Rule::Ignored(why),
    }
}

pub(super) const fn family(prefix: &'static str, area: Area, why: &'static str) -> Feature {
    Feature {
        keys: Keys::Prefix(prefix),
        area,
        rule: Rule::Ignored(why),
    }
}

pub(super) const fn refused(
    key: &'static str,
    area: Area,
    accepted: &'static [&'static str],
    breaks: &'static str,
    way_out: &'static str,
) -> Feature {
    Feature {
        keys: Keys::Exact(key),
        area,
        rule: Rule::RefusedUnless {
            accepted,
            moot_when: None,
            breaks,
            way_out,
        },
    }
}

/// A policy key: refused when true, unless `enable-policy` is `never` (Cilium then enforces no
/// policy either).
pub(super) const fn policy(key: &'static str) -> Feature {
    Feature {
        keys: Keys::Exact(key),
        area: Area::Policy,
        rule: Rule::RefusedUnless {
            accepted: &["false"],
            moot_when: Some(("enable-policy", "never")),
            breaks: NO_POLICY,
            way_out: POLICY_WAY_OUT,
        },
    }
}

/// Refused when true.
pub(super) const fn off(
    key: &'static str,
    area: Area,
    breaks: &'static str,
    way_out: &'static str,
) -> Feature {
    refused(key, area, &["false"], breaks, way_out)
}

pub(super) const KPR: &str = "Cilium's eBPF Service load balancer (kube-proxy replacement), which weft does \
                   not have; kube-proxy serves Services";
pub(super) const POLICY: &str =
    "serves network policy, which weft does not enforce (see enable-policy)";
pub(super) const MONITOR: &str = "Cilium's monitor and Hubble events; weft emits none (its metrics count \
                       drops and forwards)";
pub(super) const HUBBLE: &str = "Hubble; weft records no flows, so `hubble observe` finds no peer on weft's \
                      nodes";
pub(super) const L7: &str = "the Envoy L7 proxy, which weft does not run";
pub(super) const MAPS: &str = "sizes and tuning of Cilium's own eBPF maps; weft's maps have fixed sizes \
                    (docs/architecture.md)";
pub(super) const MESH: &str = "cluster mesh, which weft does not join";
pub(super) const NO_POLICY: &str = "NetworkPolicy and CiliumNetworkPolicy objects are not enforced: traffic \
                         they deny flows";
pub(super) const POLICY_WAY_OUT: &str = "set enable-policy: never (policies then stay unenforced by \
                              design; the other policy keys no longer matter), or keep Cilium \
                              on these nodes";

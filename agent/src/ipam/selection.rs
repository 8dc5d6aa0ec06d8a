//! Which pool a pod's address comes from (spec §4.6, Cilium `pkg/ipam/metadata/manager.go`
//! `GetIPPoolForPod`): pod then namespace annotations, then `CiliumPodIPPool` selectors, else the
//! default pool, with Cilium's exact error texts. Pure: the pods, namespaces and pools come in
//! through [`SelectionContext`], as IPAM's own input types (`input`); the answer says which rule
//! decided, for `ipam explain`. It does not resolve the default pool (`CiliumNodeConfig`
//! overrides are the caller's) nor allocate.

use std::{collections::BTreeMap, fmt};

use super::{
    Family,
    input::{Labelled, PoolInput},
    labels,
};

/// The only `--ipam` value (compared case-sensitively, as Cilium does) that selects pools.
pub const MULTI_POOL_MODE: &str = "multi-pool";
/// Pod/namespace annotation naming the IPv4 pool.
pub const IPV4_POOL_ANNOTATION: &str = "ipam.cilium.io/ipv4-pool";
/// Pod/namespace annotation naming the IPv6 pool.
pub const IPV6_POOL_ANNOTATION: &str = "ipam.cilium.io/ipv6-pool";
/// Pod/namespace annotation naming the pool of both families (after the per-family one).
pub const IP_POOL_ANNOTATION: &str = "ipam.cilium.io/ip-pool";
/// Pod/namespace annotation: `"true"` turns "no pool matched" into an error.
pub const REQUIRE_POOL_MATCH_ANNOTATION: &str = "ipam.cilium.io/require-pool-match";
/// Synthetic pod label holding the pod's namespace.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Synthetic pod label holding the pod's name.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";

/// Errors of pool selection, worded as Cilium's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// The pool table has not synced yet.
    #[error("ipam-metadata-manager has not synced all pod IP pools yet")]
    NotSynced,
    /// The owner's pod is not in the store.
    #[error("resource Pod \"{namespace}/{name}\" not found")]
    PodNotFound {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
    },
    /// The owner's namespace is not in the store.
    #[error("resource Namespace \"{namespace}\" not found")]
    NamespaceNotFound {
        /// The namespace.
        namespace: String,
    },
    /// No pool matched and `require-pool-match` is set.
    #[error(
        "no matching CiliumPodIPPool found for pod {owner} (family={family}) and \
         require-pool-match annotation is set on {on}"
    )]
    NoMatchRequired {
        /// `namespace/pod`.
        owner: String,
        /// Address family asked for.
        family: Family,
        /// Where the annotation was found (the pod is checked first).
        on: AnnotatedObject,
    },
    /// More than one pool matched.
    #[error(
        "multiple CiliumPodIPPools match pod {owner} (family={family}): [{}]",
        .pools.join(" ")
    )]
    MultipleMatches {
        /// `namespace/pod`.
        owner: String,
        /// Address family asked for.
        family: Family,
        /// The matching pools, sorted by name.
        pools: Vec<String>,
    },
}

/// The object an annotation was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnotatedObject {
    /// The pod.
    Pod,
    /// The pod's namespace.
    Namespace,
}

impl fmt::Display for AnnotatedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pod => "pod",
            Self::Namespace => "namespace",
        })
    }
}

/// Read access to the pods and namespaces the agent watches.
pub trait ObjectLookup {
    /// The labels and annotations of pod `namespace/name`, if known.
    fn pod(&self, namespace: &str, name: &str) -> Option<Labelled<'_>>;
    /// The labels and annotations of namespace `name`, if known.
    fn namespace(&self, name: &str) -> Option<Labelled<'_>>;
}

/// Everything pool selection reads.
pub struct SelectionContext<'a> {
    /// The `--ipam` value as configured.
    pub ipam_mode: &'a str,
    /// Whether the `CiliumPodIPPool` table has synced.
    pub pools_synced: bool,
    /// `ipam-default-ip-pool`, after any `CiliumNodeConfig` override.
    pub default_pool: &'a str,
    /// Pods and namespaces.
    pub objects: &'a dyn ObjectLookup,
    /// All `CiliumPodIPPools`, in any order.
    pub pools: &'a [PoolInput],
}

impl fmt::Debug for SelectionContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectionContext")
            .field("ipam_mode", &self.ipam_mode)
            .field("pools_synced", &self.pools_synced)
            .field("default_pool", &self.default_pool)
            .field("pools", &self.pools.len())
            .finish_non_exhaustive()
    }
}

/// The rule that picked the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The IPAM mode is not `multi-pool`: always the default pool.
    NotMultiPool,
    /// The owner is not `namespace/pod` (e.g. `router`): the default pool.
    NotAPodOwner,
    /// An annotation on the pod.
    PodAnnotation {
        /// The annotation key.
        key: &'static str,
    },
    /// An annotation on the pod's namespace.
    NamespaceAnnotation {
        /// The annotation key.
        key: &'static str,
    },
    /// The selectors of exactly one `CiliumPodIPPool` matched.
    Selector {
        /// That pool.
        pool: String,
    },
    /// No annotation and no pool selector matched: the default pool.
    NoMatch,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotMultiPool => f.write_str("default pool (IPAM mode is not multi-pool)"),
            Self::NotAPodOwner => f.write_str("default pool (owner is not a pod)"),
            Self::PodAnnotation { key } => write!(f, "pod annotation {key}"),
            Self::NamespaceAnnotation { key } => write!(f, "namespace annotation {key}"),
            Self::Selector { pool } => write!(f, "selector of CiliumPodIPPool {pool}"),
            Self::NoMatch => f.write_str("default pool (no match)"),
        }
    }
}

/// The chosen pool and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolChoice {
    /// Pool name.
    pub pool: String,
    /// The rule that decided.
    pub rule: Rule,
}

/// The pool for an address of `family` owned by `owner` (spec §4.6).
///
/// # Errors
/// [`SelectionError`], worded as Cilium's.
pub fn pool_for_pod(
    owner: &str,
    family: Family,
    ctx: &SelectionContext<'_>,
) -> Result<PoolChoice, SelectionError> {
    let default = |rule| PoolChoice {
        pool: ctx.default_pool.to_owned(),
        rule,
    };
    if ctx.ipam_mode != MULTI_POOL_MODE {
        return Ok(default(Rule::NotMultiPool));
    }
    if !ctx.pools_synced {
        return Err(SelectionError::NotSynced);
    }
    let Some((ns, name)) = split_pod_owner(owner) else {
        return Ok(default(Rule::NotAPodOwner));
    };
    let pod = ctx
        .objects
        .pod(ns, name)
        .ok_or_else(|| SelectionError::PodNotFound {
            namespace: ns.to_owned(),
            name: name.to_owned(),
        })?;
    let pod_annotations = pod.annotations;
    if let Some((key, pool)) = annotated_pool(pod_annotations, family) {
        return Ok(PoolChoice {
            pool,
            rule: Rule::PodAnnotation { key },
        });
    }
    let namespace = ctx
        .objects
        .namespace(ns)
        .ok_or_else(|| SelectionError::NamespaceNotFound {
            namespace: ns.to_owned(),
        })?;
    if let Some((key, pool)) = annotated_pool(namespace.annotations, family) {
        return Ok(PoolChoice {
            pool,
            rule: Rule::NamespaceAnnotation { key },
        });
    }

    let mut pod_labels = pod.labels.clone();
    pod_labels.insert(POD_NAMESPACE_LABEL.to_owned(), ns.to_owned());
    pod_labels.insert(POD_NAME_LABEL.to_owned(), name.to_owned());
    let mut pools: Vec<_> = ctx.pools.iter().collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut matches: Vec<String> = pools
        .into_iter()
        .filter(|pool| selects(pool, family, &pod_labels, namespace.labels))
        .map(|pool| pool.name.clone())
        .collect();

    match matches.len() {
        0 => {
            let on = if requires_match(pod_annotations) {
                Some(AnnotatedObject::Pod)
            } else if requires_match(namespace.annotations) {
                Some(AnnotatedObject::Namespace)
            } else {
                None
            };
            match on {
                Some(on) => Err(SelectionError::NoMatchRequired {
                    owner: owner.to_owned(),
                    family,
                    on,
                }),
                None => Ok(default(Rule::NoMatch)),
            }
        }
        1 => {
            let pool = matches.remove(0);
            Ok(PoolChoice {
                rule: Rule::Selector { pool: pool.clone() },
                pool,
            })
        }
        _ => Err(SelectionError::MultipleMatches {
            owner: owner.to_owned(),
            family,
            pools: matches,
        }),
    }
}

/// `namespace/name` with both parts DNS-1123 subdomains (split at the first `/`, as Go's
/// `strings.Cut`), else `None`.
fn split_pod_owner(owner: &str) -> Option<(&str, &str)> {
    let (namespace, name) = owner.split_once('/')?;
    (labels::is_dns1123_subdomain(namespace) && labels::is_dns1123_subdomain(name))
        .then_some((namespace, name))
}

/// The family's annotation, else `ip-pool`; empty values are ignored.
fn annotated_pool(
    annotations: &BTreeMap<String, String>,
    family: Family,
) -> Option<(&'static str, String)> {
    let family_key = match family {
        Family::V4 => IPV4_POOL_ANNOTATION,
        Family::V6 => IPV6_POOL_ANNOTATION,
    };
    [family_key, IP_POOL_ANNOTATION]
        .into_iter()
        .find_map(|key| {
            annotations
                .get(key)
                .filter(|pool| !pool.is_empty())
                .map(|pool| (key, pool.clone()))
        })
}

fn requires_match(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(REQUIRE_POOL_MATCH_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// Whether `pool` serves `family` and its selectors match (a pool without usable selectors
/// never does).
fn selects(
    pool: &PoolInput,
    family: Family,
    pod_labels: &BTreeMap<String, String>,
    namespace_labels: &BTreeMap<String, String>,
) -> bool {
    let serves = match family {
        Family::V4 => pool.ipv4,
        Family::V6 => pool.ipv6,
    };
    serves
        && pool
            .selector
            .as_ref()
            .is_some_and(|s| s.pod.matches(pod_labels) && s.namespace.matches(namespace_labels))
}

#[cfg(test)]
mod tests;

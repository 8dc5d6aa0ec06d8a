//! The JSON merge patches of the parts the node manager hands out ([`SpecPart`] and
//! `status.ipam.operator-status.error`), built from typed parts in the CiliumNode's wire shapes
//! (`weft_k8s::crd`): only the operator's fields, and `null` where a part empties (Cilium's
//! `omitempty`). Writing them is the caller's business.

use ipnet::IpNet;
use serde::Serialize;
use serde_json::Value;
use weft_k8s::crd::ipam::IpamPoolAllocation;

use super::SpecPart;

/// `{"spec": {"ipam": …}}`.
#[derive(Serialize)]
struct SpecPatch {
    spec: IpamOf<IpamSpecPatch>,
}

/// `{"status": {"ipam": …}}`.
#[derive(Serialize)]
struct StatusPatch {
    status: IpamOf<IpamStatusPatch>,
}

/// `{"ipam": …}`.
#[derive(Serialize)]
struct IpamOf<T> {
    ipam: T,
}

/// A field of a merge patch: its new value, or `null`, which removes it.
#[derive(Serialize)]
#[serde(untagged)]
enum Field<T> {
    /// The new value.
    Set(T),
    /// `null`.
    Remove,
}

/// The operator's fields of `spec.ipam` (an absent field is left alone).
#[derive(Serialize)]
struct IpamSpecPatch {
    #[serde(rename = "podCIDRs", skip_serializing_if = "Option::is_none")]
    pod_cidrs: Option<Field<Vec<IpNet>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pools: Option<PoolsPatch>,
}

/// `spec.ipam.pools.allocated`.
#[derive(Serialize)]
struct PoolsPatch {
    allocated: Option<Vec<IpamPoolAllocation>>,
}

/// `status.ipam.operator-status`.
#[derive(Serialize)]
struct IpamStatusPatch {
    #[serde(rename = "operator-status")]
    operator_status: OperatorStatusPatch,
}

/// `operator-status.error` (`None` is `null`).
#[derive(Serialize)]
struct OperatorStatusPatch {
    error: Option<String>,
}

/// The prefixes the allocator printed (they parse back).
fn nets(cidrs: &[String]) -> Vec<IpNet> {
    cidrs.iter().filter_map(|c| c.parse().ok()).collect()
}

fn to_value(patch: &impl Serialize) -> Value {
    // Plain structs of strings, numbers and CIDRs: serializing cannot fail.
    serde_json::to_value(patch).unwrap_or_default()
}

impl SpecPart {
    /// The merge patch of the object that writes this part (an empty list removes it).
    #[must_use]
    pub fn merge_patch(&self) -> Value {
        let ipam = match self {
            Self::PodCidrs(cidrs) => IpamSpecPatch {
                pod_cidrs: Some(if cidrs.is_empty() {
                    Field::Remove
                } else {
                    Field::Set(nets(cidrs))
                }),
                pools: None,
            },
            Self::PoolsAllocated(pools) => IpamSpecPatch {
                pod_cidrs: None,
                pools: Some(PoolsPatch {
                    allocated: (!pools.is_empty()).then(|| {
                        (pools.iter())
                            .map(|p| IpamPoolAllocation {
                                pool: p.pool.clone(),
                                allow_first_ip: p.allow_first_ip,
                                allow_last_ip: p.allow_last_ip,
                                cidrs: nets(&p.cidrs),
                            })
                            .collect()
                    }),
                }),
            },
        };
        to_value(&SpecPatch {
            spec: IpamOf { ipam },
        })
    }
}

/// The merge patch of `/status` that writes `operator-status.error` (an empty error clears
/// it, as Cilium's `omitempty` does).
#[must_use]
pub fn status_patch(error: &str) -> Value {
    to_value(&StatusPatch {
        status: IpamOf {
            ipam: IpamStatusPatch {
                operator_status: OperatorStatusPatch {
                    error: (!error.is_empty()).then(|| error.to_owned()),
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::multipool::Allocated;

    #[test]
    fn patches_touch_only_the_operators_fields() {
        assert_eq!(
            SpecPart::PodCidrs(vec!["10.0.0.0/24".into()]).merge_patch(),
            json!({"spec": {"ipam": {"podCIDRs": ["10.0.0.0/24"]}}})
        );
        assert_eq!(
            SpecPart::PodCidrs(Vec::new()).merge_patch(),
            json!({"spec": {"ipam": {"podCIDRs": null}}})
        );
        let pools = SpecPart::PoolsAllocated(vec![Allocated {
            pool: "mars".into(),
            cidrs: vec!["10.0.11.0/27".into()],
            allow_first_ip: false,
            allow_last_ip: true,
        }]);
        assert_eq!(
            pools.merge_patch(),
            json!({"spec": {"ipam": {"pools": {"allocated": [{"pool": "mars", "cidrs": ["10.0.11.0/27"], "allowLastIP": true}]}}}})
        );
        assert_eq!(
            SpecPart::PoolsAllocated(Vec::new()).merge_patch(),
            json!({"spec": {"ipam": {"pools": {"allocated": null}}}})
        );
        assert_eq!(
            status_patch(""),
            json!({"status": {"ipam": {"operator-status": {"error": null}}}})
        );
        assert_eq!(
            status_patch("no room"),
            json!({"status": {"ipam": {"operator-status": {"error": "no room"}}}})
        );
    }
}

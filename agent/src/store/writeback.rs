//! Applying a [`NodeWrite`] (the agent's parts: `status.ipam.used` and `release-ips`,
//! `spec.ipam.pools`, the `CiliumInternalIP` entries of `spec.addresses`) or an
//! [`OperatorWrite`] (the in-process operator's parts) to a CiliumNode document: set only the paths the writer owns, create the
//! objects above them when missing, drop them when they become empty (Cilium's `omitempty`),
//! and leave every other field exactly as it was.

use serde_json::{Map, Value};

use crate::store::{NodeWrite, OperatorWrite};

/// `status.ipam.used`.
pub const USED: [&str; 3] = ["status", "ipam", "used"];
/// `status.ipam.release-ips`.
pub const RELEASE_IPS: [&str; 3] = ["status", "ipam", "release-ips"];
/// `spec.addresses` (the agent owns its `CiliumInternalIP` entries).
pub const ADDRESSES: [&str; 2] = ["spec", "addresses"];
/// The `spec.addresses` type of the router addresses.
pub const CILIUM_INTERNAL_IP: &str = "CiliumInternalIP";
/// `spec.ipam.pools`.
pub const POOLS: [&str; 3] = ["spec", "ipam", "pools"];
/// `spec.ipam.podCIDRs` (the operator's, cluster-pool).
pub const POD_CIDRS: [&str; 3] = ["spec", "ipam", "podCIDRs"];
/// `spec.ipam.pools.allocated` (the operator's, multi-pool).
pub const POOLS_ALLOCATED: [&str; 4] = ["spec", "ipam", "pools", "allocated"];
/// `status.ipam.operator-status.error` (the operator's).
pub const OPERATOR_ERROR: [&str; 4] = ["status", "ipam", "operator-status", "error"];

/// The value at `path`, if any.
#[must_use]
pub fn get<'a>(doc: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |v, key| v.get(key))
}

/// Apply `write` to `doc`; returns whether the document changed.
#[must_use]
pub fn apply(doc: &mut Value, write: &NodeWrite) -> bool {
    let before = doc.clone();
    if let Some(used) = &write.used {
        set(doc, &USED, to_value(used));
    }
    if let Some(release) = &write.release_ips {
        set(doc, &RELEASE_IPS, to_value(release));
    }
    if let Some(pools) = &write.pools {
        set(doc, &POOLS, to_value(pools));
    }
    if let Some(ips) = &write.cilium_internal_ips {
        let mut addresses: Vec<Value> = get(doc, &ADDRESSES)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|a| a.get("type").and_then(Value::as_str) != Some(CILIUM_INTERNAL_IP))
            .cloned()
            .collect();
        addresses.extend(
            ips.iter()
                .map(|ip| serde_json::json!({"type": CILIUM_INTERNAL_IP, "ip": ip.to_string()})),
        );
        set(doc, &ADDRESSES, Value::Array(addresses));
    }
    *doc != before
}

/// Apply the operator's `write` to `doc`; returns whether the document changed. Clearing the
/// error removes only the `error` field (Cilium writes `operator-status: {}` then), and never
/// adds anything to a document that has no error.
#[must_use]
pub fn apply_operator(doc: &mut Value, write: &OperatorWrite) -> bool {
    let before = doc.clone();
    if let Some(cidrs) = &write.pod_cidrs {
        set(doc, &POD_CIDRS, to_value(cidrs));
    }
    if let Some(allocated) = &write.allocated {
        set(doc, &POOLS_ALLOCATED, to_value(allocated));
    }
    match write.error.as_deref() {
        None => {}
        Some("") => {
            let status = OPERATOR_ERROR[..3]
                .iter()
                .try_fold(&mut *doc, |v, key| v.get_mut(key));
            if let Some(Value::Object(map)) = status {
                map.remove(OPERATOR_ERROR[3]);
            }
        }
        Some(text) => set(doc, &OPERATOR_ERROR, Value::String(text.to_owned())),
    }
    *doc != before
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    // The owned types serialize to plain JSON objects; a failure would be a bug in them.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Set `path` to `value`, or remove it (and parents left empty) when `value` is empty.
fn set(doc: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    if is_empty(&value) {
        remove(doc, parents, last, true);
        return;
    }
    let mut cur = doc;
    for key in parents {
        let Value::Object(map) = cur else { return };
        cur = map.entry(*key).or_insert_with(|| Value::Object(Map::new()));
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
    }
    if let Value::Object(map) = cur {
        map.insert((*last).to_owned(), value);
    }
}

/// Remove `parents.last` and the parents it leaves empty; a top-level `spec` always stays
/// (the CRD schemas require it).
fn remove(doc: &mut Value, parents: &[&str], last: &str, top: bool) {
    let Some(map) = doc.as_object_mut() else {
        return;
    };
    match parents.split_first() {
        None => {
            map.remove(last);
        }
        Some((first, rest)) => {
            if let Some(child) = map.get_mut(*first) {
                remove(child, rest, last, false);
                if is_empty(child) && !(top && *first == "spec") {
                    map.remove(*first);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::crd::ipam::{AllocationIp, IpamPoolSpec, ReleaseState};

    #[test]
    fn sets_owned_paths_and_keeps_everything_else() {
        let mut doc = json!({
            "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
            "metadata": {"name": "n1", "labels": {"a": "b"}, "x-unknown": 1},
            "spec": {"ipam": {"pool": {"10.0.0.5": {"resource": "eni-1"}}, "future": true}},
            "status": {"operator": "keeps this"}
        });
        let used = BTreeMap::from([(
            "10.0.0.5".to_owned(),
            AllocationIp {
                owner: "default/a".into(),
                resource: "eni-1".into(),
            },
        )]);
        let release = BTreeMap::from([("10.0.0.9".to_owned(), ReleaseState::DoNotRelease)]);
        let write = NodeWrite {
            used: Some(used),
            release_ips: Some(release),
            pools: None,
            cilium_internal_ips: None,
        };
        assert!(apply(&mut doc, &write));
        assert_eq!(
            doc["status"]["ipam"]["used"]["10.0.0.5"],
            json!({"owner": "default/a", "resource": "eni-1"})
        );
        assert_eq!(
            doc["status"]["ipam"]["release-ips"]["10.0.0.9"],
            "do-not-release"
        );
        assert_eq!(doc["status"]["operator"], "keeps this");
        assert_eq!(doc["spec"]["ipam"]["future"], true);
        assert_eq!(doc["metadata"]["x-unknown"], 1);
        assert!(!apply(&mut doc, &write), "same write twice changes nothing");
    }

    #[test]
    fn operator_parts_keep_everything_else() {
        let mut doc = json!({
            "metadata": {"name": "n1"},
            "spec": {"ipam": {"pools": {"requested": [{"pool": "a", "needed": {"ipv4-addrs": 3}}]},
                              "future": 1}},
        });
        let allocated = vec![crate::crd::ipam::IpamPoolAllocation {
            pool: "a".into(),
            allow_first_ip: false,
            allow_last_ip: true,
            cidrs: vec!["10.0.0.0/28".parse().unwrap()],
        }];
        let write = OperatorWrite {
            allocated: Some(allocated),
            error: Some(String::new()),
            ..OperatorWrite::default()
        };
        assert!(apply_operator(&mut doc, &write));
        assert_eq!(
            doc["spec"]["ipam"],
            json!({"pools": {"requested": [{"pool": "a", "needed": {"ipv4-addrs": 3}}],
                             "allocated": [{"pool": "a", "allowLastIP": true, "cidrs": ["10.0.0.0/28"]}]},
                   "future": 1})
        );
        assert!(
            doc.get("status").is_none(),
            "clearing no error adds nothing"
        );
        assert!(
            !apply_operator(&mut doc, &write),
            "the same write twice changes nothing"
        );

        let failed = OperatorWrite {
            pod_cidrs: Some(vec!["10.1.0.0/24".parse().unwrap()]),
            error: Some("allocator full".into()),
            ..OperatorWrite::default()
        };
        assert!(apply_operator(&mut doc, &failed));
        assert_eq!(doc["spec"]["ipam"]["podCIDRs"], json!(["10.1.0.0/24"]));
        assert_eq!(
            doc["status"]["ipam"]["operator-status"]["error"],
            "allocator full"
        );
        let cleared = OperatorWrite {
            error: Some(String::new()),
            ..OperatorWrite::default()
        };
        assert!(apply_operator(&mut doc, &cleared));
        assert_eq!(
            doc["status"],
            json!({"ipam": {"operator-status": {}}}),
            "as Cilium writes it"
        );
    }

    #[test]
    fn cilium_internal_ips_replace_only_their_own_entries() {
        let mut doc = json!({"spec": {"addresses": [
            {"type": "CiliumInternalIP", "ip": "10.99.0.1"},
            {"type": "InternalIP", "ip": "192.0.2.10", "future": 1},
        ]}});
        let write = NodeWrite {
            cilium_internal_ips: Some(vec!["10.244.3.1".parse().unwrap()]),
            ..NodeWrite::default()
        };
        assert!(apply(&mut doc, &write));
        assert_eq!(
            doc["spec"]["addresses"],
            json!([
                {"type": "InternalIP", "ip": "192.0.2.10", "future": 1},
                {"type": "CiliumInternalIP", "ip": "10.244.3.1"},
            ])
        );
        assert!(
            !apply(&mut doc, &write),
            "the same write twice changes nothing"
        );
    }

    #[test]
    fn empty_owned_parts_are_omitted() {
        let mut doc = json!({"spec": {"ipam": {"pools": {"requested": [{"pool": "x"}]}}}});
        let write = NodeWrite {
            pools: Some(IpamPoolSpec::default()),
            ..NodeWrite::default()
        };
        assert!(apply(&mut doc, &write));
        assert_eq!(
            doc,
            json!({"spec": {}}),
            "spec is required by the CRD and stays"
        );
    }
}

//! Security identities of pods: the label set that identifies a pod the way Cilium does
//! (`pkg/labels`, `pkg/k8s/utils`: `k8s:`-sourced pod labels, the namespace, the namespace's
//! labels, the service account and the cluster name, minus the labels Cilium's default filter
//! drops), and a deterministic local allocator of numeric identities for the single-host store.
//! Pure: the Kubernetes side shares identities through CiliumIdentity objects (`crate::k8s`).

use std::collections::BTreeMap;

use agent_common::identity::MIN_ALLOCATED;

use crate::crd::meta::{Namespace, Pod};

/// The largest identity allocated for a label set (Cilium's cluster-local range).
pub const MAX_ALLOCATED: u32 = 65_535;

/// Cilium's cluster name when none is configured.
pub const DEFAULT_CLUSTER: &str = "default";

/// A pod's security labels, as CiliumIdentity `security-labels` keys them (`k8s:<key>` →
/// value), sorted.
pub type SecurityLabels = BTreeMap<String, String>;

/// Label keys Cilium's default filter leaves out of identities (they differ per pod or per
/// rollout and would give every pod its own identity).
fn filtered(key: &str) -> bool {
    const EXACT: [&str; 5] = [
        "pod-template-hash",
        "controller-revision-hash",
        "pod-template-generation",
        "statefulset.kubernetes.io/pod-name",
        "batch.kubernetes.io/controller-uid",
    ];
    EXACT.contains(&key)
        || key.starts_with("controller-uid")
        || key.starts_with("job-name")
        || key.starts_with("batch.kubernetes.io/job-name")
        || key.starts_with("annotation.")
}

/// The security labels of `pod` in `namespace`.
#[must_use]
pub fn security_labels(pod: &Pod, namespace: Option<&Namespace>, cluster: &str) -> SecurityLabels {
    let mut labels = SecurityLabels::new();
    for (k, v) in &pod.metadata.labels {
        if !filtered(k) {
            labels.insert(format!("k8s:{k}"), v.clone());
        }
    }
    if let Some(ns) = namespace {
        for (k, v) in &ns.metadata.labels {
            labels.insert(format!("k8s:io.cilium.k8s.namespace.labels.{k}"), v.clone());
        }
    }
    labels.insert(
        "k8s:io.kubernetes.pod.namespace".to_owned(),
        pod.metadata.namespace.clone(),
    );
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.extra.get("serviceAccountName"))
        .and_then(|v| v.as_str())
        .unwrap_or("default");
    labels.insert(
        "k8s:io.cilium.k8s.policy.serviceaccount".to_owned(),
        account.to_owned(),
    );
    labels.insert(
        "k8s:io.cilium.k8s.policy.cluster".to_owned(),
        cluster.to_owned(),
    );
    labels
}

/// The labels as a CiliumEndpoint lists them (`k8s:key=value`).
#[must_use]
pub fn as_list(labels: &SecurityLabels) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Identities for label sets on one host: the first identity tried is a hash of the labels, so
/// the same labels get the same identity across restarts; a collision takes the next free one.
#[derive(Clone, Debug, Default)]
pub struct LocalAllocator {
    by_labels: BTreeMap<SecurityLabels, u32>,
    by_id: BTreeMap<u32, SecurityLabels>,
}

impl LocalAllocator {
    /// The identity of `labels`, allocated on first use.
    pub fn identity(&mut self, labels: &SecurityLabels) -> u32 {
        if let Some(id) = self.by_labels.get(labels) {
            return *id;
        }
        let span = MAX_ALLOCATED - MIN_ALLOCATED + 1;
        let start = u32::try_from(fnv(labels) % u64::from(span)).unwrap_or(0);
        let id = (0..span)
            .map(|i| MIN_ALLOCATED + (start + i) % span)
            .find(|id| !self.by_id.contains_key(id))
            .unwrap_or(MIN_ALLOCATED);
        self.by_labels.insert(labels.clone(), id);
        self.by_id.insert(id, labels.clone());
        id
    }

    /// Labels of an allocated identity.
    #[must_use]
    pub fn labels(&self, id: u32) -> Option<&SecurityLabels> {
        self.by_id.get(&id)
    }
}

/// FNV-1a over the sorted `key=value` pairs.
fn fnv(labels: &SecurityLabels) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in labels {
        for byte in k.bytes().chain([b'=']).chain(v.bytes()).chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(labels: &serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "web", "labels": labels},
            "spec": {"serviceAccountName": "frontend", "nodeName": "n1"},
        }))
        .expect("pod")
    }

    #[test]
    fn labels_follow_cilium() {
        let ns: Namespace = serde_json::from_value(
            json!({"metadata": {"name": "web", "labels": {"team": "blue"}}}),
        )
        .expect("ns");
        let labels = security_labels(
            &pod(&json!({"app": "web", "pod-template-hash": "abc123"})),
            Some(&ns),
            DEFAULT_CLUSTER,
        );
        assert_eq!(
            as_list(&labels),
            [
                "k8s:app=web",
                "k8s:io.cilium.k8s.namespace.labels.team=blue",
                "k8s:io.cilium.k8s.policy.cluster=default",
                "k8s:io.cilium.k8s.policy.serviceaccount=frontend",
                "k8s:io.kubernetes.pod.namespace=web",
            ]
        );
    }

    #[test]
    fn local_identities_are_stable_and_distinct() {
        let a = security_labels(&pod(&json!({"app": "a"})), None, DEFAULT_CLUSTER);
        let b = security_labels(&pod(&json!({"app": "b"})), None, DEFAULT_CLUSTER);
        let mut one = LocalAllocator::default();
        let (ia, ib) = (one.identity(&a), one.identity(&b));
        assert_ne!(ia, ib);
        assert!((MIN_ALLOCATED..=MAX_ALLOCATED).contains(&ia));
        assert_eq!(one.identity(&a), ia, "same labels, same identity");
        let mut restarted = LocalAllocator::default();
        assert_eq!(restarted.identity(&b), ib, "the same after a restart");
        assert_eq!(one.labels(ia), Some(&a));
        // Rollout hashes do not split identities.
        let a2 = security_labels(
            &pod(&json!({"app": "a", "pod-template-hash": "x"})),
            None,
            DEFAULT_CLUSTER,
        );
        assert_eq!(one.identity(&a2), ia);
    }
}

//! The `cilium.io/v2` `CiliumNodeConfig` (namespaced; Cilium `cnc_types.go`) and the pure resolver
//! of spec §1.9 (`pkg/option/resolver` `readNodeConfigs`): which configs apply to a node and the
//! merged `defaults` they give. Listing the configs of the configured namespace and applying the
//! result as option overrides are the caller's job.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{Extra, LabelSelector, ObjectMeta, ObjectType, TypeMeta};
use crate::labels::{self, LabelsError};

/// The `defaults` key that overrides `--ipam-default-ip-pool` per node.
pub const IPAM_DEFAULT_IP_POOL_KEY: &str = "ipam-default-ip-pool";

const MAX_CONFIG_MAP_KEY_LEN: usize = 253;

/// Errors of the node-config resolver.
#[derive(Debug, thiserror::Error)]
pub enum NodeConfigError {
    /// A config's `nodeSelector` does not compile.
    #[error("invalid selector in CiliumNodeConfig {name}: {source}")]
    InvalidSelector {
        /// Name of the config.
        name: String,
        /// Why the selector does not compile.
        #[source]
        source: LabelsError,
    },
}

/// A `CiliumNodeConfig`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CiliumNodeConfig {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// Object metadata; the name orders the configs.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::object_meta")]
    pub metadata: ObjectMeta,
    /// Overrides and the nodes they apply to.
    #[serde(default)]
    pub spec: NodeConfigSpec,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectType for CiliumNodeConfig {
    const API_VERSION: &'static str = "cilium.io/v2";
    const KIND: &'static str = "CiliumNodeConfig";
}

/// `spec` of a `CiliumNodeConfig`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeConfigSpec {
    /// Option overrides, as in the `cilium-config` `ConfigMap` (required, always written).
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    /// Nodes the config applies to: `None` applies to no node, an empty selector to all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
    /// Unmodelled fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Merges the `defaults` of the configs that apply to a node with labels `node_labels`:
/// configs with empty `defaults` or no selector are skipped, the matches are applied in name
/// order so later names override earlier ones, and keys that are not valid `ConfigMap` keys are
/// dropped (Cilium logs and skips them).
///
/// # Errors
/// [`NodeConfigError::InvalidSelector`] when a candidate's selector does not compile (Cilium
/// fails the whole resolution too).
pub fn resolve_node_config(
    configs: &[CiliumNodeConfig],
    node_labels: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, NodeConfigError> {
    let mut matching = Vec::new();
    for config in configs
        .iter()
        .filter(|config| !config.spec.defaults.is_empty())
    {
        let Some(selector) = &config.spec.node_selector else {
            continue;
        };
        let selector =
            labels::compile(selector).map_err(|source| NodeConfigError::InvalidSelector {
                name: config.metadata.name.clone(),
                source,
            })?;
        if selector.matches(node_labels) {
            matching.push(config);
        }
    }
    matching.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(matching
        .into_iter()
        .flat_map(|config| &config.spec.defaults)
        .filter(|(key, _)| is_config_map_key(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect())
}

/// Kubernetes `IsConfigMapKey`: 1–253 of `[-._a-zA-Z0-9]`, not `.`, `..` or `..`-prefixed.
fn is_config_map_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_CONFIG_MAP_KEY_LEN
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && key != "."
        && !key.starts_with("..")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(
        name: &str,
        selector: serde_json::Value,
        defaults: &[(&str, &str)],
    ) -> CiliumNodeConfig {
        let mut doc = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNodeConfig",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"defaults": defaults.iter().copied().collect::<BTreeMap<_, _>>()}
        });
        if !selector.is_null() {
            doc["spec"]["nodeSelector"] = selector;
        }
        serde_json::from_value(doc).expect("decodes")
    }

    fn node_labels() -> BTreeMap<String, String> {
        [
            ("topology.kubernetes.io/zone", "dc1"),
            ("kubernetes.io/os", "linux"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    #[test]
    fn node_config_round_trips() {
        let doc = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNodeConfig",
            "metadata": {"name": "dc1-pool", "namespace": "kube-system", "generation": 3},
            "spec": {
                "defaults": {"ipam-default-ip-pool": "dc1-pool", "enable-bpf-masquerade": "true"},
                "nodeSelector": {"matchLabels": {"topology.kubernetes.io/zone": "dc1"}},
                "extraSpec": "kept"
            },
            "extraTop": [1, 2]
        });
        let cnc: CiliumNodeConfig = serde_json::from_value(doc.clone()).expect("decodes");
        assert_eq!(cnc.spec.defaults[IPAM_DEFAULT_IP_POOL_KEY], "dc1-pool");
        assert_eq!(serde_json::to_value(&cnc).expect("encodes"), doc);
    }

    #[test]
    fn resolution_rules() {
        let zone = json!({"matchLabels": {"topology.kubernetes.io/zone": "dc1"}});
        let configs = [
            config(
                "b-zone",
                zone.clone(),
                &[(IPAM_DEFAULT_IP_POOL_KEY, "dc1-pool"), ("x", "b")],
            ),
            config(
                "a-all",
                json!({}),
                &[(IPAM_DEFAULT_IP_POOL_KEY, "all"), ("y", "a")],
            ),
            config("c-nil", json!(null), &[(IPAM_DEFAULT_IP_POOL_KEY, "never")]),
            config("d-empty", json!({}), &[]),
            config(
                "e-other",
                json!({"matchLabels": {"zone": "dc2"}}),
                &[("x", "e")],
            ),
            config(
                "f-badkey",
                zone,
                &[("bad/key", "v"), ("..x", "v"), ("ok.key", "v")],
            ),
        ];
        let resolved = resolve_node_config(&configs, &node_labels()).expect("resolves");
        let want: BTreeMap<String, String> = [
            (IPAM_DEFAULT_IP_POOL_KEY, "dc1-pool"),
            ("x", "b"),
            ("y", "a"),
            ("ok.key", "v"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(resolved, want);
        assert!(
            resolve_node_config(&[], &node_labels())
                .expect("resolves")
                .is_empty()
        );
    }

    #[test]
    fn invalid_selector_fails() {
        let bad = json!({"matchExpressions": [{"key": "k", "operator": "Bogus"}]});
        let err = resolve_node_config(&[config("bad", bad, &[("x", "1")])], &node_labels())
            .expect_err("must fail");
        assert_eq!(
            err.to_string(),
            "invalid selector in CiliumNodeConfig bad: \
             \"Bogus\" is not a valid label selector operator"
        );
        // A config with empty defaults is skipped before its selector is compiled.
        let bad = json!({"matchExpressions": [{"key": "k", "operator": "Bogus"}]});
        assert!(resolve_node_config(&[config("bad", bad, &[])], &node_labels()).is_ok());
    }
}

//! The agent's configuration table: one row per cilium-config key the agent reads, with the
//! user's documentation (default, IPAM modes and stores that read it, Cilium's equivalent, a
//! one-line meaning), the flag of `weft-agent run` it also is, and how its value is applied to
//! [`AgentConfig`]. Everything that knows a key reads it from here: the flags
//! ([`crate::cli::ConfigArgs`]), resolving ([`AgentConfig::resolve`]), the checks across keys,
//! the feature guard's list of known keys and `cargo xtask gen-config-ref`. The tests below fail
//! when a key has two rows or documents a default that is not the code's. It reads no file.

pub use weft_k8s::config_ref::{Cilium, DefaultValue, Flag};

use super::{AgentConfig, ConfigError, apply::Given};
use crate::ipam::mode::IpamMode;

/// Which IPAM modes read a key.
pub type Modes = weft_k8s::config_ref::Modes<IpamMode>;

/// One key's documentation (the shared shape, over the agent's IPAM modes).
pub type KeyDoc = weft_k8s::config_ref::KeyDoc<IpamMode>;

/// Where a key matters: against the Kubernetes API, on the single-host store, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    /// Both stores.
    Both,
    /// Only against Kubernetes (without `--store`).
    Kubernetes,
    /// Only on the single-host store (`--store`).
    Embedded,
}

/// How a key's value is applied to the configuration being resolved.
pub type Apply = fn(&mut AgentConfig, Given<'_>) -> Result<(), ConfigError>;

/// One key: its documentation, where it matters and how its value is applied.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// The documentation and flag shape.
    pub doc: KeyDoc,
    /// The stores it matters for.
    pub stores: Stores,
    /// Applies a value.
    pub apply: Apply,
}

impl Key {
    /// The key.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        self.doc.key
    }

    /// The same row, also the flag `flag` of `weft-agent run`.
    const fn flag(self, flag: Flag) -> Self {
        Self {
            doc: self.doc.flag(flag),
            ..self
        }
    }

    /// Applies `value` (trimmed) to `config`.
    ///
    /// # Errors
    /// The value has the wrong form; the error names the key and what it accepts.
    pub fn apply(&self, config: &mut AgentConfig, value: &str) -> Result<(), ConfigError> {
        (self.apply)(
            config,
            Given {
                key: self.doc.key,
                value,
            },
        )
    }
}

/// A flag with a value.
const VALUE: Flag = Flag::Value;
/// A boolean flag: alone it means true, as in Cilium (`--enable-ipv6`).
const SWITCH: Flag = Flag::Switch {
    require_equals: false,
};
/// What the keys of `weft_k8s::telemetry` do here: nothing (telemetry reads them itself).
const IN_TELEMETRY: Apply = |_, _| Ok(());
/// What the `eni-*` tag keys accept.
const TAGS: &str = "comma-separated key=value pairs";

use IpamMode::{AlibabaCloud, Azure, ClusterPool, Crd, Eni};

/// The modes whose CiliumNode carries `min/pre/max-allocate` (Cilium's ENI/Azure/CRD family).
const WATERMARK_MODES: &[IpamMode] = &[Crd, Eni, Azure, AlibabaCloud];

const fn doc(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    stores: Stores,
    cilium: Cilium,
    meaning: &'static str,
    apply: Apply,
) -> Key {
    Key {
        doc: KeyDoc::new(key, default, modes, cilium, meaning),
        stores,
        apply,
    }
}

const fn agent(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    meaning: &'static str,
    apply: Apply,
) -> Key {
    doc(
        key,
        default,
        modes,
        Stores::Both,
        Cilium::Agent,
        meaning,
        apply,
    )
}

const fn seed(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    meaning: &'static str,
    apply: Apply,
) -> Key {
    doc(
        key,
        default,
        modes,
        Stores::Kubernetes,
        Cilium::Agent,
        meaning,
        apply,
    )
}

const fn eni(key: &'static str, default: DefaultValue, meaning: &'static str, apply: Apply) -> Key {
    seed(key, default, Modes::Only(&[Eni]), meaning, apply)
}

const fn pool(
    key: &'static str,
    default: DefaultValue,
    meaning: &'static str,
    apply: Apply,
) -> Key {
    doc(
        key,
        default,
        Modes::Only(&[ClusterPool]),
        Stores::Embedded,
        Cilium::Operator,
        meaning,
        apply,
    )
}

mod node;
mod seed;

pub use self::{
    node::{
        ENABLE_BPF_MASQUERADE, ENABLE_IPV4, ENABLE_IPV6, IPAM, ONLY_MASQUERADE_DEFAULT_POOL,
        PROMETHEUS_SERVE_ADDR, ROUTING_MODE, TUNNEL_PROTOCOL,
    },
    seed::{
        CLUSTER_POOL_IPV4_CIDR, CLUSTER_POOL_IPV4_MASK_SIZE, CLUSTER_POOL_IPV6_CIDR,
        CLUSTER_POOL_IPV6_MASK_SIZE,
    },
};

/// Every key the agent reads, in the documentation's order.
pub const REFERENCE: [Key; 49] = [
    IPAM,
    node::IPAM_DEFAULT_IP_POOL,
    node::IPAM_MULTI_POOL_PRE_ALLOCATION,
    ENABLE_IPV4,
    ENABLE_IPV6,
    node::IPAM_CILIUM_NODE_UPDATE_RATE,
    node::ENABLE_HEALTH_CHECKING,
    ONLY_MASQUERADE_DEFAULT_POOL,
    ENABLE_BPF_MASQUERADE,
    node::ENABLE_IPV4_MASQUERADE,
    node::ENABLE_IPV6_MASQUERADE,
    node::DEVICES,
    node::ENABLE_IP_MASQ_AGENT,
    node::IP_MASQ_AGENT_CONFIG_PATH,
    node::IPV4_NATIVE_ROUTING_CIDR,
    node::IPV6_NATIVE_ROUTING_CIDR,
    seed::AUTO_CREATE_CILIUM_NODE_RESOURCE,
    seed::IPAM_MIN_ALLOCATE,
    seed::IPAM_PRE_ALLOCATE,
    seed::IPAM_MAX_ALLOCATE,
    seed::IPAM_STATIC_IP_TAGS,
    seed::AZURE_INTERFACE_NAME,
    seed::READ_CNI_CONF,
    node::AUTO_DIRECT_NODE_ROUTES,
    ROUTING_MODE,
    TUNNEL_PROTOCOL,
    node::TUNNEL_PORT,
    node::CLUSTER_NAME,
    seed::AGENT_NOT_READY_TAINT_KEY,
    node::REMOVE_CILIUM_NODE_TAINTS,
    PROMETHEUS_SERVE_ADDR,
    node::BYPASS_IP_AVAILABILITY_UPON_RESTORE,
    seed::ENI_FIRST_INTERFACE_INDEX,
    seed::ENI_SUBNET_IDS,
    seed::ENI_SUBNET_TAGS,
    seed::ENI_SECURITY_GROUPS,
    seed::ENI_SECURITY_GROUP_TAGS,
    seed::ENI_EXCLUDE_INTERFACE_TAGS,
    seed::ENI_USE_PRIMARY_ADDRESS,
    seed::ENI_DISABLE_PREFIX_DELEGATION,
    seed::ENI_DELETE_ON_TERMINATION,
    seed::AWS_IMDS_ENDPOINT,
    CLUSTER_POOL_IPV4_CIDR,
    CLUSTER_POOL_IPV4_MASK_SIZE,
    CLUSTER_POOL_IPV6_CIDR,
    CLUSTER_POOL_IPV6_MASK_SIZE,
    node::FALSE,
    node::INFO,
    node::TEXT_TS,
];

/// The row of `key`, if it is one.
#[must_use]
pub fn lookup(key: &str) -> Option<&'static Key> {
    weft_k8s::config_ref::lookup(&REFERENCE, |row| &row.doc, key)
}

/// Every key, in the table's order.
pub const KEYS: [&str; REFERENCE.len()] = {
    let mut keys = [""; REFERENCE.len()];
    let mut i = 0;
    while i < REFERENCE.len() {
        keys[i] = REFERENCE[i].doc.key;
        i += 1;
    }
    keys
};

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn every_key_has_exactly_one_row() {
        for key in KEYS {
            let rows = REFERENCE.iter().filter(|row| row.name() == key).count();
            assert_eq!(
                rows, 1,
                "{key}: {rows} rows in config::reference::REFERENCE"
            );
        }
        for row in &REFERENCE {
            assert!(!row.doc.meaning.is_empty(), "{}: no meaning", row.name());
        }
    }

    #[test]
    fn documented_defaults_are_the_codes() {
        let none = AgentConfig::resolve([]).expect("the defaults resolve");
        for row in &REFERENCE {
            let value = row.doc.default.as_given();
            let layer = BTreeMap::from([(row.name().to_owned(), value.to_owned())]);
            let given = AgentConfig::resolve([&layer]).unwrap_or_else(|e| {
                panic!("{}: the documented default {value:?}: {e}", row.name())
            });
            assert_eq!(
                given,
                none,
                "{}: the documented default {value:?} is not what the agent uses without the key",
                row.name()
            );
        }
    }

    #[test]
    fn a_wrong_default_is_caught() {
        let none = AgentConfig::resolve([]).expect("the defaults resolve");
        let layer = BTreeMap::from([("enable-ipv6".to_owned(), "true".to_owned())]);
        assert_ne!(AgentConfig::resolve([&layer]).expect("valid"), none);
    }
}

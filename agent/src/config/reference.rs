//! The user's documentation of every cilium-config key the agent reads ([`super::KEYS`]): its
//! default, the IPAM modes and stores that read it, Cilium's equivalent and a one-line meaning.
//! `cargo xtask gen-config-ref` renders this table into the configuration reference; the tests
//! below fail when a key has no entry, has two, or documents a default that is not the code's.
//! Data only: it parses nothing and must not be consulted when resolving a configuration.

use crate::ipam::mode::IpamMode;

/// A key's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// This value; resolving it gives the same configuration as leaving the key out.
    Value(&'static str),
    /// Empty, which means what the text says (resolving an empty value changes nothing).
    Empty(&'static str),
}

/// Which IPAM modes read a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modes {
    /// Every mode.
    All,
    /// Only these.
    Only(&'static [IpamMode]),
}

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

/// Cilium's equivalent of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cilium {
    /// The same key of `cilium-agent`, with the same meaning.
    Agent,
    /// The same key of `cilium-operator` (the agent reads it for its in-process allocator).
    Operator,
}

/// One key's documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDoc {
    /// The cilium-config key (also a flag of `weft-agent run` where one exists).
    pub key: &'static str,
    /// Its default.
    pub default: DefaultValue,
    /// The IPAM modes that read it.
    pub modes: Modes,
    /// The stores it matters for.
    pub stores: Stores,
    /// Cilium's equivalent.
    pub cilium: Cilium,
    /// What it does, in one line.
    pub meaning: &'static str,
}

use IpamMode::{AlibabaCloud, Azure, ClusterPool, Crd, Eni, MultiPool};

/// The modes whose CiliumNode carries `min/pre/max-allocate` (Cilium's ENI/Azure/CRD family).
const WATERMARK_MODES: &[IpamMode] = &[Crd, Eni, Azure, AlibabaCloud];

const fn doc(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    stores: Stores,
    cilium: Cilium,
    meaning: &'static str,
) -> KeyDoc {
    KeyDoc {
        key,
        default,
        modes,
        stores,
        cilium,
        meaning,
    }
}

const fn agent(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    meaning: &'static str,
) -> KeyDoc {
    doc(key, default, modes, Stores::Both, Cilium::Agent, meaning)
}

const fn seed(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    meaning: &'static str,
) -> KeyDoc {
    doc(
        key,
        default,
        modes,
        Stores::Kubernetes,
        Cilium::Agent,
        meaning,
    )
}

const fn eni(key: &'static str, default: DefaultValue, meaning: &'static str) -> KeyDoc {
    seed(key, default, Modes::Only(&[Eni]), meaning)
}

const fn pool(key: &'static str, default: DefaultValue, meaning: &'static str) -> KeyDoc {
    doc(
        key,
        default,
        Modes::Only(&[ClusterPool]),
        Stores::Embedded,
        Cilium::Operator,
        meaning,
    )
}

use DefaultValue::{Empty, Value};

/// Every key of [`super::KEYS`], in the same order.
pub const REFERENCE: [KeyDoc; super::KEYS.len()] = [
    agent(
        "ipam",
        Value("cluster-pool"),
        Modes::All,
        "IPAM mode: kubernetes, cluster-pool, multi-pool, crd, eni, azure or alibabacloud \
         (Cilium's delegated-plugin is refused)",
    ),
    agent(
        "ipam-default-ip-pool",
        Value("default"),
        Modes::Only(&[MultiPool]),
        "pool of a pod that no annotation or CiliumPodIPPool selector places elsewhere",
    ),
    agent(
        "ipam-multi-pool-pre-allocation",
        Empty("`<ipam-default-ip-pool>=8`"),
        Modes::Only(&[MultiPool]),
        "free addresses to keep per pool, `pool=count,…` or a JSON object",
    ),
    agent(
        "enable-ipv4",
        Value("true"),
        Modes::All,
        "allocate IPv4 addresses (at least one family must be on)",
    ),
    agent(
        "enable-ipv6",
        Value("false"),
        Modes::All,
        "allocate IPv6 addresses",
    ),
    agent(
        "ipam-cilium-node-update-rate",
        Value("15s"),
        Modes::All,
        "minimum interval between two writes of the own CiliumNode (Go duration)",
    ),
    agent(
        "enable-health-checking",
        Value("true"),
        Modes::Only(&[Crd, Azure, AlibabaCloud]),
        "the CRD allocator waits for 2 addresses before it is ready",
    ),
    agent(
        "only-masquerade-default-pool",
        Value("false"),
        Modes::Only(&[MultiPool]),
        "masquerade only pods of the default pool (requires enable-bpf-masquerade)",
    ),
    agent(
        "enable-bpf-masquerade",
        Value("false"),
        Modes::All,
        "masquerade pod traffic leaving through the native devices in eBPF (`to_netdev`)",
    ),
    agent(
        "enable-ipv4-masquerade",
        Value("true"),
        Modes::All,
        "masquerade IPv4 pod traffic (with enable-bpf-masquerade)",
    ),
    agent(
        "enable-ipv6-masquerade",
        Value("true"),
        Modes::All,
        "masquerade IPv6 pod traffic (with enable-bpf-masquerade and enable-ipv6)",
    ),
    agent(
        "devices",
        Empty("the device of the IPv4 default route, else of the IPv6 one"),
        Modes::All,
        "native devices, separated by commas or spaces",
    ),
    agent(
        "enable-ip-masq-agent",
        Value("false"),
        Modes::All,
        "read non-masquerade CIDRs from the ip-masq-agent file",
    ),
    agent(
        "ip-masq-agent-config-path",
        Value(super::DEFAULT_IP_MASQ_AGENT_CONFIG),
        Modes::All,
        "the ip-masq-agent file (YAML or JSON; watched, edits apply without a restart)",
    ),
    agent(
        "ipv4-native-routing-cidr",
        Empty("none"),
        Modes::All,
        "IPv4 destinations that keep the pod address (not masqueraded)",
    ),
    agent(
        "ipv6-native-routing-cidr",
        Empty("none"),
        Modes::All,
        "IPv6 destinations that keep the pod address (not masqueraded)",
    ),
    seed(
        "auto-create-cilium-node-resource",
        Value("true"),
        Modes::All,
        "create the own CiliumNode when missing, and seed it from the Node",
    ),
    seed(
        "ipam-min-allocate",
        Value("0"),
        Modes::Only(WATERMARK_MODES),
        "`spec.ipam.min-allocate` to seed (0: unset)",
    ),
    seed(
        "ipam-pre-allocate",
        Value("0"),
        Modes::Only(WATERMARK_MODES),
        "`spec.ipam.pre-allocate` to seed (0: unset; the operator then uses 8)",
    ),
    seed(
        "ipam-max-allocate",
        Value("0"),
        Modes::Only(WATERMARK_MODES),
        "`spec.ipam.max-allocate` to seed (0: unset)",
    ),
    seed(
        "ipam-static-ip-tags",
        Empty("none"),
        Modes::All,
        "`spec.ipam.static-ip-tags` to seed, `key=value,…`; pods wait for the static IP",
    ),
    seed(
        "azure-interface-name",
        Empty("every NIC"),
        Modes::Only(&[Azure]),
        "`spec.azure.interface-name` to seed: allocate on that NIC only",
    ),
    seed(
        "read-cni-conf",
        Empty("none"),
        Modes::All,
        "a CNI configuration file whose `ipam`, `eni` and `azure` values win when seeding",
    ),
    agent(
        "auto-direct-node-routes",
        Value("false"),
        Modes::All,
        "route other nodes' pod CIDRs via their addresses (nodes on one L2 network)",
    ),
    agent(
        "cluster-name",
        Value("default"),
        Modes::All,
        "cluster name in every pod's security labels",
    ),
    seed(
        "agent-not-ready-taint-key",
        Value("node.cilium.io/agent-not-ready"),
        Modes::All,
        "the taint removed from the own Node once the agent serves CNI (empty: none)",
    ),
    doc(
        "remove-cilium-node-taints",
        Value("true"),
        Modes::All,
        Stores::Kubernetes,
        Cilium::Operator,
        "remove agent-not-ready-taint-key from the own Node once ready (Cilium's operator does \
         it for its agents)",
    ),
    agent(
        "prometheus-serve-addr",
        Empty("`/metrics` on `--health-addr` only"),
        Modes::All,
        "also serve `/metrics` here (`:9962`: every interface); the `--prometheus-serve-addr` flag (`WEFT_PROMETHEUS_SERVE_ADDR`) wins",
    ),
    agent(
        "bypass-ip-availability-upon-restore",
        Value("false"),
        Modes::Only(&[Crd, Azure, AlibabaCloud]),
        "restore a recorded IPv4 address that left `spec.ipam.pool` instead of reporting it",
    ),
    eni(
        "eni-first-interface-index",
        Value("0"),
        "`spec.eni.first-interface-index` to seed",
    ),
    eni(
        "eni-subnet-ids",
        Empty("none"),
        "`spec.eni.subnet-ids` to seed (comma-separated)",
    ),
    eni(
        "eni-subnet-tags",
        Empty("none"),
        "`spec.eni.subnet-tags` to seed (`key=value,…`)",
    ),
    eni(
        "eni-security-groups",
        Empty("none"),
        "`spec.eni.security-groups` to seed (comma-separated)",
    ),
    eni(
        "eni-security-group-tags",
        Empty("none"),
        "`spec.eni.security-group-tags` to seed (`key=value,…`)",
    ),
    eni(
        "eni-exclude-interface-tags",
        Empty("none"),
        "`spec.eni.exclude-interface-tags` to seed (`key=value,…`)",
    ),
    eni(
        "eni-use-primary-address",
        Value("false"),
        "`spec.eni.use-primary-address` to seed",
    ),
    eni(
        "eni-disable-prefix-delegation",
        Value("false"),
        "`spec.eni.disable-prefix-delegation` to seed",
    ),
    eni(
        "eni-delete-on-termination",
        Value("true"),
        "`spec.eni.delete-on-termination` to seed",
    ),
    pool(
        "cluster-pool-ipv4-cidr",
        Empty("the podCIDRs already in the own CiliumNode"),
        "cluster CIDRs the in-process allocator carves IPv4 node blocks from",
    ),
    pool(
        "cluster-pool-ipv4-mask-size",
        Value("24"),
        "prefix length of each node's IPv4 block",
    ),
    pool(
        "cluster-pool-ipv6-cidr",
        Empty("the podCIDRs already in the own CiliumNode"),
        "cluster CIDRs for IPv6 node blocks (with enable-ipv6)",
    ),
    pool(
        "cluster-pool-ipv6-mask-size",
        Value("112"),
        "prefix length of each node's IPv6 block",
    ),
    agent(
        "debug",
        Value("false"),
        Modes::All,
        "log debug messages (log-level wins when both are set; `RUST_LOG` beats both)",
    ),
    agent(
        "log-level",
        Value("info"),
        Modes::All,
        "trace, debug, info, warn or error (`RUST_LOG`, when set, wins)",
    ),
    agent(
        "log-format",
        Value("text-ts"),
        Modes::All,
        "text, text-ts, json or json-ts (`-ts`: with a timestamp)",
    ),
];

/// The entry of `key`, if it is one.
#[must_use]
pub fn lookup(key: &str) -> Option<&'static KeyDoc> {
    REFERENCE.iter().find(|doc| doc.key == key)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{super::AgentConfig, *};

    #[test]
    fn every_key_has_exactly_one_entry() {
        for key in super::super::KEYS {
            let entries = REFERENCE.iter().filter(|doc| doc.key == key).count();
            assert_eq!(
                entries, 1,
                "{key}: {entries} entries in config::reference::REFERENCE"
            );
        }
        for doc in &REFERENCE {
            assert!(
                super::super::KEYS.contains(&doc.key),
                "{}: documented in REFERENCE but not in config::KEYS",
                doc.key
            );
            assert!(!doc.meaning.is_empty(), "{}: no meaning", doc.key);
        }
    }

    #[test]
    fn documented_defaults_are_the_codes() {
        let none = AgentConfig::resolve([]).expect("the defaults resolve");
        for doc in &REFERENCE {
            let value = match doc.default {
                Value(value) => value,
                Empty(_) => "",
            };
            let layer = BTreeMap::from([(doc.key.to_owned(), value.to_owned())]);
            let given = AgentConfig::resolve([&layer])
                .unwrap_or_else(|e| panic!("{}: the documented default {value:?}: {e}", doc.key));
            assert_eq!(
                given, none,
                "{}: the documented default {value:?} is not what the agent uses without the key",
                doc.key
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

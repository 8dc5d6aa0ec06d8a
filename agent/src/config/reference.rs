//! The agent's configuration table: one row per cilium-config key the agent reads, with the
//! user's documentation (default, IPAM modes and stores that read it, Cilium's equivalent, a
//! one-line meaning), the flag of `weft-agent run` it also is, and how its value is applied to
//! [`AgentConfig`]. Everything that knows a key reads it from here: the flags
//! ([`crate::cli::ConfigArgs`]), resolving ([`AgentConfig::resolve`]), the checks across keys,
//! the feature guard's list of known keys and `cargo xtask gen-config-ref`. The tests below fail
//! when a key has two rows or documents a default that is not the code's. It reads no file.

use std::path::PathBuf;

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

use DefaultValue::{Empty, Value};

/// The `ipam` row.
pub const IPAM: Key = agent(
    "ipam",
    Value("cluster-pool"),
    Modes::All,
    "IPAM mode: kubernetes, cluster-pool, multi-pool, crd, eni, azure or alibabacloud \
         (Cilium's delegated-plugin is refused)",
    |c, v| {
        c.ipam = v.mode()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `enable-ipv4` row.
pub const ENABLE_IPV4: Key = agent(
    "enable-ipv4",
    Value("true"),
    Modes::All,
    "allocate IPv4 addresses (at least one family must be on)",
    |c, v| {
        c.enable_ipv4 = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `enable-ipv6` row.
pub const ENABLE_IPV6: Key = agent(
    "enable-ipv6",
    Value("false"),
    Modes::All,
    "allocate IPv6 addresses",
    |c, v| {
        c.enable_ipv6 = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `only-masquerade-default-pool` row.
pub const ONLY_MASQUERADE_DEFAULT_POOL: Key = agent(
    "only-masquerade-default-pool",
    Value("false"),
    Modes::Only(&[MultiPool]),
    "masquerade only pods of the default pool (requires enable-bpf-masquerade)",
    |c, v| {
        c.only_masquerade_default_pool = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `enable-bpf-masquerade` row.
pub const ENABLE_BPF_MASQUERADE: Key = agent(
    "enable-bpf-masquerade",
    Value("false"),
    Modes::All,
    "masquerade pod traffic leaving through the native devices in eBPF (`to_netdev`)",
    |c, v| {
        c.enable_bpf_masquerade = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `prometheus-serve-addr` row.
pub const PROMETHEUS_SERVE_ADDR: Key = agent(
    "prometheus-serve-addr",
    Empty("`/metrics` on `--health-addr` only"),
    Modes::All,
    "also serve `/metrics` here (`:9962`: every interface); the `--prometheus-serve-addr` flag (`WEFT_PROMETHEUS_SERVE_ADDR`) wins",
    |c, v| {
        if !v.value.is_empty() {
            c.prometheus_serve_addr = Some(
                crate::cli::parse_listen_addr(v.value)
                    .map_err(|_| v.bad("host:port, or :port for every interface (:9962)"))?,
            );
        }
        Ok(())
    },
);

/// Every key the agent reads.
pub const REFERENCE: [Key; 45] = [
    IPAM,
    agent(
        "ipam-default-ip-pool",
        Value("default"),
        Modes::Only(&[MultiPool]),
        "pool of a pod that no annotation or CiliumPodIPPool selector places elsewhere",
        |c, v| {
            if !v.value.is_empty() {
                v.value.clone_into(&mut c.default_pool);
            }
            Ok(())
        },
    )
    .flag(VALUE),
    agent(
        "ipam-multi-pool-pre-allocation",
        Empty("`<ipam-default-ip-pool>=8`"),
        Modes::Only(&[MultiPool]),
        "free addresses to keep per pool, `pool=count,…` or a JSON object",
        |c, v| {
            v.value.clone_into(&mut c.multi_pool_pre_allocation);
            Ok(())
        },
    )
    .flag(VALUE),
    ENABLE_IPV4,
    ENABLE_IPV6,
    agent(
        "ipam-cilium-node-update-rate",
        Value("15s"),
        Modes::All,
        "minimum interval between two writes of the own CiliumNode (Go duration)",
        |c, v| {
            c.node_update_rate = v.duration()?;
            Ok(())
        },
    )
    .flag(VALUE),
    agent(
        "enable-health-checking",
        Value("true"),
        Modes::Only(&[Crd, Azure, AlibabaCloud]),
        "the CRD allocator waits for 2 addresses before it is ready",
        |c, v| {
            c.health_checking = v.bool()?;
            Ok(())
        },
    )
    .flag(SWITCH),
    ONLY_MASQUERADE_DEFAULT_POOL,
    ENABLE_BPF_MASQUERADE,
    agent(
        "enable-ipv4-masquerade",
        Value("true"),
        Modes::All,
        "masquerade IPv4 pod traffic (with enable-bpf-masquerade)",
        |c, v| {
            c.enable_ipv4_masquerade = v.bool()?;
            Ok(())
        },
    )
    .flag(SWITCH),
    agent(
        "enable-ipv6-masquerade",
        Value("true"),
        Modes::All,
        "masquerade IPv6 pod traffic (with enable-bpf-masquerade and enable-ipv6)",
        |c, v| {
            c.enable_ipv6_masquerade = v.bool()?;
            Ok(())
        },
    )
    .flag(SWITCH),
    agent(
        "devices",
        Empty("the device of the IPv4 default route, else of the IPv6 one"),
        Modes::All,
        "native devices, separated by commas or spaces",
        |c, v| {
            c.devices = v
                .value
                .split([',', ' '])
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect();
            Ok(())
        },
    )
    .flag(VALUE),
    agent(
        "enable-ip-masq-agent",
        Value("false"),
        Modes::All,
        "read non-masquerade CIDRs from the ip-masq-agent file",
        |c, v| {
            c.enable_ip_masq_agent = v.bool()?;
            Ok(())
        },
    )
    .flag(SWITCH),
    agent(
        "ip-masq-agent-config-path",
        Value(super::DEFAULT_IP_MASQ_AGENT_CONFIG),
        Modes::All,
        "the ip-masq-agent file (YAML or JSON; watched, edits apply without a restart)",
        |c, v| {
            if !v.value.is_empty() {
                c.ip_masq_agent_config_path = PathBuf::from(v.value);
            }
            Ok(())
        },
    )
    .flag(VALUE),
    agent(
        "ipv4-native-routing-cidr",
        Empty("none"),
        Modes::All,
        "IPv4 destinations that keep the pod address (not masqueraded)",
        |c, v| {
            if let Some(cidr) = v.cidr("IPv4")? {
                c.ipv4_native_routing_cidr = Some(cidr);
            }
            Ok(())
        },
    )
    .flag(VALUE),
    agent(
        "ipv6-native-routing-cidr",
        Empty("none"),
        Modes::All,
        "IPv6 destinations that keep the pod address (not masqueraded)",
        |c, v| {
            if let Some(cidr) = v.cidr("IPv6")? {
                c.ipv6_native_routing_cidr = Some(cidr);
            }
            Ok(())
        },
    )
    .flag(VALUE),
    seed(
        "auto-create-cilium-node-resource",
        Value("true"),
        Modes::All,
        "create the own CiliumNode when missing, and seed it from the Node",
        |c, v| {
            c.node_seed.auto_create = v.bool()?;
            Ok(())
        },
    )
    .flag(SWITCH),
    seed(
        "ipam-min-allocate",
        Value("0"),
        Modes::Only(WATERMARK_MODES),
        "`spec.ipam.min-allocate` to seed (0: unset)",
        |c, v| {
            c.node_seed.min_allocate = v.count()?;
            Ok(())
        },
    )
    .flag(VALUE),
    seed(
        "ipam-pre-allocate",
        Value("0"),
        Modes::Only(WATERMARK_MODES),
        "`spec.ipam.pre-allocate` to seed (0: unset; the operator then uses 8)",
        |c, v| {
            c.node_seed.pre_allocate = v.count()?;
            Ok(())
        },
    )
    .flag(VALUE),
    seed(
        "ipam-max-allocate",
        Value("0"),
        Modes::Only(WATERMARK_MODES),
        "`spec.ipam.max-allocate` to seed (0: unset)",
        |c, v| {
            c.node_seed.max_allocate = v.count()?;
            Ok(())
        },
    )
    .flag(VALUE),
    seed(
        "ipam-static-ip-tags",
        Empty("none"),
        Modes::All,
        "`spec.ipam.static-ip-tags` to seed, `key=value,…`; pods wait for the static IP",
        |c, v| {
            c.node_seed.static_ip_tags =
                v.tags("comma-separated key=value pairs, e.g. team=a,env=prod")?;
            Ok(())
        },
    )
    .flag(VALUE),
    seed(
        "azure-interface-name",
        Empty("every NIC"),
        Modes::Only(&[Azure]),
        "`spec.azure.interface-name` to seed: allocate on that NIC only",
        |c, v| {
            v.value.clone_into(&mut c.node_seed.azure_interface_name);
            Ok(())
        },
    )
    .flag(VALUE),
    seed(
        "read-cni-conf",
        Empty("none"),
        Modes::All,
        "a CNI configuration file whose `ipam`, `eni` and `azure` values win when seeding",
        |c, v| {
            c.node_seed.read_cni_conf = (!v.value.is_empty()).then(|| PathBuf::from(v.value));
            Ok(())
        },
    )
    .flag(VALUE),
    agent(
        "auto-direct-node-routes",
        Value("false"),
        Modes::All,
        "route other nodes' pod CIDRs via their addresses (nodes on one L2 network)",
        |c, v| {
            c.auto_direct_node_routes = v.bool()?;
            Ok(())
        },
    )
    .flag(SWITCH),
    agent(
        "cluster-name",
        Value("default"),
        Modes::All,
        "cluster name in every pod's security labels",
        |c, v| {
            if !v.value.is_empty() {
                v.value.clone_into(&mut c.cluster_name);
            }
            Ok(())
        },
    )
    .flag(VALUE),
    seed(
        "agent-not-ready-taint-key",
        Value("node.cilium.io/agent-not-ready"),
        Modes::All,
        "the taint removed from the own Node once the agent serves CNI (empty: none)",
        |c, v| {
            v.value.clone_into(&mut c.not_ready_taint_key);
            Ok(())
        },
    ),
    doc(
        "remove-cilium-node-taints",
        Value("true"),
        Modes::All,
        Stores::Kubernetes,
        Cilium::Operator,
        "remove agent-not-ready-taint-key from the own Node once ready (Cilium's operator does \
             it for its agents)",
        |c, v| {
            c.remove_node_taints = v.bool()?;
            Ok(())
        },
    ),
    PROMETHEUS_SERVE_ADDR,
    agent(
        "bypass-ip-availability-upon-restore",
        Value("false"),
        Modes::Only(&[Crd, Azure, AlibabaCloud]),
        "restore a recorded IPv4 address that left `spec.ipam.pool` instead of reporting it",
        |c, v| {
            c.bypass_ip_availability_upon_restore = v.bool()?;
            Ok(())
        },
    )
    .flag(SWITCH),
    eni(
        "eni-first-interface-index",
        Value("0"),
        "`spec.eni.first-interface-index` to seed",
        |c, v| {
            c.node_seed.eni.first_interface_index = Some(
                v.value
                    .parse()
                    .map_err(|_| v.bad("a non-negative integer"))?,
            );
            Ok(())
        },
    ),
    eni(
        "eni-subnet-ids",
        Empty("none"),
        "`spec.eni.subnet-ids` to seed (comma-separated)",
        |c, v| {
            c.node_seed.eni.subnet_ids = v.list();
            Ok(())
        },
    ),
    eni(
        "eni-subnet-tags",
        Empty("none"),
        "`spec.eni.subnet-tags` to seed (`key=value,…`)",
        |c, v| {
            c.node_seed.eni.subnet_tags = v.tags(TAGS)?;
            Ok(())
        },
    ),
    eni(
        "eni-security-groups",
        Empty("none"),
        "`spec.eni.security-groups` to seed (comma-separated)",
        |c, v| {
            c.node_seed.eni.security_groups = v.list();
            Ok(())
        },
    ),
    eni(
        "eni-security-group-tags",
        Empty("none"),
        "`spec.eni.security-group-tags` to seed (`key=value,…`)",
        |c, v| {
            c.node_seed.eni.security_group_tags = v.tags(TAGS)?;
            Ok(())
        },
    ),
    eni(
        "eni-exclude-interface-tags",
        Empty("none"),
        "`spec.eni.exclude-interface-tags` to seed (`key=value,…`)",
        |c, v| {
            c.node_seed.eni.exclude_interface_tags = v.tags(TAGS)?;
            Ok(())
        },
    ),
    eni(
        "eni-use-primary-address",
        Value("false"),
        "`spec.eni.use-primary-address` to seed",
        |c, v| {
            c.node_seed.eni.use_primary_address = Some(v.bool()?);
            Ok(())
        },
    ),
    eni(
        "eni-disable-prefix-delegation",
        Value("false"),
        "`spec.eni.disable-prefix-delegation` to seed",
        |c, v| {
            c.node_seed.eni.disable_prefix_delegation = Some(v.bool()?);
            Ok(())
        },
    ),
    eni(
        "eni-delete-on-termination",
        Value("true"),
        "`spec.eni.delete-on-termination` to seed",
        |c, v| {
            c.node_seed.eni.delete_on_termination = Some(v.bool()?);
            Ok(())
        },
    ),
    pool(
        "cluster-pool-ipv4-cidr",
        Empty("the podCIDRs already in the own CiliumNode"),
        "cluster CIDRs the in-process allocator carves IPv4 node blocks from",
        |c, v| {
            c.cluster_pool.ipv4.cidrs = v.cidr_list()?;
            Ok(())
        },
    )
    .flag(VALUE),
    pool(
        "cluster-pool-ipv4-mask-size",
        Value("24"),
        "prefix length of each node's IPv4 block",
        |c, v| {
            c.cluster_pool.ipv4.mask_size = v.mask_size(32, "24")?;
            Ok(())
        },
    )
    .flag(VALUE),
    pool(
        "cluster-pool-ipv6-cidr",
        Empty("the podCIDRs already in the own CiliumNode"),
        "cluster CIDRs for IPv6 node blocks (with enable-ipv6)",
        |c, v| {
            c.cluster_pool.ipv6.cidrs = v.cidr_list()?;
            Ok(())
        },
    )
    .flag(VALUE),
    pool(
        "cluster-pool-ipv6-mask-size",
        Value("112"),
        "prefix length of each node's IPv6 block",
        |c, v| {
            c.cluster_pool.ipv6.mask_size = v.mask_size(128, "112")?;
            Ok(())
        },
    )
    .flag(VALUE),
    agent(
        weft_k8s::telemetry::KEYS[0],
        Value("false"),
        Modes::All,
        "log debug messages (log-level wins when both are set; `RUST_LOG` beats both)",
        IN_TELEMETRY,
    ),
    agent(
        weft_k8s::telemetry::KEYS[1],
        Value("info"),
        Modes::All,
        "trace, debug, info, warn or error (`RUST_LOG`, when set, wins)",
        IN_TELEMETRY,
    ),
    agent(
        weft_k8s::telemetry::KEYS[2],
        Value("text-ts"),
        Modes::All,
        "text, text-ts, json or json-ts (`-ts`: with a timestamp)",
        IN_TELEMETRY,
    ),
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

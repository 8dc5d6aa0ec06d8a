//! The user's documentation of every setting `weft-operator` reads from a flag or the same
//! cilium-config key ([`crate::cli::Cli`], resolved by [`super::OperatorConfig::resolve`]): its
//! default, the IPAM modes that read it, Cilium's equivalent and a one-line meaning.
//! `cargo xtask gen-config-ref` renders this table into the configuration reference; the tests
//! below fail when a flag has no entry, has two, or documents a default that is not the code's.
//! Data only: it must not be consulted when resolving a configuration.

use super::IpamMode::{self, Azure, ClusterPool, MultiPool};

/// Flags of [`crate::cli::Cli`] that are not configuration keys (nothing reads them from
/// `--config-dir`).
pub const FLAG_ONLY: [&str; 3] = ["config-dir", "kubeconfig", "metrics-naming"];

/// A setting's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultValue {
    /// This value; resolving it gives the same configuration as leaving the key out.
    Value(&'static str),
    /// Empty (unset), which means what the text says.
    Empty(&'static str),
}

/// Which modes read a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modes {
    /// Every mode.
    All,
    /// Only these.
    Only(&'static [IpamMode]),
}

/// Cilium's equivalent of a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cilium {
    /// The same flag and key of `cilium-operator`, with the same meaning.
    Operator,
    /// weft's own; the text says what Cilium does instead.
    Weft(&'static str),
}

/// One setting's documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDoc {
    /// The key, and the flag `--<key>`.
    pub key: &'static str,
    /// Its default.
    pub default: DefaultValue,
    /// The modes that read it.
    pub modes: Modes,
    /// Cilium's equivalent.
    pub cilium: Cilium,
    /// What it does, in one line.
    pub meaning: &'static str,
}

const fn op(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    meaning: &'static str,
) -> KeyDoc {
    KeyDoc {
        key,
        default,
        modes,
        cilium: Cilium::Operator,
        meaning,
    }
}

const fn weft(
    key: &'static str,
    default: DefaultValue,
    modes: Modes,
    cilium: &'static str,
    meaning: &'static str,
) -> KeyDoc {
    KeyDoc {
        key,
        default,
        modes,
        cilium: Cilium::Weft(cilium),
        meaning,
    }
}

const AZURE: Modes = Modes::Only(&[Azure]);
const CLUSTER_POOL: Modes = Modes::Only(&[ClusterPool]);

use DefaultValue::{Empty, Value};

/// Every configuration key of `weft-operator`.
pub const REFERENCE: [KeyDoc; 34] = [
    op(
        "ipam",
        Value("cluster-pool"),
        Modes::All,
        "IPAM mode: cluster-pool, multi-pool or azure",
    ),
    op(
        "cluster-pool-ipv4-cidr",
        Empty("none; required with IPv4"),
        CLUSTER_POOL,
        "cluster CIDRs IPv4 node blocks are carved from (list)",
    ),
    op(
        "cluster-pool-ipv4-mask-size",
        Value("24"),
        CLUSTER_POOL,
        "prefix length of each node's IPv4 block",
    ),
    op(
        "cluster-pool-ipv6-cidr",
        Empty("none; required with IPv6"),
        CLUSTER_POOL,
        "cluster CIDRs IPv6 node blocks are carved from (list)",
    ),
    op(
        "cluster-pool-ipv6-mask-size",
        Value("112"),
        CLUSTER_POOL,
        "prefix length of each node's IPv6 block",
    ),
    op(
        "auto-create-cilium-pod-ip-pools",
        Empty("none"),
        Modes::Only(&[MultiPool]),
        "CiliumPodIPPools to create at start when missing, \
         `<pool>=ipv4-cidrs:<cidr>;ipv4-mask-size:<n>…`",
    ),
    op(
        "enable-ipv4",
        Value("true"),
        Modes::All,
        "hand out IPv4 blocks",
    ),
    op(
        "enable-ipv6",
        Value("false"),
        Modes::All,
        "hand out IPv6 blocks",
    ),
    op(
        "operator-prometheus-serve-addr",
        Value(super::DEFAULT_PROMETHEUS_ADDR),
        Modes::All,
        "where `/metrics` is served (with enable-metrics)",
    ),
    op(
        "operator-api-serve-addr",
        Value(super::DEFAULT_API_ADDR),
        Modes::All,
        "where `/healthz` is served",
    ),
    op(
        "enable-metrics",
        Value("false"),
        Modes::All,
        "serve Prometheus metrics",
    ),
    weft(
        "leader-election",
        Value("true"),
        Modes::All,
        "cilium-operator always elects a leader",
        "elect a leader among replicas; false for a single replica",
    ),
    op(
        "leader-election-lease-duration",
        Value("15s"),
        Modes::All,
        "a lease not renewed for this long may be taken over",
    ),
    op(
        "leader-election-renew-deadline",
        Value("10s"),
        Modes::All,
        "the leader exits when it could not renew for this long",
    ),
    op(
        "leader-election-retry-period",
        Value("2s"),
        Modes::All,
        "wait between two attempts to acquire or renew",
    ),
    weft(
        "leader-election-namespace",
        Value("kube-system"),
        Modes::All,
        "cilium-operator uses its own namespace",
        "namespace of the Lease `weft-operator-resource-lock` (env `POD_NAMESPACE`)",
    ),
    op(
        "nodes-gc-interval",
        Value("5m0s"),
        Modes::All,
        "CiliumNodes without a Node for two passes are deleted (0: never)",
    ),
    op(
        "identity-gc-interval",
        Value("15m0s"),
        Modes::All,
        "how often unused CiliumIdentities are marked, then deleted (0: never)",
    ),
    op(
        "identity-heartbeat-timeout",
        Value("30m0s"),
        Modes::All,
        "an identity no CiliumEndpoint used for this long is marked; a marked one still \
         unused this long after is deleted",
    ),
    op(
        "identity-gc-rate-interval",
        Value("1m0s"),
        Modes::All,
        "interval of the identity deletion rate limit",
    ),
    op(
        "identity-gc-rate-limit",
        Value("2500"),
        Modes::All,
        "identities deleted at most per identity-gc-rate-interval",
    ),
    op(
        "azure-subscription-id",
        Empty("the operator's VM's, from IMDS"),
        AZURE,
        "subscription of the nodes",
    ),
    op(
        "azure-resource-group",
        Empty("the operator's VM's, from IMDS"),
        AZURE,
        "resource group of the nodes' VMs or scale sets (AKS: `MC_…`)",
    ),
    op(
        "azure-user-assigned-identity-id",
        Empty("none"),
        AZURE,
        "client ID (a UUID) of a user-assigned managed identity",
    ),
    op(
        "azure-use-primary-address",
        Value("false"),
        AZURE,
        "hand out the NICs' primary addresses too",
    ),
    weft(
        "azure-arm-endpoint",
        Empty("the cloud's, from IMDS `azEnvironment`"),
        AZURE,
        "none",
        "Azure Resource Manager at another URL (Azure Stack, an emulator)",
    ),
    weft(
        "azure-imds-endpoint",
        Value(super::DEFAULT_IMDS_ENDPOINT),
        AZURE,
        "none",
        "Instance Metadata Service at another URL",
    ),
    weft(
        "azure-release-excess-ips",
        Value("false"),
        AZURE,
        "cilium-operator never releases on Azure",
        "release addresses beyond a node's watermarks",
    ),
    op(
        "limit-ipam-api-qps",
        Value("4.0"),
        AZURE,
        "cloud API requests per second",
    ),
    op(
        "limit-ipam-api-burst",
        Value("20"),
        AZURE,
        "cloud API requests allowed in a burst",
    ),
    op(
        "parallel-alloc-workers",
        Value("50"),
        AZURE,
        "nodes resolved at once",
    ),
    op(
        "debug",
        Value("false"),
        Modes::All,
        "log debug messages (log-level wins when both are set; `RUST_LOG` beats both)",
    ),
    op(
        "log-level",
        Value("info"),
        Modes::All,
        "trace, debug, info, warn or error (`RUST_LOG`, when set, wins)",
    ),
    op(
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

    use clap::CommandFactory as _;

    use super::{
        super::{Cli, OperatorConfig},
        *,
    };

    fn flags() -> Vec<String> {
        Cli::command()
            .get_arguments()
            .filter_map(|arg| arg.get_long().map(str::to_owned))
            .filter(|long| long != "help" && long != "version")
            .collect()
    }

    #[test]
    fn every_flag_is_documented_or_flag_only() {
        for flag in flags() {
            let entries = REFERENCE.iter().filter(|doc| doc.key == flag).count();
            let expected = usize::from(!FLAG_ONLY.contains(&flag.as_str()));
            assert_eq!(
                entries, expected,
                "--{flag}: {entries} entries in config::reference"
            );
        }
        let flags = flags();
        for doc in &REFERENCE {
            assert!(
                flags.iter().any(|flag| flag == doc.key),
                "{}: documented but weft-operator has no such flag",
                doc.key
            );
        }
    }

    #[test]
    fn documented_defaults_are_the_codes() {
        let cli = Cli::default();
        let none = OperatorConfig::resolve(&cli, &BTreeMap::new()).expect("the defaults resolve");
        for doc in &REFERENCE {
            let value = match doc.default {
                Value(value) => value,
                Empty(_) => "",
            };
            let file = BTreeMap::from([(doc.key.to_owned(), value.to_owned())]);
            let given = OperatorConfig::resolve(&cli, &file)
                .unwrap_or_else(|e| panic!("{}: the documented default {value:?}: {e}", doc.key));
            assert_eq!(
                given, none,
                "{}: the documented default {value:?} is not what the operator uses without it",
                doc.key
            );
        }
    }
}

//! The `--ipam` mode: Cilium's exact mode strings (`pkg/ipam/option/option.go`), their parsing
//! (lower-cased, as `IPAMMode()`), and which allocator each mode runs. This file only names
//! modes; it owns no allocator state and must not grow mode-specific behaviour beyond the
//! mapping to an [`AllocatorKind`].

use std::{fmt, str::FromStr};

use thiserror::Error;

/// An IPAM mode, as given to `--ipam` (Helm `ipam.mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpamMode {
    /// `kubernetes`: host-scope allocator over the v1.Node pod CIDR.
    Kubernetes,
    /// `cluster-pool` (the default): host-scope allocator over `CiliumNode` `spec.ipam.podCIDRs`.
    #[default]
    ClusterPool,
    /// `multi-pool`: pools of CIDRs from `spec.ipam.pools.allocated`.
    MultiPool,
    /// `crd`: addresses from `spec.ipam.pool`, written by a user or an external operator.
    Crd,
    /// `eni`: AWS ENI addresses, on the multi-pool manager with linear pre-allocation.
    Eni,
    /// `azure`: Azure interface addresses from `spec.ipam.pool`.
    Azure,
    /// `alibabacloud`: `AlibabaCloud` ENI addresses from `spec.ipam.pool`.
    AlibabaCloud,
    /// `delegated-plugin`: the CNI delegates IPAM to another plugin; the agent allocates nothing.
    DelegatedPlugin,
}

/// Which allocator a mode runs (`ConfigureAllocator()` in `pkg/ipam/ipam.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocatorKind {
    /// One host-scope range per family (`kubernetes`, `cluster-pool`).
    HostScope,
    /// The CRD allocator over `spec.ipam.pool` (`crd`, `azure`, `alibabacloud`).
    Crd,
    /// The multi-pool manager with `neededIPCeil` demand (`multi-pool`).
    MultiPool,
    /// The multi-pool manager with linear demand `inUse + pending + preAlloc` (`eni`).
    MultiPoolLinear,
    /// No allocator: every call fails with `Operation not supported` (`delegated-plugin`).
    None,
}

/// Errors of this module.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ModeError {
    /// The value is none of Cilium's mode strings (after lower-casing).
    #[error("Unknown IPAM backend {value} (valid: {valid})", valid = IpamMode::valid_list())]
    Unknown {
        /// The lower-cased value that was given.
        value: String,
    },
}

impl IpamMode {
    /// Every mode, in the order the error message lists them.
    pub const ALL: [Self; 8] = [
        Self::Kubernetes,
        Self::ClusterPool,
        Self::MultiPool,
        Self::Crd,
        Self::Eni,
        Self::Azure,
        Self::AlibabaCloud,
        Self::DelegatedPlugin,
    ];

    /// Cilium's string for the mode (`cluster-pool`, `alibabacloud`, …).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Kubernetes => "kubernetes",
            Self::ClusterPool => "cluster-pool",
            Self::MultiPool => "multi-pool",
            Self::Crd => "crd",
            Self::Eni => "eni",
            Self::Azure => "azure",
            Self::AlibabaCloud => "alibabacloud",
            Self::DelegatedPlugin => "delegated-plugin",
        }
    }

    /// The allocator this mode runs.
    #[must_use]
    pub const fn allocator(self) -> AllocatorKind {
        match self {
            Self::Kubernetes | Self::ClusterPool => AllocatorKind::HostScope,
            Self::MultiPool => AllocatorKind::MultiPool,
            Self::Crd | Self::Azure | Self::AlibabaCloud => AllocatorKind::Crd,
            Self::Eni => AllocatorKind::MultiPoolLinear,
            Self::DelegatedPlugin => AllocatorKind::None,
        }
    }

    /// `kubernetes, cluster-pool, …`: the valid values, comma separated.
    fn valid_list() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl fmt::Display for IpamMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IpamMode {
    type Err = ModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let value = s.to_lowercase();
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == value)
            .ok_or(ModeError::Unknown { value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_mode_string_case_insensitively() {
        let cases = [
            ("kubernetes", IpamMode::Kubernetes, AllocatorKind::HostScope),
            (
                "Cluster-Pool",
                IpamMode::ClusterPool,
                AllocatorKind::HostScope,
            ),
            ("multi-pool", IpamMode::MultiPool, AllocatorKind::MultiPool),
            ("CRD", IpamMode::Crd, AllocatorKind::Crd),
            ("eni", IpamMode::Eni, AllocatorKind::MultiPoolLinear),
            ("azure", IpamMode::Azure, AllocatorKind::Crd),
            ("AlibabaCloud", IpamMode::AlibabaCloud, AllocatorKind::Crd),
            (
                "delegated-plugin",
                IpamMode::DelegatedPlugin,
                AllocatorKind::None,
            ),
        ];
        for (input, mode, kind) in cases {
            let parsed: IpamMode = input.parse().expect(input);
            assert_eq!(parsed, mode, "{input}");
            assert_eq!(parsed.allocator(), kind, "{input}");
            assert_eq!(parsed.to_string(), input.to_lowercase(), "{input}");
        }
    }

    #[test]
    fn default_is_cluster_pool() {
        assert_eq!(IpamMode::default(), IpamMode::ClusterPool);
        assert_eq!(IpamMode::default().to_string(), "cluster-pool");
    }

    #[test]
    fn unknown_mode_lists_valid_ones() {
        let cases = [
            ("foo", "foo"),
            ("Cluster_Pool", "cluster_pool"),
            ("", ""),
            ("alibaba-cloud", "alibaba-cloud"),
        ];
        for (input, shown) in cases {
            let err = input.parse::<IpamMode>().unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "Unknown IPAM backend {shown} (valid: kubernetes, cluster-pool, multi-pool, \
                     crd, eni, azure, alibabacloud, delegated-plugin)"
                )
            );
        }
    }
}

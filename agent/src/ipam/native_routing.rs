//! The IPv4 native-routing CIDR of the cloud modes (§6.1, §6.2 of the IPAM spec; Cilium's
//! `eni-native-routing-cidr-sync` and the CRD allocator's autodetection): in `eni` mode the
//! VPC's primary CIDR from `status.eni.enis`, in `azure` mode the node's subnet CIDR from
//! `status.azure.interfaces`, when `ipv4-native-routing-cidr` is not set; when it is set, it
//! must contain the VPC CIDR (eni) or coalesce with the subnet CIDR into one range (azure), and
//! the error is Cilium's text. Other modes use the configured CIDR as it is. Pure: the daemon
//! applies the answer (the masquerade exclusions) and reports the errors; it is also what a CNI
//! result's native-routing CIDR is to be read from, so the rule has one home.

use ipnet::{IpNet, Ipv4Net};

use super::{input::NodeInput, mode::IpamMode};

/// A configured native-routing CIDR that does not fit the cloud's network (Cilium's fatal
/// texts; weft keeps the configured CIDR and says so).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NativeRoutingError {
    /// eni: the configured CIDR does not contain the VPC's primary CIDR.
    #[error(
        "Configured native routing CIDR does not contain VPC CIDR (ipv4-native-routing-cidr \
         {configured}, the VPC's primary CIDR {vpc} in status.eni.enis)"
    )]
    VpcNotContained {
        /// `ipv4-native-routing-cidr`.
        configured: Ipv4Net,
        /// The VPC's primary CIDR.
        vpc: IpNet,
    },
    /// azure: the configured CIDR and the subnet CIDR do not make one range.
    #[error(
        "None of the VPC CIDRs contains the specified native routing CIDR \
         (ipv4-native-routing-cidr {configured}, the subnet CIDR {subnet} in \
         status.azure.interfaces)"
    )]
    SubnetNotCoalescing {
        /// `ipv4-native-routing-cidr`.
        configured: Ipv4Net,
        /// The subnet CIDR.
        subnet: IpNet,
    },
}

/// Where the IPv4 native-routing CIDR in force comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeRouting {
    /// None configured and none to detect (yet): no native-routing CIDR.
    None,
    /// `ipv4-native-routing-cidr`.
    Configured(Ipv4Net),
    /// Detected from the CiliumNode's status (the VPC's or the subnet's CIDR).
    Detected(Ipv4Net),
}

impl NativeRouting {
    /// The CIDR, whichever its source.
    #[must_use]
    pub fn cidr(self) -> Option<Ipv4Net> {
        match self {
            Self::None => None,
            Self::Configured(cidr) | Self::Detected(cidr) => Some(cidr),
        }
    }
}

/// The IPv4 native-routing CIDR of a node in `mode` with `configured` as
/// `ipv4-native-routing-cidr`, and the mismatch with the cloud's network, if any (the
/// configured CIDR stays in force then).
#[must_use]
pub fn ipv4(
    mode: IpamMode,
    configured: Option<Ipv4Net>,
    node: &NodeInput,
) -> (NativeRouting, Option<NativeRoutingError>) {
    let cloud = match mode {
        IpamMode::Eni => node.eni_vpc_cidr,
        IpamMode::Azure => node.azure_subnet_cidr,
        _ => None,
    };
    let cloud_v4 = match cloud {
        Some(IpNet::V4(v4)) => Some(v4),
        _ => None,
    };
    match (configured, cloud) {
        (None, _) => (
            cloud_v4.map_or(NativeRouting::None, NativeRouting::Detected),
            None,
        ),
        (Some(configured), None) => (NativeRouting::Configured(configured), None),
        (Some(configured), Some(cidr)) => {
            let error = match mode {
                IpamMode::Eni if !contains(configured, cidr) => {
                    Some(NativeRoutingError::VpcNotContained {
                        configured,
                        vpc: cidr,
                    })
                }
                IpamMode::Azure if !coalesce(configured, cidr) => {
                    Some(NativeRoutingError::SubnetNotCoalescing {
                        configured,
                        subnet: cidr,
                    })
                }
                _ => None,
            };
            (NativeRouting::Configured(configured), error)
        }
    }
}

/// Whether `outer` holds all of `inner` (an IPv6 `inner` never).
fn contains(outer: Ipv4Net, inner: IpNet) -> bool {
    matches!(inner, IpNet::V4(v4) if outer.trunc().contains(&v4.trunc()))
}

/// Whether `a` and `b` coalesce into one range, as Go's `ip.CoalesceCIDRs` of the two: one
/// holds the other, or they are the two halves of one prefix.
fn coalesce(a: Ipv4Net, b: IpNet) -> bool {
    let IpNet::V4(b) = b else {
        return false;
    };
    let (a, b) = (a.trunc(), b.trunc());
    if a.contains(&b) || b.contains(&a) {
        return true;
    }
    a.prefix_len() == b.prefix_len()
        && a.supernet()
            .is_some_and(|parent| b.supernet() == Some(parent))
}

#[cfg(test)]
mod tests;

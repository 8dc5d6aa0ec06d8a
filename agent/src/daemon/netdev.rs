//! The daemon's native devices, IPCache and masquerade exclusions: at start it fills the
//! IPCache's world entries, attaches `to_netdev`/`from_netdev` to the native devices (given by
//! `devices`, else the IPv4 (else IPv6) default-route device) with their first IPv4 and first
//! global IPv6 address as masquerade addresses when `enable-bpf-masquerade` is on (and detaches
//! them when it is off), and applies the exclusions; on every sync it keeps the node's own
//! addresses at `host` identity; when the ip-masq-agent file changes it re-reads it (a bad edit
//! is logged with file and line and the exclusions in force stay).

use std::{collections::BTreeSet, net::IpAddr};

use tracing::{info, warn};

use super::{DaemonError, State, chain};
use crate::{
    config::AgentConfig,
    crd::node::CiliumNode,
    datapath::{Datapath, NetdevConfig, netlink},
    masq::{MasqConfig, Masquerade},
};

/// What the daemon keeps about the node's network.
#[derive(Debug, Default)]
pub(crate) struct NodeNet {
    /// Addresses of the native devices (host identity).
    pub(crate) device_ips: Vec<IpAddr>,
    /// Exclusion management (present when masquerading is on).
    pub(crate) masq: Option<Masquerade>,
    /// The last reload error, so a file that stays broken is reported once.
    pub(crate) masq_error: Option<String>,
}

/// Devices, IPCache world entries and exclusions, as the configuration asks.
pub(super) async fn setup(
    datapath: &mut Datapath,
    config: &AgentConfig,
) -> Result<NodeNet, DaemonError> {
    datapath.ensure_world_ipcache()?;
    if !config.enable_bpf_masquerade {
        for row in datapath.list_netdevs()? {
            if let Some(ifname) = row.ifname {
                info!(device = %ifname, "enable-bpf-masquerade is off: detaching");
                datapath.detach_netdev(&ifname)?;
            }
        }
        return Ok(NodeNet::default());
    }
    let devices = if config.devices.is_empty() {
        let found =
            netlink::default_route_device()
                .await
                .map_err(|source| DaemonError::Device {
                    device: "(default route)".into(),
                    source,
                })?;
        vec![found.ok_or(DaemonError::NoNativeDevice)?]
    } else {
        config.devices.clone()
    };
    let mut device_ips = Vec::new();
    for device in &devices {
        let addrs = netlink::device_addresses(device)
            .await
            .map_err(|source| DaemonError::Device {
                device: device.clone(),
                source,
            })?
            .ok_or_else(|| DaemonError::DeviceMissing {
                device: device.clone(),
            })?;
        let netdev = masq_addresses(config, &addrs);
        datapath.attach_netdev(device, &netdev)?;
        info!(%device, masq_v4 = ?netdev.masq_v4, masq_v6 = ?netdev.masq_v6, "native device: masquerading");
        device_ips.extend(addrs);
    }
    let masq = Masquerade::new(MasqConfig::from_agent(config));
    match masq.reload(datapath) {
        Ok(sync) => info!(
            written = sync.written,
            removed = sync.removed,
            "masquerade exclusions"
        ),
        Err(error) => {
            warn!(error = %chain(&error), "masquerade exclusions not updated; the previous ones stay");
        }
    }
    Ok(NodeNet {
        device_ips,
        masq: Some(masq),
        masq_error: None,
    })
}

/// The masquerade addresses of a native device with global addresses `addrs` (the kernel's
/// order, primary first): its first IPv4 address with IPv4 masquerading on, its first global
/// IPv6 address with IPv6 masquerading on (Cilium's `enable-ipv6-masquerade`, default true
/// when `enable-ipv6` is). Link-local addresses never come here (`device_addresses` keeps
/// global scope only).
pub(super) fn masq_addresses(config: &AgentConfig, addrs: &[IpAddr]) -> NetdevConfig {
    let masq_v4 = addrs.iter().find_map(|ip| match ip {
        IpAddr::V4(v4) if config.enable_ipv4 && config.enable_ipv4_masquerade => Some(*v4),
        _ => None,
    });
    let masq_v6 = addrs.iter().find_map(|ip| match ip {
        IpAddr::V6(v6) if config.enable_ipv6 && config.enable_ipv6_masquerade => Some(*v6),
        _ => None,
    });
    NetdevConfig { masq_v4, masq_v6 }
}

/// The node's own addresses: native devices, router (gateway) addresses, CiliumNode
/// `spec.addresses` (but its `CiliumInternalIP` entries: the router addresses are the real
/// ones, and the CiliumNode may still name an old router until the write-back lands).
pub(super) fn host_ips(state: &State, node: Option<&CiliumNode>) -> Vec<IpAddr> {
    let mut ips: BTreeSet<IpAddr> = state.net.device_ips.iter().copied().collect();
    ips.extend(state.router.iter().copied());
    if let Some(node) = node {
        ips.extend(
            node.spec
                .addresses
                .iter()
                .filter(|a| a.address_type != crate::store::writeback::CILIUM_INTERNAL_IP)
                .filter_map(|a| a.ip.parse::<IpAddr>().ok()),
        );
    }
    ips.into_iter().collect()
}

/// Keep the IPCache's host entries equal to [`host_ips`] (the map is only read and written
/// when they change, or the last write failed).
pub(super) fn sync_host_ips(state: &mut State, node: Option<&CiliumNode>) {
    let ips = host_ips(state, node);
    if state.host_ips.as_ref() == Some(&ips) {
        return;
    }
    match state.datapath.sync_host_ips(&ips) {
        Ok(()) => state.host_ips = Some(ips),
        Err(error) => {
            state.host_ips = None;
            warn!(error = %chain(&error), "updating the node's addresses in the IPCache");
        }
    }
}

/// Re-read the ip-masq-agent file and apply it (errors are logged; the map is unchanged).
pub(super) fn reload_masq(state: &mut State) {
    let Some(masq) = state.net.masq.clone() else {
        return;
    };
    match masq.reload(&mut state.datapath) {
        Ok(sync) => {
            state.net.masq_error = None;
            if sync.written + sync.removed > 0 {
                info!(
                    written = sync.written,
                    removed = sync.removed,
                    "masquerade exclusions updated"
                );
            }
        }
        Err(error) => {
            let text = chain(&error);
            if state.net.masq_error.as_deref() != Some(text.as_str()) {
                warn!(error = %text, "masquerade exclusions not updated; the previous ones stay");
                state.net.masq_error = Some(text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masquerade_addresses_follow_the_family_switches() {
        let addrs: Vec<IpAddr> = ["192.0.2.7", "2001:db8::7", "192.0.2.8", "2001:db8::8"]
            .iter()
            .map(|a| a.parse().expect("ip"))
            .collect();
        let v4: Option<std::net::Ipv4Addr> = Some("192.0.2.7".parse().expect("ip"));
        let v6: Option<std::net::Ipv6Addr> = Some("2001:db8::7".parse().expect("ip"));
        let dual = AgentConfig {
            enable_ipv6: true,
            ..AgentConfig::default()
        };
        let got = masq_addresses(&dual, &addrs);
        assert_eq!((got.masq_v4, got.masq_v6), (v4, v6), "first of each family");
        let got = masq_addresses(&AgentConfig::default(), &addrs);
        assert_eq!((got.masq_v4, got.masq_v6), (v4, None), "IPv6 disabled");
        let no_v6_masq = AgentConfig {
            enable_ipv6_masquerade: false,
            ..dual.clone()
        };
        let got = masq_addresses(&no_v6_masq, &addrs);
        assert_eq!((got.masq_v4, got.masq_v6), (v4, None));
        let v6_only = AgentConfig {
            enable_ipv4_masquerade: false,
            ..dual
        };
        let got = masq_addresses(&v6_only, &addrs);
        assert_eq!((got.masq_v4, got.masq_v6), (None, v6));
        let got = masq_addresses(&v6_only, &addrs[..1]);
        assert_eq!((got.masq_v4, got.masq_v6), (None, None), "no IPv6 address");
    }
}

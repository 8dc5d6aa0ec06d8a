//! Tunnel routing at start: in `routing-mode: tunnel`, the tunnel device is made (or an
//! earlier agent's re-adopted) at the underlay's MTU, `from_overlay` attached to it and the
//! tunnel map pointed at it, and the pods' MTU is the underlay's minus the encapsulation
//! (50 bytes over IPv4, 70 over IPv6, as Cilium). In native routing a device an earlier
//! agent left is detached and deleted. The underlay is the native device (`devices`, else the
//! default route's): IPv4 if it has an IPv4 address, else IPv6.

use std::net::IpAddr;

use tracing::{info, warn};

use super::DaemonError;
use crate::{
    config::{
        AgentConfig, ConfigError,
        reference::TUNNEL_PROTOCOL,
        routing::{GENEVE_REFUSED, RoutingMode, TunnelProtocol},
    },
    datapath::{
        Datapath,
        netlink::{
            self,
            tunnel::{Ensured, Protocol, TunnelDevice, TunnelSpec},
        },
    },
    status::{RoutingStatus, TunnelStatus},
};

/// Encapsulation overhead over an IPv4 underlay: outer IPv4 20 + UDP 8 + VXLAN 8 + inner
/// Ethernet 14 (Cilium's `TunnelOverheadIPv4`).
pub const OVERHEAD_V4: u32 = 50;
/// Over an IPv6 underlay (Cilium's `TunnelOverheadIPv6`).
pub const OVERHEAD_V6: u32 = 70;
/// The MTU assumed when the underlay's cannot be read.
const ETHERNET_MTU: u32 = 1500;

/// The tunnel in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// The device.
    pub device: TunnelDevice,
    /// Its UDP port.
    pub port: u16,
    /// The underlay's MTU (the device's).
    pub underlay_mtu: u32,
    /// The underlay is IPv6 (the node has no IPv4 address on its device).
    pub underlay_v6: bool,
}

impl Tunnel {
    /// The pods' MTU: the underlay's minus the encapsulation.
    #[must_use]
    pub const fn pod_mtu(&self) -> u32 {
        pod_mtu(self.underlay_mtu, self.underlay_v6)
    }
}

impl super::Daemon {
    /// The `routing` part of `weft-agent status`.
    pub(super) fn routing_status(&self) -> RoutingStatus {
        RoutingStatus {
            mode: self.config.routing_mode.to_string(),
            tunnel: self.tunnel.map(|t| TunnelStatus {
                device: t.device.name.to_owned(),
                port: t.port,
                underlay: if t.underlay_v6 { "ipv6" } else { "ipv4" }.to_owned(),
                underlay_mtu: t.underlay_mtu,
                pod_mtu: t.pod_mtu(),
            }),
        }
    }

    /// The MTU of a new pod's interface: the CNI configuration's, at most the tunnel's pod MTU
    /// in tunnel routing (the kernel default when neither says).
    pub(super) fn pod_mtu(&self, configured: Option<u32>) -> Option<u32> {
        match (self.tunnel, configured) {
            (Some(tunnel), Some(mtu)) => Some(mtu.min(tunnel.pod_mtu())),
            (Some(tunnel), None) => Some(tunnel.pod_mtu()),
            (None, mtu) => mtu,
        }
    }
}

/// The pods' MTU over an underlay of MTU `underlay` (IPv6 when `v6`).
#[must_use]
pub const fn pod_mtu(underlay: u32, v6: bool) -> u32 {
    let overhead = if v6 { OVERHEAD_V6 } else { OVERHEAD_V4 };
    if underlay > overhead {
        underlay - overhead
    } else {
        ETHERNET_MTU - overhead
    }
}

/// The datapath's protocol for the configured one; `None` for one weft does not run (the
/// configuration's checks refuse it before this).
const fn protocol(configured: TunnelProtocol) -> Option<Protocol> {
    match configured {
        TunnelProtocol::Vxlan => Some(Protocol::Vxlan),
        TunnelProtocol::Geneve => None,
    }
}

/// Set the tunnel up (tunnel mode) or take an earlier one down (native).
pub(super) async fn setup(
    datapath: &mut Datapath,
    config: &AgentConfig,
) -> Result<Option<Tunnel>, DaemonError> {
    if config.routing_mode != RoutingMode::Tunnel {
        for protocol in Protocol::ALL {
            if datapath.detach_tunnel(protocol.device())? {
                info!(
                    device = protocol.device(),
                    "native routing: tunnel detached"
                );
            }
        }
        for device in netlink::tunnel::remove_all()
            .await
            .map_err(|source| DaemonError::Tunnel { source })?
        {
            info!(device, "native routing: tunnel device deleted");
        }
        return Ok(None);
    }
    let Some(protocol) = protocol(config.tunnel.protocol) else {
        return Err(DaemonError::Config(ConfigError {
            key: TUNNEL_PROTOCOL.name().to_owned(),
            value: config.tunnel.protocol.to_string(),
            expected: GENEVE_REFUSED.to_owned(),
        }));
    };
    let (underlay_mtu, underlay_v6) = underlay(config).await?;
    let port = config.tunnel.udp_port();
    let spec = TunnelSpec {
        protocol,
        port,
        mtu: underlay_mtu,
    };
    let (device, how) = netlink::tunnel::ensure(spec)
        .await
        .map_err(|source| DaemonError::Tunnel { source })?;
    datapath.attach_tunnel(device.name, device.index)?;
    let tunnel = Tunnel {
        device,
        port,
        underlay_mtu,
        underlay_v6,
    };
    info!(
        device = device.name,
        ifindex = device.index,
        port,
        underlay_mtu,
        pod_mtu = tunnel.pod_mtu(),
        underlay = if underlay_v6 { "ipv6" } else { "ipv4" },
        how = ?how,
        "tunnel routing"
    );
    if how == Ensured::Replaced {
        info!(
            device = device.name,
            "the tunnel device had another port or kind: replaced"
        );
    }
    Ok(Some(tunnel))
}

/// The underlay's MTU and family, from the native device; without one (no `devices`, no
/// default route), Ethernet's MTU over IPv4, as Cilium's MTU detection falls back.
async fn underlay(config: &AgentConfig) -> Result<(u32, bool), DaemonError> {
    let found = match config.devices.first() {
        Some(device) => Some(device.clone()),
        None => netlink::default_route_device()
            .await
            .map_err(|source| DaemonError::Device {
                device: "(default route)".into(),
                source,
            })?,
    };
    let Some(device) = found else {
        warn!(
            mtu = ETHERNET_MTU,
            "tunnel routing: no native device (no devices, no default route): assuming an IPv4 \
             underlay of MTU {ETHERNET_MTU}"
        );
        return Ok((ETHERNET_MTU, false));
    };
    let fail = |source| DaemonError::Device {
        device: device.clone(),
        source,
    };
    let mtu = netlink::device::link_mtu(&device)
        .await
        .map_err(fail)?
        .unwrap_or(ETHERNET_MTU);
    let addrs = netlink::device_addresses(&device)
        .await
        .map_err(fail)?
        .unwrap_or_default();
    let v6 = !addrs.iter().any(IpAddr::is_ipv4) && addrs.iter().any(IpAddr::is_ipv6);
    Ok((mtu, v6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_the_underlay_mtu_minus_the_encapsulation() {
        assert_eq!(pod_mtu(1500, false), 1450);
        assert_eq!(pod_mtu(1500, true), 1430);
        assert_eq!(pod_mtu(9001, false), 8951);
        assert_eq!(pod_mtu(0, false), 1450);
    }
}

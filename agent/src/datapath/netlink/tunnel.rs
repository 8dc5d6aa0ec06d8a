//! The tunnel device over rtnetlink: made, re-adopted or replaced at start, deleted by
//! `weft-agent cleanup`, and the kernel routes that send the host's own traffic to other nodes'
//! pods through it (`encap ip id <identity> dst <node> dev <tunnel>`, lightweight tunnels:
//! the kernel sets the tunnel key the eBPF side sets for pods). The protocol is one seam,
//! [`Protocol`]: the generic part names none; a protocol is a file beside this one and one
//! match arm. Must not touch any other link, nor eBPF.

mod vxlan;

use std::net::IpAddr;

use ipnet::IpNet;
use nix::errno::Errno;
use rtnetlink::{
    LinkUnspec, RouteMessageBuilder,
    packet_route::{
        link::LinkMessage,
        route::{
            RouteAttribute, RouteIp6Tunnel, RouteIpTunnel, RouteMessage, RouteMetric, RouteProtocol,
        },
    },
};

use super::{NetlinkError, connect, delete_link, get_link, is_errno, set_link};

/// A tunnel protocol weft runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// VXLAN in collect-metadata (`external`) mode.
    Vxlan,
}

impl Protocol {
    /// Every protocol, so cleanup finds a device of any of them.
    pub const ALL: [Self; 1] = [Self::Vxlan];

    /// The device's name.
    #[must_use]
    pub const fn device(self) -> &'static str {
        match self {
            Self::Vxlan => vxlan::DEVICE,
        }
    }

    fn message(self, port: u16, mtu: u32) -> LinkMessage {
        match self {
            Self::Vxlan => vxlan::message(port, mtu),
        }
    }

    fn matches(self, link: &LinkMessage, port: u16) -> bool {
        match self {
            Self::Vxlan => vxlan::matches(link, port),
        }
    }
}

/// What the tunnel device must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelSpec {
    /// The protocol.
    pub protocol: Protocol,
    /// The UDP port.
    pub port: u16,
    /// The device's MTU (the underlay's: the kernel adds the outer headers).
    pub mtu: u32,
}

/// How [`ensure`] found the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ensured {
    /// There was none: made.
    Created,
    /// One of the right kind and port was there (an earlier agent's): kept.
    Adopted,
    /// One of another kind or port was there: deleted and made anew.
    Replaced,
}

/// The tunnel device as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelDevice {
    /// Its name.
    pub name: &'static str,
    /// Its ifindex.
    pub index: u32,
}

/// Make the tunnel device `spec` asks for, keep one an earlier agent made (its MTU set, up,
/// without ARP), or replace one of another port or kind.
///
/// # Errors
/// The kernel refused (no such link type, the port is taken).
pub async fn ensure(spec: TunnelSpec) -> Result<(TunnelDevice, Ensured), NetlinkError> {
    let handle = connect()?;
    let name = spec.protocol.device();
    let mut how = Ensured::Created;
    if let Some(link) = get_link(&handle, name).await? {
        if spec.protocol.matches(&link, spec.port) {
            let msg = LinkUnspec::new_with_index(link.header.index)
                .mtu(spec.mtu)
                .arp(false)
                .up()
                .build();
            set_link(
                &handle,
                name,
                format!("set mtu {} arp off up", spec.mtu),
                msg,
            )
            .await?;
            let device = TunnelDevice {
                name,
                index: link.header.index,
            };
            return Ok((device, Ensured::Adopted));
        }
        delete_link(&handle, name).await?;
        how = Ensured::Replaced;
    }
    handle
        .link()
        .add(spec.protocol.message(spec.port, spec.mtu))
        .execute()
        .await
        .map_err(|source| NetlinkError::CreateTunnel {
            ifname: name.to_owned(),
            port: spec.port,
            source,
        })?;
    let link = get_link(&handle, name)
        .await?
        .ok_or_else(|| NetlinkError::LinkVanished {
            ifname: name.to_owned(),
        })?;
    Ok((
        TunnelDevice {
            name,
            index: link.header.index,
        },
        how,
    ))
}

/// Delete every tunnel device weft makes; the names of those there were.
///
/// # Errors
/// The kernel refused a deletion.
pub async fn remove_all() -> Result<Vec<&'static str>, NetlinkError> {
    let handle = connect()?;
    let mut removed = Vec::new();
    for protocol in Protocol::ALL {
        if delete_link(&handle, protocol.device()).await? {
            removed.push(protocol.device());
        }
    }
    Ok(removed)
}

/// A route to another node's pods through the tunnel device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelRoute {
    /// The pod CIDR.
    pub dst: IpNet,
    /// The node's address (the outer destination).
    pub endpoint: IpAddr,
    /// The VNI (the source identity the receiver sees).
    pub id: u32,
    /// The tunnel device's ifindex.
    pub oif: u32,
    /// The route's MTU (the pods' MTU: the device's minus the encapsulation).
    pub mtu: u32,
}

impl std::fmt::Display for TunnelRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let family = if self.endpoint.is_ipv4() { "ip" } else { "ip6" };
        write!(
            f,
            "{} encap {family} id {} dst {} dev {} mtu {}",
            self.dst, self.id, self.endpoint, self.oif, self.mtu
        )
    }
}

fn route_message(route: &TunnelRoute) -> Result<RouteMessage, NetlinkError> {
    let dst = route.dst.trunc();
    let builder = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(dst.addr(), dst.prefix_len())
        .map_err(|e| NetlinkError::NodeRouteMessage {
            route: route.to_string(),
            source: Box::new(e),
        })?
        .output_interface(route.oif)
        .protocol(RouteProtocol::Static);
    let builder = match route.endpoint {
        IpAddr::V4(v4) => builder.encap_ip(vec![
            RouteIpTunnel::Id(u64::from(route.id)),
            RouteIpTunnel::Destination(v4),
        ]),
        IpAddr::V6(v6) => builder.encap_ip6(vec![
            RouteIp6Tunnel::Id(u64::from(route.id)),
            RouteIp6Tunnel::Destination(v6),
        ]),
    };
    let mut message = builder.build();
    message
        .attributes
        .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(route.mtu)]));
    Ok(message)
}

/// `ip route replace <route>`.
///
/// # Errors
/// The kernel refused.
pub async fn replace_route(route: &TunnelRoute) -> Result<(), NetlinkError> {
    let handle = connect()?;
    handle
        .route()
        .add(route_message(route)?)
        .replace()
        .execute()
        .await
        .map_err(|source| NetlinkError::NodeRoute {
            route: route.to_string(),
            source,
        })
}

/// `ip route del <route>`; `Ok(false)` if there was no such route.
///
/// # Errors
/// The kernel refused for another reason.
pub async fn delete_route(route: &TunnelRoute) -> Result<bool, NetlinkError> {
    let handle = connect()?;
    match handle.route().del(route_message(route)?).execute().await {
        Ok(()) => Ok(true),
        Err(e)
            if is_errno(&e, Errno::ESRCH)
                || is_errno(&e, Errno::ENOENT)
                || is_errno(&e, Errno::ENODEV) =>
        {
            Ok(false)
        }
        Err(source) => Err(NetlinkError::NodeRoute {
            route: route.to_string(),
            source,
        }),
    }
}

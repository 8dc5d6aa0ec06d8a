//! Read-only queries for the node's own addressing: the global addresses of a device (the
//! masquerade addresses of a native device), the device of the IPv4 (else IPv6) default route
//! (the native device when none is configured, as Cilium's device detection picks it), and every
//! network the node sits on (global addresses with their prefixes, main-table routes), which
//! the start-up checks keep pod CIDRs away from.

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::{
    Handle, RouteMessageBuilder,
    packet_route::{
        address::{AddressAttribute, AddressMessage, AddressScope},
        link::LinkAttribute,
        route::{RouteAddress, RouteAttribute, RouteMessage, RouteType},
    },
};

use super::{NetlinkError, check_ifname, connect, get_link};
use crate::datapath::is_host_ifname;

/// The main routing table.
const RT_TABLE_MAIN: u8 = 254;

/// Global-scope addresses of device `ifname`, in the kernel's order (primary first);
/// `None` if the device does not exist.
///
/// # Errors
/// Fails if netlink does.
pub async fn device_addresses(ifname: &str) -> Result<Option<Vec<IpAddr>>, NetlinkError> {
    check_ifname(ifname)?;
    let handle = connect()?;
    let Some(link) = get_link(&handle, ifname).await? else {
        return Ok(None);
    };
    let messages: Vec<_> = handle
        .address()
        .get()
        .set_link_index_filter(link.header.index)
        .execute()
        .try_collect()
        .await
        .map_err(|source| NetlinkError::GetAddress {
            ifname: ifname.to_owned(),
            source,
        })?;
    let mut out = Vec::new();
    for msg in messages {
        if msg.header.scope != AddressScope::Universe {
            continue;
        }
        if let Some(ip) = own_address(&msg) {
            out.push(ip);
        }
    }
    Ok(Some(out))
}

/// Name of the device the IPv4 default route of the main table leaves through, else the IPv6
/// one's (an IPv6-only node), if any.
///
/// # Errors
/// Fails if netlink does.
pub async fn default_route_device() -> Result<Option<String>, NetlinkError> {
    let handle = connect()?;
    let mut oif =
        default_route_oif(&handle, RouteMessageBuilder::<Ipv4Addr>::new().build()).await?;
    if oif.is_none() {
        oif = default_route_oif(&handle, RouteMessageBuilder::<Ipv6Addr>::new().build()).await?;
    }
    Ok(oif.and_then(|index| {
        nix::net::if_::if_indextoname(index)
            .ok()
            .map(|n| n.to_string_lossy().into_owned())
    }))
}

/// Output ifindex of the main table's default route of the family of `filter`.
async fn default_route_oif(
    handle: &Handle,
    filter: RouteMessage,
) -> Result<Option<u32>, NetlinkError> {
    let routes: Vec<_> = handle
        .route()
        .get(filter)
        .execute()
        .try_collect()
        .await
        .map_err(|source| NetlinkError::GetRoute { source })?;
    Ok(routes
        .iter()
        .filter(|r| r.header.destination_prefix_length == 0 && r.header.table == RT_TABLE_MAIN)
        .find_map(|r| {
            r.attributes.iter().find_map(|a| match a {
                RouteAttribute::Oif(index) => Some(*index),
                _ => None,
            })
        }))
}

/// One network the node sits on, as the kernel lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNetwork {
    /// The network (host bits cleared).
    pub cidr: IpNet,
    /// The device it is on (the interface index when the name cannot be read).
    pub device: String,
    /// The node's address on it when it comes from an address; `None` for a route.
    pub address: Option<IpAddr>,
}

/// Every global-scope address (as its network, e.g. `10.0.3.4/24` → `10.0.3.0/24`) and every
/// unicast route of the main table except default routes, IPv4 and IPv6, on any device but
/// weft's own pod veths (their /32 and /128 routes grow with the pods). Three dumps (links,
/// addresses, routes), however many pods the node runs; names come from the link dump.
///
/// # Errors
/// Fails if netlink does.
pub async fn host_networks() -> Result<Vec<HostNetwork>, NetlinkError> {
    let handle = connect()?;
    let names = link_names(&handle).await?;
    let device = |index: u32| {
        names
            .get(&index)
            .cloned()
            .unwrap_or_else(|| format!("if{index}"))
    };
    let ours = |index: u32| names.get(&index).is_some_and(|n| is_host_ifname(n));
    let messages: Vec<_> = handle
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|source| NetlinkError::GetAddress {
            ifname: "*".to_owned(),
            source,
        })?;
    let mut out = Vec::new();
    for msg in messages {
        if msg.header.scope != AddressScope::Universe || ours(msg.header.index) {
            continue;
        }
        let Some(ip) = own_address(&msg) else {
            continue;
        };
        let Ok(cidr) = IpNet::new(ip, msg.header.prefix_len) else {
            continue;
        };
        out.push(HostNetwork {
            cidr: cidr.trunc(),
            device: device(msg.header.index),
            address: Some(ip),
        });
    }
    for query in [
        RouteMessageBuilder::<Ipv4Addr>::new().build(),
        RouteMessageBuilder::<Ipv6Addr>::new().build(),
    ] {
        for (cidr, oif) in routes(&handle, query).await? {
            if !ours(oif) {
                out.push(HostNetwork {
                    cidr,
                    device: device(oif),
                    address: None,
                });
            }
        }
    }
    Ok(out)
}

/// Every link's name by index, from one dump.
async fn link_names(handle: &Handle) -> Result<HashMap<u32, String>, NetlinkError> {
    let links: Vec<_> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|source| NetlinkError::GetLink {
            ifname: "*".to_owned(),
            source,
        })?;
    Ok(links
        .into_iter()
        .filter_map(|link| {
            let name = link.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(name) => Some(name.clone()),
                _ => None,
            })?;
            Some((link.header.index, name))
        })
        .collect())
}

/// The main table's unicast routes but default routes: (destination, output interface).
async fn routes(handle: &Handle, query: RouteMessage) -> Result<Vec<(IpNet, u32)>, NetlinkError> {
    let messages: Vec<_> = handle
        .route()
        .get(query)
        .execute()
        .try_collect()
        .await
        .map_err(|source| NetlinkError::GetRoute { source })?;
    let mut out = Vec::new();
    for msg in messages {
        let table = msg
            .attributes
            .iter()
            .find_map(|a| match a {
                RouteAttribute::Table(t) => Some(*t),
                _ => None,
            })
            .unwrap_or(u32::from(msg.header.table));
        let prefix = msg.header.destination_prefix_length;
        if table != u32::from(RT_TABLE_MAIN) || msg.header.kind != RouteType::Unicast || prefix == 0
        {
            continue;
        }
        let dst = msg.attributes.iter().find_map(|a| match a {
            RouteAttribute::Destination(RouteAddress::Inet(ip)) => Some(IpAddr::V4(*ip)),
            RouteAttribute::Destination(RouteAddress::Inet6(ip)) => Some(IpAddr::V6(*ip)),
            _ => None,
        });
        let oif = msg.attributes.iter().find_map(|a| match a {
            RouteAttribute::Oif(index) => Some(*index),
            _ => None,
        });
        let (Some(dst), Some(oif)) = (dst, oif) else {
            continue;
        };
        let Ok(cidr) = IpNet::new(dst, prefix) else {
            continue;
        };
        out.push((cidr.trunc(), oif));
    }
    Ok(out)
}

/// The node's own address in an address message: `IFA_LOCAL`, else `IFA_ADDRESS` (they differ
/// on point-to-point links, where the local one is ours).
fn own_address(msg: &AddressMessage) -> Option<IpAddr> {
    let attr = |local: bool| {
        msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Local(ip) if local => Some(*ip),
            AddressAttribute::Address(ip) if !local => Some(*ip),
            _ => None,
        })
    };
    attr(true).or_else(|| attr(false))
}

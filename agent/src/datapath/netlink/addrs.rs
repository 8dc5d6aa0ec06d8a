//! Read-only queries for the node's own addressing: the global addresses of a device (the
//! masquerade addresses of a native device) and the device of the IPv4 default route (the
//! native device when none is configured, as Cilium's device detection picks it).

use std::net::{IpAddr, Ipv4Addr};

use futures::TryStreamExt;
use rtnetlink::{
    RouteMessageBuilder,
    packet_route::{
        address::{AddressAttribute, AddressScope},
        route::RouteAttribute,
    },
};

use super::{NetlinkError, check_ifname, connect, get_link};

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
        let local = msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Local(ip) => Some(*ip),
            _ => None,
        });
        let address = msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        });
        if let Some(ip) = local.or(address) {
            out.push(ip);
        }
    }
    Ok(Some(out))
}

/// Name of the device the IPv4 default route of the main table leaves through, if any.
///
/// # Errors
/// Fails if netlink does.
pub async fn default_route_device() -> Result<Option<String>, NetlinkError> {
    let handle = connect()?;
    let routes: Vec<_> = handle
        .route()
        .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
        .execute()
        .try_collect()
        .await
        .map_err(|source| NetlinkError::GetRoute { source })?;
    let oif = routes
        .iter()
        .filter(|r| r.header.destination_prefix_length == 0 && r.header.table == RT_TABLE_MAIN)
        .find_map(|r| {
            r.attributes.iter().find_map(|a| match a {
                RouteAttribute::Oif(index) => Some(*index),
                _ => None,
            })
        });
    Ok(oif.and_then(|index| {
        nix::net::if_::if_indextoname(index)
            .ok()
            .map(|n| n.to_string_lossy().into_owned())
    }))
}

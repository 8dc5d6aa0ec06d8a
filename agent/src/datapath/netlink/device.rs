//! The netlink steps of configuring a cloud interface (Cilium's ENI device configurator, spec
//! §6.1): find a link by its MAC, set its MTU and bring it up, add the interface's primary
//! address and delete the main-table subnet route the kernel made for it; and undo the address
//! (`weft-agent cleanup`). Must not touch links other than the one named, nor any rule.

use std::net::IpAddr;

use futures::TryStreamExt;
use ipnet::IpNet;
use nix::errno::Errno;
use rtnetlink::{
    LinkUnspec, RouteMessageBuilder,
    packet_route::{
        link::{LinkAttribute, LinkMessage},
        route::{RouteProtocol, RouteScope},
    },
};

use super::{NetlinkError, connect, is_errno, set_link};

/// A link found by its MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundLink {
    /// Ifindex.
    pub index: u32,
    /// Name.
    pub name: String,
    /// Current MTU.
    pub mtu: u32,
}

fn found(link: &LinkMessage) -> (Option<[u8; 6]>, FoundLink) {
    let mut mac = None;
    let mut out = FoundLink {
        index: link.header.index,
        name: String::new(),
        mtu: 0,
    };
    for attr in &link.attributes {
        match attr {
            LinkAttribute::Address(a) => mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
            LinkAttribute::IfName(n) => out.name.clone_from(n),
            LinkAttribute::Mtu(m) => out.mtu = *m,
            _ => {}
        }
    }
    (mac, out)
}

/// The link whose MAC is `mac` (one that is not enslaved, as Cilium's lookup), if any.
///
/// # Errors
/// Listing the links failed.
pub async fn find_by_mac(mac: [u8; 6]) -> Result<Option<FoundLink>, NetlinkError> {
    let handle = connect()?;
    let links: Vec<LinkMessage> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(NetlinkError::ListLinks)?;
    Ok(links
        .iter()
        .filter(|l| {
            !l.attributes
                .iter()
                .any(|a| matches!(a, LinkAttribute::Controller(_)))
        })
        .map(found)
        .find_map(|(m, link)| (m == Some(mac)).then_some(link)))
}

/// The MTU of link `name`, if it exists.
///
/// # Errors
/// Looking it up failed.
pub async fn link_mtu(name: &str) -> Result<Option<u32>, NetlinkError> {
    let handle = connect()?;
    Ok(super::get_link(&handle, name)
        .await?
        .map(|l| found(&l).1.mtu))
}

/// `ip link set <link> [mtu M] up`.
///
/// # Errors
/// The kernel refused.
pub async fn set_up(link: &FoundLink, mtu: Option<u32>) -> Result<(), NetlinkError> {
    let handle = connect()?;
    let mut msg = LinkUnspec::new_with_index(link.index).up();
    let mut change = "set up".to_owned();
    if let Some(mtu) = mtu {
        msg = msg.mtu(mtu);
        change = format!("set mtu {mtu} up");
    }
    set_link(&handle, &link.name, change, msg.build()).await
}

/// `ip addr add <net> dev <link>`; an address already there is kept. Whether it was added.
///
/// # Errors
/// The kernel refused.
pub async fn add_address(link: &FoundLink, net: IpNet) -> Result<bool, NetlinkError> {
    let handle = connect()?;
    match handle
        .address()
        .add(link.index, net.addr(), net.prefix_len())
        .execute()
        .await
    {
        Ok(()) => Ok(true),
        Err(e) if is_errno(&e, Errno::EEXIST) => Ok(false),
        Err(source) => Err(NetlinkError::DeviceAddress {
            ifname: link.name.clone(),
            addr: net,
            source,
        }),
    }
}

/// `ip addr del <net> dev <ifindex>`; gone already (or the link is): `Ok(false)`.
///
/// # Errors
/// The kernel refused for another reason.
pub async fn remove_address(index: u32, ifname: &str, net: IpNet) -> Result<bool, NetlinkError> {
    let handle = connect()?;
    let mut msg = rtnetlink::packet_route::address::AddressMessage::default();
    msg.header.family = if net.addr().is_ipv4() {
        rtnetlink::packet_route::AddressFamily::Inet
    } else {
        rtnetlink::packet_route::AddressFamily::Inet6
    };
    msg.header.prefix_len = net.prefix_len();
    msg.header.index = index;
    msg.attributes
        .push(rtnetlink::packet_route::address::AddressAttribute::Local(
            net.addr(),
        ));
    msg.attributes
        .push(rtnetlink::packet_route::address::AddressAttribute::Address(
            net.addr(),
        ));
    match handle.address().del(msg).execute().await {
        Ok(()) => Ok(true),
        Err(e)
            if is_errno(&e, Errno::EADDRNOTAVAIL)
                || is_errno(&e, Errno::ENODEV)
                || is_errno(&e, Errno::ESRCH) =>
        {
            Ok(false)
        }
        Err(source) => Err(NetlinkError::DeviceAddress {
            ifname: ifname.to_owned(),
            addr: net,
            source,
        }),
    }
}

/// `ip route del <subnet> dev <link> scope link src <src>` in the main table (what the kernel
/// adds with the address); absent: `Ok(false)`.
///
/// # Errors
/// The kernel refused for another reason.
pub async fn delete_subnet_route(
    link: &FoundLink,
    subnet: IpNet,
    src: IpAddr,
) -> Result<bool, NetlinkError> {
    let handle = connect()?;
    let subnet = subnet.trunc();
    let route = RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(subnet.addr(), subnet.prefix_len())
        .and_then(|b| b.pref_source(src))
        .map_err(|e| NetlinkError::NodeRouteMessage {
            route: format!("{subnet} src {src}"),
            source: Box::new(e),
        })?
        .output_interface(link.index)
        .scope(RouteScope::Link)
        .protocol(RouteProtocol::Kernel)
        .build();
    match handle.route().del(route).execute().await {
        Ok(()) => Ok(true),
        Err(e) if is_errno(&e, Errno::ESRCH) || is_errno(&e, Errno::ENOENT) => Ok(false),
        Err(source) => Err(NetlinkError::CloudRoute {
            route: format!("{subnet} dev {} src {src}", link.name),
            source,
        }),
    }
}

//! The host side of a pod's network plumbing over rtnetlink: the veth pair
//! (created with one RTM_NEWLINK, its peer born inside the pod's netns under
//! its final name), the pod's addresses and routes inside its netns, and the
//! node's /32 and /128 routes towards the pod.
//!
//! Everything runs in the network namespace of the calling thread (the node
//! netns) plus, for the pod side, a second netlink socket opened while the
//! thread briefly sits in the pod netns. This module must not touch eBPF
//! programs or maps, sysctls, or any link it did not create; a failed
//! [`create_pod_iface`] leaves nothing behind.
//!
//! All functions must be polled inside a tokio runtime: each call opens its
//! own netlink socket(s) and spawns their driver tasks, which end with the call.

use std::{
    fmt,
    fs::File,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
};

use futures::TryStreamExt;
use nix::errno::Errno;
use rtnetlink::{
    Handle, LinkUnspec, LinkVeth, RouteMessageBuilder,
    packet_route::{
        address::{AddressAttribute, AddressFlags},
        link::{InfoData, InfoVeth, LinkAttribute, LinkMessage},
        neighbour::NeighbourState,
        route::{RouteMessage, RouteScope},
    },
};

pub use self::{
    addrs::{HostNetwork, default_route_device, device_addresses, host_networks},
    error::NetlinkError,
    node_routes::{delete_node_route, replace_node_route},
};
use super::netns;

mod addrs;
pub mod cloud;
pub mod device;
mod error;
mod node_routes;
pub mod tunnel;

/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
const MAX_IFNAME_LEN: usize = 15;

/// What [`create_pod_iface`] should build for one pod.
#[derive(Debug, Clone, Copy)]
pub struct PodIfaceSpec<'a> {
    /// The pod's netns file (`/proc/<pid>/ns/net` or `/var/run/netns/<name>`).
    pub netns: &'a Path,
    /// Host-side veth name, at most 15 bytes (e.g. `wft1a2b3c4d5e6f`).
    pub host_ifname: &'a str,
    /// Pod-side interface name (e.g. `eth0`).
    pub pod_ifname: &'a str,
    /// Pod addresses, installed as /32 (IPv4) and /128 (IPv6).
    pub addrs: &'a [IpAddr],
    /// IPv4 default gateway inside the pod, reached as an on-link /32.
    pub gateway_v4: Option<Ipv4Addr>,
    /// IPv6 default gateway inside the pod, reached as an on-link /128.
    pub gateway_v6: Option<Ipv6Addr>,
    /// MTU of both veth ends; the kernel default when `None`.
    pub mtu: Option<u32>,
}

/// Indexes and MACs of both ends of a pod's veth pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodIface {
    /// Ifindex of the host end, in the node netns.
    pub host_ifindex: u32,
    /// MAC of the host end.
    pub host_mac: [u8; 6],
    /// Ifindex of the pod end, in the pod netns.
    pub pod_ifindex: u32,
    /// MAC of the pod end.
    pub pod_mac: [u8; 6],
}

/// Creates and configures the veth pair of a pod; see the module docs.
///
/// On error nothing is left behind: the host veth (and with it the peer) is
/// deleted again. If the future is dropped midway, [`delete_pod_iface`]
/// removes whatever was created.
///
/// # Errors
/// [`NetlinkError::AlreadyExists`] if `host_ifname` exists, a
/// [`NetlinkError::NetNs`] if the pod netns is gone, or the netlink step that
/// failed.
pub async fn create_pod_iface(spec: &PodIfaceSpec<'_>) -> Result<PodIface, NetlinkError> {
    check_ifname(spec.host_ifname)?;
    check_ifname(spec.pod_ifname)?;
    let node = connect()?;
    let pod_ns = netns::open_netns(spec.netns)?;
    let pod = connect_in(spec.netns)?;
    // One RTM_NEWLINK, the host end up: the peer is born inside the pod's namespace with its
    // final name, as the bridge plugin makes it. Moving a link between namespaces afterwards
    // costs a synchronize_net() and an rcu_barrier() under RTNL (14-20 ms an ADD, measured).
    let created = node.link().add(veth_message(spec, &pod_ns)).execute().await;
    if let Err(source) = created {
        // No probe before: a name that exists is the rare case (an interrupted ADD left it).
        if is_errno(&source, Errno::EEXIST) && get_link(&node, spec.host_ifname).await?.is_some() {
            return Err(NetlinkError::AlreadyExists {
                ifname: spec.host_ifname.to_owned(),
            });
        }
        return Err(NetlinkError::CreateVeth {
            host_ifname: spec.host_ifname.to_owned(),
            peer_ifname: spec.pod_ifname.to_owned(),
            source,
        });
    }
    match configure(&node, &pod, spec).await {
        Ok(iface) => Ok(iface),
        Err(err) => {
            // The one cleanup point: deleting the host end destroys the peer too,
            // wherever it is by now.
            if let Err(cleanup) = delete_link(&node, spec.host_ifname).await {
                let cause = std::error::Error::source(&cleanup).map(ToString::to_string);
                tracing::error!(
                    cause = cause.unwrap_or_default(),
                    "{cleanup} (cleaning up after: {err})"
                );
            }
            Err(err)
        }
    }
}

/// How many veth deletions [`delete_pod_iface`] runs at once.
pub const DELETING_AT_ONCE: usize = 4;

/// The turns of [`delete_pod_iface`].
static DELETING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(DELETING_AT_ONCE);

/// Deletes a pod's host veth (its peer and routes go with it), in the calling thread's netns.
///
/// The kernel deletes the pair inside the request's send, holding RTNL and waiting for an RCU
/// grace period: tens of milliseconds while other veths go too, during which the sending
/// thread is blocked. So the request is sent from a blocking thread (with a runtime of its own,
/// its socket opened in the caller's namespace), and the async workers meanwhile go on
/// answering CNI requests. The kernel deletes one pair at a time anyway, so at most
/// [`DELETING_AT_ONCE`] such threads run; a node's drain does not start a thread per pod.
///
/// # Errors
/// Fails if netlink does; returns `Ok(false)` if there was no such link.
pub async fn delete_pod_iface(host_ifname: &str) -> Result<bool, NetlinkError> {
    check_ifname(host_ifname)?;
    // The semaphore is never closed, so acquiring cannot fail.
    let _turn = DELETING.acquire().await.ok();
    let netns = netns::open_netns(Path::new(netns::THREAD_SELF_NETNS))?;
    let ifname = host_ifname.to_owned();
    let deleted = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|source| NetlinkError::OffWorker {
                ifname: ifname.clone(),
                source,
            })?;
        let path = PathBuf::from(format!("/proc/self/fd/{}", netns.as_raw_fd()));
        runtime.block_on(async { delete_link(&connect_in(&path)?, &ifname).await })
    })
    .await;
    deleted.map_err(|e| NetlinkError::OffWorker {
        ifname: host_ifname.to_owned(),
        source: std::io::Error::other(e),
    })?
}

/// The ifindex of link `name` in the calling thread's netns, if it exists.
///
/// # Errors
/// Fails if netlink does (but not when the link is absent).
pub async fn link_index(name: &str) -> Result<Option<u32>, NetlinkError> {
    check_ifname(name)?;
    Ok(get_link(&connect()?, name)
        .await?
        .map(|link| link.header.index))
}

/// The ifindex and MAC address of link `name` in the calling thread's netns, if it exists.
///
/// # Errors
/// Fails if netlink does (but not when the link is absent).
pub async fn link_index_and_mac(name: &str) -> Result<Option<(u32, [u8; 6])>, NetlinkError> {
    check_ifname(name)?;
    get_link(&connect()?, name)
        .await?
        .map(|link| index_and_mac(&link, name))
        .transpose()
}

/// The rest of [`create_pod_iface`], after the veth pair exists (the host end up, its peer
/// in the pod). The pod side and the host side are independent: their requests go out together
/// (each socket carries several in flight), and only what needs an earlier answer waits.
async fn configure(
    node: &Handle,
    pod: &Handle,
    spec: &PodIfaceSpec<'_>,
) -> Result<PodIface, NetlinkError> {
    crate::faults::hit_async(crate::faults::Point::Veth).await?;
    let (pod_side, host_side) =
        futures::join!(configure_pod(pod, spec), configure_host(node, spec));
    let (pod_ifindex, pod_mac) = pod_side?;
    let (host_ifindex, host_mac) = host_side?;
    // The node reaches its pods through the stack too (traffic from other nodes, replies of
    // Services): a permanent neighbour entry per pod address spares it the first resolution,
    // which for IPv6 waits until the host veth's link-local address has passed DAD (~1-2 s).
    futures::future::try_join_all(
        spec.addrs
            .iter()
            .map(|&addr| add_neighbour(node, spec.host_ifname, host_ifindex, addr, pod_mac)),
    )
    .await?;
    Ok(PodIface {
        host_ifindex,
        host_mac,
        pod_ifindex,
        pod_mac,
    })
}

/// Inside the pod: `lo` and the interface up, the addresses, the on-link route to each gateway and the default
/// route through it. The pod interface's index and MAC.
async fn configure_pod<'a>(
    pod: &Handle,
    spec: &PodIfaceSpec<'a>,
) -> Result<(u32, [u8; 6]), NetlinkError> {
    let pod_link = require_link(pod, spec.pod_ifname).await?;
    let (index, mac) = index_and_mac(&pod_link, spec.pod_ifname)?;
    let up = |name: &'a str| {
        let msg = LinkUnspec::new_with_name(name).up().build();
        set_link(pod, name, "set up".to_owned(), msg)
    };
    let addresses = futures::future::try_join_all(
        spec.addrs
            .iter()
            .map(|&addr| add_address(pod, spec.pod_ifname, index, addr)),
    );
    futures::try_join!(up("lo"), up(spec.pod_ifname), addresses)?;
    let gateways = spec.gateway_v4.map(IpAddr::V4).into_iter();
    let gateways: Vec<IpAddr> = gateways.chain(spec.gateway_v6.map(IpAddr::V6)).collect();
    futures::future::try_join_all(
        gateways
            .iter()
            .map(|&gw| add_route(pod, spec.pod_ifname, index, Route::OnLink(gw))),
    )
    .await?;
    futures::future::try_join_all(
        gateways
            .iter()
            .map(|&gw| add_route(pod, spec.pod_ifname, index, Route::DefaultVia(gw))),
    )
    .await?;
    Ok((index, mac))
}

/// On the node: the route to each pod address through the host veth. Its index and MAC.
async fn configure_host(
    node: &Handle,
    spec: &PodIfaceSpec<'_>,
) -> Result<(u32, [u8; 6]), NetlinkError> {
    let host_link = require_link(node, spec.host_ifname).await?;
    let (index, mac) = index_and_mac(&host_link, spec.host_ifname)?;
    futures::future::try_join_all(
        spec.addrs
            .iter()
            .map(|&addr| add_route(node, spec.host_ifname, index, Route::OnLink(addr))),
    )
    .await?;
    Ok((index, mac))
}

/// Opens an rtnetlink socket in the calling thread's netns and spawns its driver.
fn connect() -> Result<Handle, NetlinkError> {
    let (conn, handle, _) =
        rtnetlink::new_connection().map_err(|source| NetlinkError::Connect {
            netns: PathBuf::from("/proc/thread-self/ns/net"),
            source,
        })?;
    tokio::spawn(conn);
    Ok(handle)
}

/// Opens an rtnetlink socket bound to the netns at `path`.
///
/// Only the (synchronous) socket creation runs inside the namespace; the
/// socket stays bound to it, so the driver task can run on any worker.
fn connect_in(path: &Path) -> Result<Handle, NetlinkError> {
    let connection = netns::in_netns(path, rtnetlink::new_connection)?;
    let (conn, handle, _) = connection.map_err(|source| NetlinkError::Connect {
        netns: path.to_path_buf(),
        source,
    })?;
    tokio::spawn(conn);
    Ok(handle)
}

/// Rejects names the kernel's `dev_valid_name` would refuse.
fn check_ifname(ifname: &str) -> Result<(), NetlinkError> {
    let bad_char = |c: char| c == '/' || c == ':' || c.is_whitespace();
    if ifname.is_empty()
        || ifname.len() > MAX_IFNAME_LEN
        || ifname == "."
        || ifname == ".."
        || ifname.contains(bad_char)
    {
        return Err(NetlinkError::InvalidIfname {
            ifname: ifname.to_owned(),
        });
    }
    Ok(())
}

/// `ip link add <host> [mtu M] up type veth peer name <pod ifname> netns <pod netns> [mtu M]`.
fn veth_message(spec: &PodIfaceSpec<'_>, pod_ns: &File) -> LinkMessage {
    let mut host = LinkVeth::new(spec.host_ifname, spec.pod_ifname).up();
    // The peer cannot come up in the same message: it has no peer yet when the kernel
    // configures it (ENOTCONN).
    let mut peer = LinkUnspec::new_with_name(spec.pod_ifname).setns_by_fd(pod_ns.as_raw_fd());
    if let Some(mtu) = spec.mtu {
        host = host.mtu(mtu);
        peer = peer.mtu(mtu);
    }
    host.set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
        .build()
}

/// Whether `err` is the kernel answering `-errno`.
fn is_errno(err: &rtnetlink::Error, errno: Errno) -> bool {
    matches!(err, rtnetlink::Error::NetlinkError(msg) if msg.raw_code() == -(errno as i32))
}

/// Looks a link up by name; `None` if the kernel says there is no such device.
async fn get_link(handle: &Handle, ifname: &str) -> Result<Option<LinkMessage>, NetlinkError> {
    let mut links = handle.link().get().match_name(ifname).execute();
    match links.try_next().await {
        Ok(link) => Ok(link),
        Err(err) if is_errno(&err, Errno::ENODEV) => Ok(None),
        Err(source) => Err(NetlinkError::GetLink {
            ifname: ifname.to_owned(),
            source,
        }),
    }
}

/// Looks up a link that must exist because this module just made it.
async fn require_link(handle: &Handle, ifname: &str) -> Result<LinkMessage, NetlinkError> {
    get_link(handle, ifname)
        .await?
        .ok_or_else(|| NetlinkError::LinkVanished {
            ifname: ifname.to_owned(),
        })
}

/// The ifindex and MAC of a link message.
fn index_and_mac(link: &LinkMessage, ifname: &str) -> Result<(u32, [u8; 6]), NetlinkError> {
    let addr = link
        .attributes
        .iter()
        .find_map(|attr| match attr {
            LinkAttribute::Address(addr) => Some(addr.as_slice()),
            _ => None,
        })
        .unwrap_or_default();
    let mac = addr.try_into().map_err(|_| NetlinkError::UnexpectedMac {
        ifname: ifname.to_owned(),
        len: addr.len(),
    })?;
    Ok((link.header.index, mac))
}

/// `ip link set <ifname> ...` (`RTM_NEWLINK` on an existing link).
async fn set_link(
    handle: &Handle,
    ifname: &str,
    change: String,
    msg: LinkMessage,
) -> Result<(), NetlinkError> {
    let result = handle.link().change(msg).execute().await;
    result.map_err(|source| NetlinkError::SetLink {
        ifname: ifname.to_owned(),
        change,
        source,
    })
}

/// `ip addr add <addr>/32` (or `/128 nodad`) `dev <ifname>`.
async fn add_address(
    handle: &Handle,
    ifname: &str,
    index: u32,
    addr: IpAddr,
) -> Result<(), NetlinkError> {
    let prefix_len = if addr.is_ipv4() { 32 } else { 128 };
    let mut req = handle.address().add(index, addr, prefix_len);
    if addr.is_ipv6() {
        // Skip duplicate address detection so the address is usable at once.
        req.message_mut()
            .attributes
            .push(AddressAttribute::Flags(AddressFlags::Nodad));
    }
    req.execute()
        .await
        .map_err(|source| NetlinkError::AddAddress {
            ifname: ifname.to_owned(),
            addr,
            source,
        })
}

/// A route this module installs, always through one interface.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// `<addr>/32` (or `/128`) `scope link`: the address is on this link.
    OnLink(IpAddr),
    /// `default via <gw>`.
    DefaultVia(IpAddr),
}

impl Route {
    /// The netlink message for this route out of interface `oif`.
    fn message(self, oif: u32) -> RouteMessage {
        match self {
            Self::OnLink(IpAddr::V4(dst)) => RouteMessageBuilder::<Ipv4Addr>::new()
                .destination_prefix(dst, 32)
                .scope(RouteScope::Link)
                .output_interface(oif)
                .build(),
            Self::OnLink(IpAddr::V6(dst)) => RouteMessageBuilder::<Ipv6Addr>::new()
                .destination_prefix(dst, 128)
                .scope(RouteScope::Link)
                .output_interface(oif)
                .build(),
            Self::DefaultVia(IpAddr::V4(gw)) => RouteMessageBuilder::<Ipv4Addr>::new()
                .gateway(gw)
                .output_interface(oif)
                .build(),
            Self::DefaultVia(IpAddr::V6(gw)) => RouteMessageBuilder::<Ipv6Addr>::new()
                .gateway(gw)
                .output_interface(oif)
                .build(),
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OnLink(dst @ IpAddr::V4(_)) => write!(f, "{dst}/32 scope link"),
            Self::OnLink(dst @ IpAddr::V6(_)) => write!(f, "{dst}/128 scope link"),
            Self::DefaultVia(gw) => write!(f, "default via {gw}"),
        }
    }
}

/// `ip route add <route> dev <ifname>`.
async fn add_route(
    handle: &Handle,
    ifname: &str,
    oif: u32,
    route: Route,
) -> Result<(), NetlinkError> {
    handle
        .route()
        .add(route.message(oif))
        .execute()
        .await
        .map_err(|source| NetlinkError::AddRoute {
            ifname: ifname.to_owned(),
            route: route.to_string(),
            source,
        })
}

/// `ip neigh add <addr> lladdr <mac> dev <ifname> nud permanent`.
async fn add_neighbour(
    handle: &Handle,
    ifname: &str,
    index: u32,
    addr: IpAddr,
    mac: [u8; 6],
) -> Result<(), NetlinkError> {
    handle
        .neighbours()
        .add(index, addr)
        .link_layer_address(&mac)
        .state(NeighbourState::Permanent)
        .execute()
        .await
        .map_err(|source| NetlinkError::AddNeighbour {
            ifname: ifname.to_owned(),
            addr,
            source,
        })
}

/// `ip link del <ifname>`; `Ok(false)` if it did not exist.
async fn delete_link(handle: &Handle, ifname: &str) -> Result<bool, NetlinkError> {
    let msg = LinkUnspec::new_with_name(ifname).build();
    match handle.link().del_with_message(msg).execute().await {
        Ok(()) => Ok(true),
        Err(err) if is_errno(&err, Errno::ENODEV) => Ok(false),
        Err(source) => Err(NetlinkError::DeleteLink {
            ifname: ifname.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests;

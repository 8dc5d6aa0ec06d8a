//! The host side of a pod's network plumbing over rtnetlink: the veth pair,
//! the pod's addresses and routes inside its netns, and the node's /32 and
//! /128 routes towards the pod.
//!
//! Everything runs in the network namespace of the calling thread (the node
//! netns) plus, for the pod side, a second netlink socket opened while the
//! thread briefly sits in the pod netns. This module must not touch eBPF
//! programs or maps, sysctls, or any link it did not create; a failed
//! [`create_pod_iface`] leaves nothing behind.

use std::{
    fmt,
    fs::File,
    hash::{BuildHasher, RandomState},
    io,
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
        route::{RouteMessage, RouteScope},
    },
};

use super::netns::{self, NetNsError};

/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
const MAX_IFNAME_LEN: usize = 15;

/// Errors from setting up or tearing down a pod's interfaces.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// An interface name the kernel would reject.
    #[error(
        "interface name {ifname:?} is invalid: it must be 1-15 bytes without '/', ':' or whitespace"
    )]
    InvalidIfname { ifname: String },
    /// A link with the host-side name already exists in the node netns.
    #[error(
        "link {ifname} already exists on the node: a previous pod was not cleaned up, or two pods map to the same name"
    )]
    AlreadyExists { ifname: String },
    /// The pod's network namespace could not be opened or entered.
    #[error(transparent)]
    NetNs {
        #[from]
        source: NetNsError,
    },
    /// Opening an rtnetlink socket failed.
    #[error("cannot open an rtnetlink socket in network namespace {}: is this running inside a tokio runtime?", netns.display())]
    Connect {
        netns: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Looking a link up failed for a reason other than "no such device".
    #[error("cannot look up link {ifname}")]
    GetLink {
        ifname: String,
        #[source]
        source: rtnetlink::Error,
    },
    /// A link this module just created or moved is not where it should be.
    #[error(
        "link {ifname} vanished while it was being configured: something else deleted it concurrently"
    )]
    LinkVanished { ifname: String },
    /// The link's hardware address is not a 6-byte MAC.
    #[error("link {ifname} has a {len}-byte hardware address, expected a 6-byte MAC")]
    UnexpectedMac { ifname: String, len: usize },
    /// Creating the veth pair failed.
    #[error(
        "cannot create veth pair {host_ifname} <-> {peer_ifname}: does a link with either name exist, is the veth module available, is the MTU valid?"
    )]
    CreateVeth {
        host_ifname: String,
        peer_ifname: String,
        #[source]
        source: rtnetlink::Error,
    },
    /// Changing a link (moving, renaming, bringing it up) failed.
    #[error(
        "cannot {change} for link {ifname}: does the target namespace or name already hold such a link?"
    )]
    SetLink {
        ifname: String,
        change: String,
        #[source]
        source: rtnetlink::Error,
    },
    /// Adding a pod address failed.
    #[error("cannot add address {addr} to {ifname}: is it listed twice or already configured?")]
    AddAddress {
        ifname: String,
        addr: IpAddr,
        #[source]
        source: rtnetlink::Error,
    },
    /// Adding a route failed.
    #[error(
        "cannot add route {route} dev {ifname}: does it already exist, or is the gateway unreachable?"
    )]
    AddRoute {
        ifname: String,
        route: String,
        #[source]
        source: rtnetlink::Error,
    },
    /// Deleting a link failed.
    #[error("cannot delete link {ifname}")]
    DeleteLink {
        ifname: String,
        #[source]
        source: rtnetlink::Error,
    },
}

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
/// Must be called inside a tokio runtime. On error nothing is left behind:
/// the host veth (and with it the peer) is deleted again. If the future is
/// dropped midway, [`delete_pod_iface`] removes whatever was created.
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
    if get_link(&node, spec.host_ifname).await?.is_some() {
        return Err(NetlinkError::AlreadyExists {
            ifname: spec.host_ifname.to_owned(),
        });
    }
    let peer = temp_peer_name(spec.host_ifname);
    node.link()
        .add(veth_message(spec.host_ifname, &peer, spec.mtu))
        .execute()
        .await
        .map_err(|source| NetlinkError::CreateVeth {
            host_ifname: spec.host_ifname.to_owned(),
            peer_ifname: peer.clone(),
            source,
        })?;
    match configure(&node, &pod, &pod_ns, spec, &peer).await {
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

/// Deletes a pod's host veth (its peer and routes go with it).
///
/// # Errors
/// Fails if netlink does; returns `Ok(false)` if there was no such link.
pub async fn delete_pod_iface(host_ifname: &str) -> Result<bool, NetlinkError> {
    check_ifname(host_ifname)?;
    delete_link(&connect()?, host_ifname).await
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

/// Steps 3-5 of [`create_pod_iface`], after the veth pair exists.
async fn configure(
    node: &Handle,
    pod: &Handle,
    pod_ns: &File,
    spec: &PodIfaceSpec<'_>,
    peer: &str,
) -> Result<PodIface, NetlinkError> {
    let peer_index = require_link(node, peer).await?.header.index;
    let move_msg = LinkUnspec::new_with_index(peer_index).setns_by_fd(pod_ns.as_raw_fd());
    let change = format!("move into network namespace {}", spec.netns.display());
    set_link(node, peer, change, move_msg.build()).await?;

    // Inside the pod netns; the ifindex may change when a link moves.
    let pod_index = require_link(pod, peer).await?.header.index;
    let rename = LinkUnspec::new_with_index(pod_index).name(spec.pod_ifname);
    let change = format!("rename to {}", spec.pod_ifname);
    set_link(pod, peer, change, rename.build()).await?;
    let lo_index = require_link(pod, "lo").await?.header.index;
    set_up(pod, "lo", lo_index).await?;
    set_up(pod, spec.pod_ifname, pod_index).await?;
    for &addr in spec.addrs {
        add_address(pod, spec.pod_ifname, pod_index, addr).await?;
    }
    let gateways = spec.gateway_v4.map(IpAddr::V4).into_iter();
    for gw in gateways.chain(spec.gateway_v6.map(IpAddr::V6)) {
        add_route(pod, spec.pod_ifname, pod_index, Route::OnLink(gw)).await?;
        add_route(pod, spec.pod_ifname, pod_index, Route::DefaultVia(gw)).await?;
    }
    let pod_link = require_link(pod, spec.pod_ifname).await?;
    let (pod_ifindex, pod_mac) = index_and_mac(&pod_link, spec.pod_ifname)?;

    let host_link = require_link(node, spec.host_ifname).await?;
    let (host_ifindex, host_mac) = index_and_mac(&host_link, spec.host_ifname)?;
    set_up(node, spec.host_ifname, host_ifindex).await?;
    for &addr in spec.addrs {
        add_route(node, spec.host_ifname, host_ifindex, Route::OnLink(addr)).await?;
    }
    Ok(PodIface {
        host_ifindex,
        host_mac,
        pod_ifindex,
        pod_mac,
    })
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

/// A random peer name ("tmp" + 8 hex digits) used until the peer is renamed in the pod.
fn temp_peer_name(host_ifname: &str) -> String {
    let hash = RandomState::new().hash_one(host_ifname);
    format!("tmp{:08x}", hash & 0xffff_ffff)
}

/// `ip link add <host> [mtu M] type veth peer name <peer> [mtu M]`.
fn veth_message(host_ifname: &str, peer: &str, mtu: Option<u32>) -> LinkMessage {
    let mut host = LinkVeth::new(host_ifname, peer);
    let mut peer = LinkUnspec::new_with_name(peer);
    if let Some(mtu) = mtu {
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

/// `ip link set <ifname> up`.
async fn set_up(handle: &Handle, ifname: &str, index: u32) -> Result<(), NetlinkError> {
    let msg = LinkUnspec::new_with_index(index).up().build();
    set_link(handle, ifname, "set up".to_owned(), msg).await
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
mod tests {
    use std::{
        process::Command,
        sync::atomic::{AtomicU32, Ordering},
    };

    use nix::sched::CloneFlags;
    use serde_json::Value;

    use super::*;

    /// Runs `test` on a fresh thread whose netns is private (the "node"), on
    /// a current-thread runtime, so tests never touch the root netns.
    fn on_private_node<F: Future<Output = ()>>(test: impl FnOnce() -> F + Send + 'static) {
        assert!(
            nix::unistd::geteuid().is_root(),
            "netlink tests need root (CAP_NET_ADMIN, CAP_SYS_ADMIN) for veths and namespaces; run them as root"
        );
        let node = std::thread::spawn(move || {
            nix::sched::unshare(CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            rt.expect("tokio runtime").block_on(test());
        });
        if let Err(panic) = node.join() {
            std::panic::resume_unwind(panic);
        }
    }

    /// Runs `ip -j <args>`; from the node thread it sees the node netns.
    fn ip_json(args: &[&str]) -> Value {
        let out = Command::new("ip")
            .arg("-j")
            .args(args)
            .output()
            .expect("run ip");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("ip -j output is JSON")
    }

    /// Whether some object in the JSON array has all `fields` with these values.
    fn has(list: &Value, fields: &[(&str, Value)]) -> bool {
        let items = list.as_array().expect("a JSON array");
        items
            .iter()
            .any(|item| fields.iter().all(|(k, v)| &item[*k] == v))
    }

    /// A pod netns made with `ip netns add`, deleted on drop.
    struct PodNs {
        name: String,
        path: PathBuf,
    }

    impl PodNs {
        fn new() -> Self {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let name = format!("weft-nltest-{}-{n}", std::process::id());
            let status = Command::new("ip").args(["netns", "add", &name]).status();
            assert!(
                status.expect("run ip netns add").success(),
                "ip netns add {name}"
            );
            let path = PathBuf::from(format!("/var/run/netns/{name}"));
            Self { name, path }
        }

        fn ip_json(&self, args: &[&str]) -> Value {
            ip_json(&[&["-n", self.name.as_str()], args].concat())
        }
    }

    impl Drop for PodNs {
        fn drop(&mut self) {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name])
                .status();
        }
    }

    const POD_V4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));
    const POD_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 1, 2, 3));

    fn spec<'a>(netns: &'a Path, host_ifname: &'a str, addrs: &'a [IpAddr]) -> PodIfaceSpec<'a> {
        PodIfaceSpec {
            netns,
            host_ifname,
            pod_ifname: "eth0",
            addrs,
            gateway_v4: Some(Ipv4Addr::new(10, 1, 0, 1)),
            gateway_v6: Some(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            mtu: Some(1400),
        }
    }

    #[test]
    fn create_configures_both_sides_and_delete_removes_them() {
        on_private_node(|| async {
            let pod = PodNs::new();
            let iface = create_pod_iface(&spec(&pod.path, "wfttest0", &[POD_V4, POD_V6]))
                .await
                .unwrap();
            assert_eq!(
                link_index("wfttest0").await.unwrap(),
                Some(iface.host_ifindex)
            );
            assert_ne!(iface.host_mac, iface.pod_mac);

            let link = pod.ip_json(&["link", "show", "dev", "eth0"]);
            assert!(has(
                &link,
                &[("ifindex", iface.pod_ifindex.into()), ("mtu", 1400.into())]
            ));
            let addrs = &pod.ip_json(&["addr", "show", "dev", "eth0"])[0]["addr_info"];
            assert!(has(
                addrs,
                &[("local", "10.1.2.3".into()), ("prefixlen", 32.into())]
            ));
            let v6 = [("local", "fd00::1:2:3".into()), ("prefixlen", 128.into())];
            assert!(has(
                addrs,
                &[v6[0].clone(), v6[1].clone(), ("nodad", true.into())]
            ));
            let tentative = [v6[0].clone(), ("tentative", true.into())];
            assert!(!has(addrs, &tentative), "usable at once: {addrs}");
            let routes = pod.ip_json(&["route"]);
            let default_v4 = [("dst", "default".into()), ("gateway", "10.1.0.1".into())];
            assert!(has(&routes, &default_v4), "{routes}");
            let on_link = [("dst", "10.1.0.1".into()), ("scope", "link".into())];
            assert!(has(&routes, &on_link), "{routes}");
            let routes6 = pod.ip_json(&["-6", "route"]);
            let default_v6 = [("dst", "default".into()), ("gateway", "fd00::1".into())];
            assert!(has(&routes6, &default_v6), "{routes6}");

            let node_routes = ip_json(&["route", "show", "dev", "wfttest0"]);
            let to_pod = [("dst", "10.1.2.3".into()), ("scope", "link".into())];
            assert!(has(&node_routes, &to_pod), "{node_routes}");
            let node_routes6 = ip_json(&["-6", "route", "show", "dev", "wfttest0"]);
            assert!(
                has(&node_routes6, &[("dst", "fd00::1:2:3".into())]),
                "{node_routes6}"
            );

            assert!(delete_pod_iface("wfttest0").await.unwrap());
            assert_eq!(link_index("wfttest0").await.unwrap(), None);
            assert!(!delete_pod_iface("wfttest0").await.unwrap());
            let pod_links = pod.ip_json(&["link", "show"]);
            assert!(
                !has(&pod_links, &[("ifname", "eth0".into())]),
                "{pod_links}"
            );
        });
    }

    #[test]
    fn missing_pod_netns_fails_without_leftovers() {
        on_private_node(|| async {
            let path = PathBuf::from(format!(
                "/var/run/netns/weft-nltest-gone-{}",
                std::process::id()
            ));
            let err = create_pod_iface(&spec(&path, "wfttest1", &[POD_V4]))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    NetlinkError::NetNs {
                        source: NetNsError::NotFound { .. }
                    }
                ),
                "{err:?}"
            );
            assert_eq!(link_index("wfttest1").await.unwrap(), None);
        });
    }

    #[test]
    fn failure_after_creation_deletes_the_veth_pair() {
        on_private_node(|| async {
            let pod = PodNs::new();
            // The second, identical address fails with EEXIST after the veth is in the pod.
            let err = create_pod_iface(&spec(&pod.path, "wfttest2", &[POD_V4, POD_V4]))
                .await
                .unwrap_err();
            assert!(matches!(err, NetlinkError::AddAddress { .. }), "{err:?}");
            assert_eq!(link_index("wfttest2").await.unwrap(), None);
            let pod_links = pod.ip_json(&["link", "show"]);
            assert_eq!(
                pod_links.as_array().map(Vec::len),
                Some(1),
                "only lo: {pod_links}"
            );
        });
    }

    #[test]
    fn existing_host_link_is_refused_and_kept() {
        on_private_node(|| async {
            let (first, second) = (PodNs::new(), PodNs::new());
            let iface = create_pod_iface(&spec(&first.path, "wfttest3", &[POD_V4]))
                .await
                .unwrap();
            let err = create_pod_iface(&spec(&second.path, "wfttest3", &[POD_V4]))
                .await
                .unwrap_err();
            assert!(matches!(err, NetlinkError::AlreadyExists { .. }), "{err:?}");
            assert_eq!(
                link_index("wfttest3").await.unwrap(),
                Some(iface.host_ifindex)
            );
            let too_long = create_pod_iface(&spec(&first.path, "wft0123456789abc", &[])).await;
            assert!(matches!(too_long, Err(NetlinkError::InvalidIfname { .. })));
        });
    }
}

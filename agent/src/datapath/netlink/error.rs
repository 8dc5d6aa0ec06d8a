//! Why a netlink operation on a pod's interfaces (or a node route) failed.

use std::{io, net::IpAddr, path::PathBuf};

use crate::datapath::netns::NetNsError;

/// Errors from setting up or tearing down a pod's interfaces.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// An interface name the kernel would reject.
    #[error(
        "interface name {ifname:?} is invalid: it must be 1-15 bytes without '/', ':' or whitespace"
    )]
    InvalidIfname {
        /// The interface name.
        ifname: String,
    },
    /// A link with the host-side name already exists in the node netns.
    #[error(
        "link {ifname} already exists on the node: a previous pod was not cleaned up, or two pods map to the same name"
    )]
    AlreadyExists {
        /// The interface name.
        ifname: String,
    },
    /// The pod's network namespace could not be opened or entered.
    #[error(transparent)]
    NetNs {
        /// The namespace error.
        #[from]
        source: NetNsError,
    },
    /// Opening an rtnetlink socket failed.
    #[error("cannot open an rtnetlink socket in network namespace {}: check the open file limit and CAP_NET_ADMIN", netns.display())]
    Connect {
        /// The namespace file.
        netns: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Looking a link up failed for a reason other than "no such device".
    #[error("cannot look up link {ifname}")]
    GetLink {
        /// The interface name.
        ifname: String,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// A link this module just created or moved is not where it should be.
    #[error(
        "link {ifname} vanished while it was being configured: something else deleted it concurrently"
    )]
    LinkVanished {
        /// The interface name.
        ifname: String,
    },
    /// The link's hardware address is not a 6-byte MAC.
    #[error("link {ifname} has a {len}-byte hardware address, expected a 6-byte MAC")]
    UnexpectedMac {
        /// The interface name.
        ifname: String,
        /// Length of the hardware address the kernel reported.
        len: usize,
    },
    /// Creating the veth pair failed.
    #[error(
        "cannot create veth pair {host_ifname} <-> {peer_ifname}: does {host_ifname} exist on \
         the node or {peer_ifname} in the pod, is the veth module available, is the MTU valid?"
    )]
    CreateVeth {
        /// The host-side name.
        host_ifname: String,
        /// The pod-side name.
        peer_ifname: String,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// Changing a link (bringing it up) failed.
    #[error("cannot {change} for link {ifname}")]
    SetLink {
        /// The interface name.
        ifname: String,
        /// The change, e.g. `set up`.
        change: String,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// Adding a pod address failed.
    #[error("cannot add address {addr} to {ifname}: is it listed twice or already configured?")]
    AddAddress {
        /// The interface name.
        ifname: String,
        /// The address (installed as /32 or /128).
        addr: IpAddr,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// A route to another node's pod CIDR could not be set or removed.
    #[error("route {route}")]
    NodeRoute {
        /// The route, in `ip route` syntax.
        route: String,
        /// What the kernel said.
        #[source]
        source: rtnetlink::Error,
    },
    /// A route to another node's pod CIDR cannot be expressed (for example an IPv6 CIDR via an
    /// IPv4 address).
    #[error("route {route}")]
    NodeRouteMessage {
        /// The route, in `ip route` syntax.
        route: String,
        /// What the message builder said (rtnetlink does not export its type).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The node's neighbour entry for a pod address could not be added.
    #[error("cannot add the neighbour entry {addr} on {ifname}")]
    AddNeighbour {
        /// The host-side interface name.
        ifname: String,
        /// The pod address.
        addr: IpAddr,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// Adding a route failed.
    #[error(
        "cannot add route {route} dev {ifname}: does it already exist, or is the gateway unreachable?"
    )]
    AddRoute {
        /// The interface name.
        ifname: String,
        /// The route, in `ip route` syntax.
        route: String,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// Listing a device's addresses failed.
    #[error("cannot list the addresses of {ifname}")]
    GetAddress {
        /// The interface name.
        ifname: String,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// Listing the routing table failed.
    #[error("cannot list the routing table")]
    GetRoute {
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// A test injected a failure (`WEFT_TEST_FAULTS`).
    #[error(transparent)]
    Injected(#[from] crate::faults::Injected),
    /// The thread or runtime the deletion of a link runs on could not be had.
    #[error("cannot run the deletion of link {ifname} on a blocking thread")]
    OffWorker {
        /// The interface name.
        ifname: String,
        /// What failed (the runtime's creation, or the thread's join).
        #[source]
        source: io::Error,
    },
    /// Deleting a link failed.
    #[error("cannot delete link {ifname}")]
    DeleteLink {
        /// The interface name.
        ifname: String,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
    /// A pod's source-routing rule could not be added or removed.
    #[error("ip rule {rule}")]
    Rule {
        /// The rule, in `ip rule` syntax.
        rule: String,
        /// What the kernel said.
        #[source]
        source: rtnetlink::Error,
    },
    /// Listing the rules or a table's routes failed.
    #[error("cannot list the routing rules or tables")]
    ListRules(#[source] rtnetlink::Error),
    /// A route of an interface's table could not be set or removed.
    #[error("route {route}")]
    CloudRoute {
        /// The route.
        route: String,
        /// What the kernel said.
        #[source]
        source: rtnetlink::Error,
    },
    /// Listing the links failed.
    #[error("cannot list the links")]
    ListLinks(#[source] rtnetlink::Error),
    /// An address could not be added to or removed from a cloud interface.
    #[error("address {addr} on {ifname}")]
    DeviceAddress {
        /// The interface.
        ifname: String,
        /// The address with its prefix.
        addr: ipnet::IpNet,
        /// What the kernel said.
        #[source]
        source: rtnetlink::Error,
    },
    /// The tunnel device could not be made.
    #[error(
        "cannot create tunnel device {ifname} (UDP port {port}): is the port taken by another \
         tunnel (Cilium's cilium_vxlan, flannel), or has the kernel no driver for it?"
    )]
    CreateTunnel {
        /// The device.
        ifname: String,
        /// Its UDP port.
        port: u16,
        /// The underlying error.
        #[source]
        source: rtnetlink::Error,
    },
}

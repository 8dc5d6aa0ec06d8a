//! Routes to other nodes' pod CIDRs via those nodes' addresses (`auto-direct-node-routes`,
//! as Cilium installs them): `ip route replace <cidr> via <node ip> proto static` and its
//! removal. Routes carry `proto static` so `ip route` shows they are not the kernel's own.

use std::net::IpAddr;

use ipnet::IpNet;
use nix::errno::Errno;
use rtnetlink::{RouteMessageBuilder, packet_route::route::RouteProtocol};

use super::{NetlinkError, connect, is_errno};

fn message(
    dst: IpNet,
    via: IpAddr,
) -> Result<rtnetlink::packet_route::route::RouteMessage, NetlinkError> {
    RouteMessageBuilder::<IpAddr>::new()
        .destination_prefix(dst.network(), dst.prefix_len())
        .and_then(|b| b.gateway(via))
        .map(|b| b.protocol(RouteProtocol::Static).build())
        .map_err(|e| NetlinkError::NodeRoute {
            route: format!("{dst} via {via}"),
            reason: e.to_string(),
        })
}

/// `ip route replace <dst> via <via> proto static`.
///
/// # Errors
/// The kernel refused (for example `via` is not reachable on a connected network).
pub async fn replace_node_route(dst: IpNet, via: IpAddr) -> Result<(), NetlinkError> {
    let handle = connect()?;
    handle
        .route()
        .add(message(dst, via)?)
        .replace()
        .execute()
        .await
        .map_err(|e| NetlinkError::NodeRoute {
            route: format!("{dst} via {via}"),
            reason: e.to_string(),
        })
}

/// `ip route del <dst> via <via>`; `Ok(false)` if there was no such route.
///
/// # Errors
/// The kernel refused for another reason.
pub async fn delete_node_route(dst: IpNet, via: IpAddr) -> Result<bool, NetlinkError> {
    let handle = connect()?;
    match handle.route().del(message(dst, via)?).execute().await {
        Ok(()) => Ok(true),
        Err(e) if is_errno(&e, Errno::ESRCH) || is_errno(&e, Errno::ENOENT) => Ok(false),
        Err(e) => Err(NetlinkError::NodeRoute {
            route: format!("{dst} via {via}"),
            reason: e.to_string(),
        }),
    }
}

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
        .map_err(|e| NetlinkError::NodeRouteMessage {
            route: format!("{dst} via {via}"),
            source: Box::new(e),
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
        .map_err(|source| NetlinkError::NodeRoute {
            route: format!("{dst} via {via}"),
            source,
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
        Err(source) => Err(NetlinkError::NodeRoute {
            route: format!("{dst} via {via}"),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_route_that_cannot_be_built_keeps_the_builder_error() {
        let error = message(
            "fd00::/64".parse().expect("cidr"),
            "10.0.0.1".parse().expect("ip"),
        )
        .expect_err("an IPv6 CIDR via an IPv4 address");
        assert!(
            matches!(&error, NetlinkError::NodeRouteMessage { route, .. } if route == "fd00::/64 via 10.0.0.1"),
            "{error:?}"
        );
        let source = error.source().expect("a source");
        assert_eq!(source.to_string(), "invalid address family Inet6");
    }
}

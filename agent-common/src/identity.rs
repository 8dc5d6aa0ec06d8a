//! Reserved security identities, numbered as Cilium numbers them
//! (`pkg/identity/numericidentity.go`), so identities mean the same thing on both.

/// Unknown / not yet resolved.
pub const UNKNOWN: u32 = 0;
/// The local node.
pub const HOST: u32 = 1;
/// Anything outside the cluster.
pub const WORLD: u32 = 2;
/// Endpoints not managed by weft.
pub const UNMANAGED: u32 = 3;
/// The health-checking endpoint.
pub const HEALTH: u32 = 4;
/// Endpoint whose labels are not known yet.
pub const INIT: u32 = 5;
/// Every other node of the cluster.
pub const REMOTE_NODE: u32 = 6;
/// Remote nodes running the kube-apiserver.
pub const KUBE_APISERVER: u32 = 7;
/// The IPv4 world, when dual-stack splits it.
pub const WORLD_IPV4: u32 = 9;
/// The IPv6 world, when dual-stack splits it.
pub const WORLD_IPV6: u32 = 10;
/// First identity allocated for a label set.
pub const MIN_ALLOCATED: u32 = 256;

/// Is `id` outside the cluster (world, split world, or unknown — an IPCache miss)?
#[must_use]
pub const fn is_world(id: u32) -> bool {
    matches!(id, UNKNOWN | WORLD | WORLD_IPV4 | WORLD_IPV6)
}

/// Name of a reserved identity as Cilium prints it (`reserved:<name>`), `None` otherwise.
#[must_use]
pub const fn reserved_name(id: u32) -> Option<&'static str> {
    Some(match id {
        UNKNOWN => "unknown",
        HOST => "host",
        WORLD => "world",
        UNMANAGED => "unmanaged",
        HEALTH => "health",
        INIT => "init",
        REMOTE_NODE => "remote-node",
        KUBE_APISERVER => "kube-apiserver",
        WORLD_IPV4 => "world-ipv4",
        WORLD_IPV6 => "world-ipv6",
        _ => return None,
    })
}

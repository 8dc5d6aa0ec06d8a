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
/// Endpoint whose labels are not known yet.
pub const INIT: u32 = 5;
/// Every other node of the cluster.
pub const REMOTE_NODE: u32 = 6;
/// First identity allocated for a label set.
pub const MIN_ALLOCATED: u32 = 256;

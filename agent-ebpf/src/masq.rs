//! The masquerade decision for pod traffic leaving through a native device (Cilium's
//! `snat_v4_needs_masquerade` / `snat_v6_needs_masquerade`, without egress gateway and tunnels): keep the pod address when
//! the endpoint says so (per-pool skip, `--only-masquerade-default-pool`), when the destination
//! is inside the cluster (an IPCache identity other than world), or when it is excluded for
//! the pod's pool (ip-masq-agent list, native-routing CIDR); masquerade otherwise. The verdict
//! does not depend on the order; the order is the cheapest. Reads maps only; `nat` makes and
//! applies the mapping.

use agent_common::{
    EndpointInfo, IpcacheKey, MasqKey,
    endpoint::{ENDPOINT_F_HOST, ENDPOINT_F_NO_SNAT_V4, ENDPOINT_F_NO_SNAT_V6},
    identity,
    ipcache::IPCACHE_STATIC_PREFIX,
    masq::{MASQ_STATIC_PREFIX, POOL_ANY},
    reason,
};
use aya_ebpf::btf_maps::lpm_trie::Key;

use crate::maps::{IPCACHE, MASQ_EXCLUDE};

/// Security identity of the longest IPCache prefix holding IPv4 `addr`; `None` on a miss.
#[inline(always)]
pub fn identity_v4(addr: [u8; 4]) -> Option<u32> {
    let key = Key::new(IPCACHE_STATIC_PREFIX + 32, IpcacheKey::v4(addr));
    IPCACHE.get(&key).map(|info| info.sec_identity)
}

/// Is IPv4 `daddr` excluded from masquerading for pool `pool_id`? Exclusions of every pool
/// are asked first (the ip-masq-agent list and native-routing CIDRs: most hits), then the
/// pool's own.
#[inline(always)]
pub fn excluded_v4(pool_id: u32, daddr: [u8; 4]) -> bool {
    let any = Key::new(MASQ_STATIC_PREFIX + 32, MasqKey::v4(POOL_ANY, daddr));
    if MASQ_EXCLUDE.get(&any).is_some() {
        return true;
    }
    let own = Key::new(MASQ_STATIC_PREFIX + 32, MasqKey::v4(pool_id, daddr));
    MASQ_EXCLUDE.get(&own).is_some()
}

/// Why IPv4 traffic from `ep` to `daddr` keeps the pod address (a counter reason), or `None`
/// when it must be masqueraded. Cheapest first: the endpoint's flags, then one IPCache lookup
/// (cluster destinations, the bulk of unmasqueraded traffic), then the exclusions.
#[inline(always)]
pub fn skip_reason_v4(ep: &EndpointInfo, daddr: [u8; 4]) -> Option<u32> {
    if ep.flags & (ENDPOINT_F_HOST | ENDPOINT_F_NO_SNAT_V4) != 0 {
        return Some(reason::SNAT_SKIP_ENDPOINT);
    }
    if matches!(identity_v4(daddr), Some(id) if !identity::is_world(id)) {
        return Some(reason::SNAT_SKIP_CLUSTER);
    }
    if excluded_v4(ep.pool_id, daddr) {
        return Some(reason::SNAT_SKIP_EXCLUDED);
    }
    None
}

/// Would IPv4 traffic from `ep` to `peer` be masqueraded?
#[inline(always)]
pub fn masqueraded_v4(ep: &EndpointInfo, peer: [u8; 4]) -> bool {
    skip_reason_v4(ep, peer).is_none()
}

/// Security identity of the longest IPCache prefix holding IPv6 `addr`; `None` on a miss.
#[inline(always)]
pub fn identity_v6(addr: [u8; 16]) -> Option<u32> {
    let key = Key::new(IPCACHE_STATIC_PREFIX + 128, IpcacheKey::v6(addr));
    IPCACHE.get(&key).map(|info| info.sec_identity)
}

/// Is IPv6 `daddr` excluded from masquerading for pool `pool_id`? As [`excluded_v4`].
#[inline(always)]
pub fn excluded_v6(pool_id: u32, daddr: [u8; 16]) -> bool {
    let any = Key::new(MASQ_STATIC_PREFIX + 128, MasqKey::v6(POOL_ANY, daddr));
    if MASQ_EXCLUDE.get(&any).is_some() {
        return true;
    }
    let own = Key::new(MASQ_STATIC_PREFIX + 128, MasqKey::v6(pool_id, daddr));
    MASQ_EXCLUDE.get(&own).is_some()
}

/// Why IPv6 traffic from `ep` to `daddr` keeps the pod address, or `None` when it must be
/// masqueraded; the same order as [`skip_reason_v4`], with `ENDPOINT_F_NO_SNAT_V6`.
#[inline(always)]
pub fn skip_reason_v6(ep: &EndpointInfo, daddr: [u8; 16]) -> Option<u32> {
    if ep.flags & (ENDPOINT_F_HOST | ENDPOINT_F_NO_SNAT_V6) != 0 {
        return Some(reason::SNAT_SKIP_ENDPOINT);
    }
    if matches!(identity_v6(daddr), Some(id) if !identity::is_world(id)) {
        return Some(reason::SNAT_SKIP_CLUSTER);
    }
    if excluded_v6(ep.pool_id, daddr) {
        return Some(reason::SNAT_SKIP_EXCLUDED);
    }
    None
}

/// Would IPv6 traffic from `ep` to `peer` be masqueraded?
#[inline(always)]
pub fn masqueraded_v6(ep: &EndpointInfo, peer: [u8; 16]) -> bool {
    skip_reason_v6(ep, peer).is_none()
}

//! Every map the programs use. Names and capacities come from `agent_common::maps`; the agent
//! pins them under its bpffs directory and re-adopts them on restart.

use agent_common::{
    Counter, EndpointInfo, EndpointKey, IfaceInfo, IpcacheInfo, IpcacheKey, MasqInfo, MasqKey,
    NatEntry4, NatEntry6, NatTuple4, NatTuple6, NetdevInfo, StackInfo, StackKey, TunnelInfo, maps,
    reason,
};
use aya_ebpf::{
    btf_maps::{Array, HashMap, LpmTrie, LruHashMap, PerCpuArray},
    macros::btf_map,
    programs::TcContext,
};

/// Pod IP → endpoint (see `agent_common::endpoint`).
#[btf_map(name = "weft_eps_v1")]
pub static ENDPOINTS: HashMap<EndpointKey, EndpointInfo, { maps::ENDPOINTS_MAX as usize }> =
    HashMap::new();

/// Host-side ifindex → interface facts (its MAC).
#[btf_map(name = "weft_ifs_v1")]
pub static IFACES: HashMap<u32, IfaceInfo, { maps::IFACES_MAX as usize }> = HashMap::new();

/// Per-CPU packet and byte counters by `agent_common::reason`.
#[btf_map(name = "weft_ctrs_v2")]
pub static COUNTERS: PerCpuArray<Counter, { maps::COUNTERS_MAX as usize }> = PerCpuArray::new();

/// Prefix → security identity (see `agent_common::ipcache`).
#[btf_map(name = "weft_ipc_v1")]
pub static IPCACHE: LpmTrie<IpcacheKey, IpcacheInfo, { maps::IPCACHE_MAX as usize }> =
    LpmTrie::new();

/// (pool, destination prefix) → masquerade exclusion (see `agent_common::masq`).
#[btf_map(name = "weft_masq_v1")]
pub static MASQ_EXCLUDE: LpmTrie<MasqKey, MasqInfo, { maps::MASQ_EXCLUDE_MAX as usize }> =
    LpmTrie::new();

/// IPv4 masquerade mappings, two per flow (see `agent_common::nat`).
#[btf_map(name = "weft_snat4_v1")]
pub static NAT4: LruHashMap<NatTuple4, NatEntry4, { maps::NAT4_MAX as usize }> = LruHashMap::new();

/// IPv6 masquerade mappings, two per flow (see `agent_common::nat`).
#[btf_map(name = "weft_snat6_v1")]
pub static NAT6: LruHashMap<NatTuple6, NatEntry6, { maps::NAT6_MAX as usize }> = LruHashMap::new();

/// Native devices by ifindex, with their masquerade addresses.
#[btf_map(name = "weft_devs_v1")]
pub static NETDEVS: HashMap<u32, NetdevInfo, { maps::NETDEVS_MAX as usize }> = HashMap::new();

/// Pod sockets with a flow through the host stack (see `agent_common::stack`).
#[btf_map(name = "weft_stack_v1")]
pub static STACK_FLOWS: LruHashMap<StackKey, StackInfo, { maps::STACK_FLOWS_MAX as usize }> =
    LruHashMap::new();

/// The node's tunnel device (see `agent_common::tunnel`).
#[btf_map(name = "weft_tun_v1")]
pub static TUNNEL: Array<TunnelInfo, { maps::TUNNEL_MAX as usize }> = Array::new();

/// Count one packet of `ctx` under `why`, then return `verdict` unchanged.
#[inline(always)]
pub fn count(ctx: &TcContext, why: u32, verdict: i32) -> i32 {
    if why < reason::COUNT {
        if let Some(slot) = COUNTERS.get_ptr_mut(why) {
            // SAFETY: per-CPU slot of this CPU; programs do not preempt each other on one CPU.
            unsafe {
                (*slot).packets += 1;
                (*slot).bytes += u64::from(ctx.len());
            }
        }
    }
    verdict
}

/// The endpoint behind `key`, copied out of the map.
#[inline(always)]
pub fn endpoint(key: &EndpointKey) -> Option<EndpointInfo> {
    // SAFETY: the value is copied before any other map operation could reuse the slot.
    unsafe { ENDPOINTS.get(key).copied() }
}

/// The interface with ifindex `ifindex`, copied out of the map.
#[inline(always)]
pub fn iface(ifindex: u32) -> Option<IfaceInfo> {
    // SAFETY: as in `endpoint`.
    unsafe { IFACES.get(ifindex).copied() }
}

/// The native device with ifindex `ifindex`, copied out of the map.
#[inline(always)]
pub fn netdev(ifindex: u32) -> Option<NetdevInfo> {
    // SAFETY: as in `endpoint`.
    unsafe { NETDEVS.get(ifindex).copied() }
}

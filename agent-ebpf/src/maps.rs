//! Every map the programs use. Names and capacities come from `agent_common::maps`; the agent
//! pins them under its bpffs directory and re-adopts them on restart.

use agent_common::{Counter, EndpointInfo, EndpointKey, IfaceInfo, maps, reason};
use aya_ebpf::{
    btf_maps::{HashMap, PerCpuArray},
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
#[btf_map(name = "weft_ctrs_v1")]
pub static COUNTERS: PerCpuArray<Counter, { maps::COUNTERS_MAX as usize }> = PerCpuArray::new();

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

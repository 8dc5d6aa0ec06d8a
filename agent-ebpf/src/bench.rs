//! Benchmark-only wrappers. `BPF_PROG_TEST_RUN` runs a program `repeat` times on one skb, so
//! a program that rewrites the packet (NAT, TTL, MAC addresses) meets its own output from the
//! second run on and the benchmark would time another path (a mapping's reply, an expired
//! TTL). These wrappers save the first [`BENCH_HEAD`] bytes of the frame (Ethernet + IPv6 +
//! TCP, which covers every header the programs rewrite), run the real program body, and put
//! the bytes back; `weft_bench_copy` only saves and restores (the baseline to subtract). A
//! frame shorter than [`BENCH_HEAD`] is dropped untouched. The agent never attaches them.

use agent_common::maps::BENCH_HEAD;
use aya_ebpf::{
    bindings::TC_ACT_SHOT,
    btf_maps::PerCpuArray,
    helpers::{bpf_skb_load_bytes, bpf_skb_store_bytes},
    macros::btf_map,
    programs::TcContext,
};

/// The saved head while the program runs: one slot per CPU (a tc program runs to the end on
/// its CPU). A map, not the stack: `to_netdev` leaves less than [`BENCH_HEAD`] bytes of the
/// 512-byte stack free. Never pinned; nothing but the wrappers uses it.
#[btf_map(name = "weft_bench_head")]
static SAVED: PerCpuArray<[u8; BENCH_HEAD], 1> = PerCpuArray::new();

/// [`BENCH_HEAD`] as the helpers' length argument (a constant: nothing for the verifier to
/// bound).
const LEN: u32 = BENCH_HEAD as u32;

/// Run `body` on `ctx` and restore the frame's first [`BENCH_HEAD`] bytes afterwards.
#[inline(always)]
pub fn around(ctx: &TcContext, body: impl FnOnce(&TcContext) -> i32) -> i32 {
    let Some(saved) = SAVED.get_ptr_mut(0) else {
        return TC_ACT_SHOT;
    };
    // SAFETY: `saved` is this CPU's slot of the map, `BENCH_HEAD` bytes long, and stays valid
    // for the whole run (array values are never freed); the helper checks the packet bounds.
    if unsafe { bpf_skb_load_bytes(ctx.skb.skb.cast(), 0, saved.cast(), LEN) } != 0 {
        return TC_ACT_SHOT;
    }
    let verdict = body(ctx);
    // SAFETY: as above; the body does not touch the slot.
    if unsafe { bpf_skb_store_bytes(ctx.skb.skb, 0, saved.cast(), LEN, 0) } != 0 {
        return TC_ACT_SHOT;
    }
    verdict
}

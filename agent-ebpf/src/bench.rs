//! Benchmark-only wrappers. `BPF_PROG_TEST_RUN` runs a program `repeat` times on one skb, so
//! a program that rewrites the packet (NAT, TTL) meets its own output from the second run on
//! and the benchmark would time another path. These wrappers save the first [`HEAD`] bytes of
//! the frame, run the real program body, and put the bytes back; `weft_bench_copy` only saves
//! and restores (the baseline to subtract). The agent never attaches them.

use aya_ebpf::{bindings::TC_ACT_SHOT, programs::TcContext};

/// Bytes saved and restored: Ethernet + IPv4 + a 20-byte TCP header + 2.
pub const HEAD: usize = 56;

/// Run `body` on `ctx` and restore the frame's first [`HEAD`] bytes afterwards.
#[inline(always)]
pub fn around(ctx: &TcContext, body: impl FnOnce(&TcContext) -> i32) -> i32 {
    let Ok(saved) = ctx.load::<[u8; HEAD]>(0) else {
        return TC_ACT_SHOT;
    };
    let verdict = body(ctx);
    if ctx.store(0, &saved, 0).is_err() {
        return TC_ACT_SHOT;
    }
    verdict
}

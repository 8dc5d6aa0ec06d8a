//! weft's tc programs. One file per concern: `maps` declares every map (names come from
//! agent-common so the agent and the programs agree), `packet` holds bounds-checked header
//! access and checksum arithmetic, `from_container` is the pod-egress hook, `neigh` answers a
//! pod's ARP and neighbour solicitations for its gateway, `netdev` holds the native-device
//! hooks (`netdev6` their IPv6 half), `stack` which flows between local pods must take the
//! host stack, `tunnel` the encapsulation towards other nodes and the tunnel device's ingress,
//! `masq` the masquerade decision, `nat` / `nat6` the
//! mappings and rewrites, `icmp` / `icmp6` the reverse NAT of ICMP and ICMPv6 errors; `bench`
//! wraps programs for the benchmarks.
//!
//! Only the `bpf` target builds the programs; on the host (`cargo build --workspace`) this is an
//! empty binary so workspace-wide commands keep working.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

#[cfg(target_arch = "bpf")]
mod bench;
#[cfg(target_arch = "bpf")]
mod from_container;
#[cfg(target_arch = "bpf")]
mod icmp;
#[cfg(target_arch = "bpf")]
mod icmp6;
#[cfg(target_arch = "bpf")]
mod maps;
#[cfg(target_arch = "bpf")]
mod masq;
#[cfg(target_arch = "bpf")]
mod nat;
#[cfg(target_arch = "bpf")]
mod nat6;
#[cfg(target_arch = "bpf")]
mod neigh;
#[cfg(target_arch = "bpf")]
mod netdev;
#[cfg(target_arch = "bpf")]
mod netdev6;
#[cfg(target_arch = "bpf")]
mod packet;
#[cfg(target_arch = "bpf")]
mod stack;
#[cfg(target_arch = "bpf")]
mod tunnel;

#[cfg(target_arch = "bpf")]
use aya_ebpf::{bindings::TC_ACT_OK, macros::classifier, programs::TcContext};

#[cfg(not(target_arch = "bpf"))]
fn main() {}

#[cfg(target_arch = "bpf")]
/// tc ingress of a host-side veth: every packet a pod sends.
#[classifier]
pub fn from_container(ctx: TcContext) -> i32 {
    from_container::run(&ctx)
}

#[cfg(target_arch = "bpf")]
/// tc egress of a native device: masquerades pod traffic leaving the node.
#[classifier]
pub fn to_netdev(ctx: TcContext) -> i32 {
    netdev::run_egress(&ctx)
}

#[cfg(target_arch = "bpf")]
/// tc ingress of a native device: reverses masquerading, delivers to pods.
#[classifier]
pub fn from_netdev(ctx: TcContext) -> i32 {
    netdev::run_ingress(&ctx)
}

#[cfg(target_arch = "bpf")]
/// tc ingress of the tunnel device: delivers what other nodes encapsulated.
#[classifier]
pub fn from_overlay(ctx: TcContext) -> i32 {
    tunnel::run_from_overlay(&ctx)
}

#[cfg(target_arch = "bpf")]
/// Does nothing: the baseline program of the datapath benchmark.
#[classifier]
pub fn weft_noop(_ctx: TcContext) -> i32 {
    TC_ACT_OK
}

#[cfg(target_arch = "bpf")]
/// Benchmark only: `to_netdev` on a frame whose head is restored afterwards.
#[classifier]
pub fn weft_bench_to_netdev(ctx: TcContext) -> i32 {
    bench::around(&ctx, netdev::run_egress)
}

#[cfg(target_arch = "bpf")]
/// Benchmark only: `from_netdev` on a frame whose head is restored afterwards.
#[classifier]
pub fn weft_bench_from_netdev(ctx: TcContext) -> i32 {
    bench::around(&ctx, netdev::run_ingress)
}

#[cfg(target_arch = "bpf")]
/// Benchmark only: `from_container` on a frame whose head is restored afterwards.
#[classifier]
pub fn weft_bench_from_container(ctx: TcContext) -> i32 {
    bench::around(&ctx, from_container::run)
}

#[cfg(target_arch = "bpf")]
/// Benchmark only: saves and restores the frame's head (baseline of the three above).
#[classifier]
pub fn weft_bench_copy(ctx: TcContext) -> i32 {
    bench::around(&ctx, |_| TC_ACT_OK)
}

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[cfg(target_arch = "bpf")]
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

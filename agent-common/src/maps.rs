//! Names and capacities of every map and program the agent looks up in the eBPF object.
//!
//! Map names carry a layout version (`_v1`): a change to a key or value type, or to a map's
//! capacity, bumps it, so a new agent creates a fresh map instead of re-adopting a pin of the
//! old shape. Names stay within the kernel's 15 characters so `bpftool map show` prints them
//! whole.

/// Endpoints map (`HASH`, [`crate::EndpointKey`] → [`crate::EndpointInfo`]).
pub const ENDPOINTS: &str = "weft_eps_v1";
/// Capacity of the endpoints map (Cilium's `ENDPOINTS_MAP_SIZE`).
pub const ENDPOINTS_MAX: u32 = 65535;

/// Interfaces map (`HASH`, `u32` host-side ifindex → [`crate::IfaceInfo`]).
pub const IFACES: &str = "weft_ifs_v1";
/// Capacity of the interfaces map: one entry per pod, like the endpoints map.
pub const IFACES_MAX: u32 = ENDPOINTS_MAX;

/// Counters map (`PERCPU_ARRAY`, `u32` reason → [`crate::Counter`]). v2: room for 64 reasons.
pub const COUNTERS: &str = "weft_ctrs_v2";
/// Capacity of the counters map: more than `reason::COUNT`, so new reasons need no new layout.
pub const COUNTERS_MAX: u32 = 64;
const _: () = assert!(crate::reason::COUNT <= COUNTERS_MAX);

/// `IPCache` map (`LPM_TRIE`, `Key<`[`crate::IpcacheKey`]`>` → [`crate::IpcacheInfo`]).
pub const IPCACHE: &str = "weft_ipc_v1";
/// Capacity of the `IPCache` (Cilium's default; entries are allocated on insert).
pub const IPCACHE_MAX: u32 = 512_000;

/// Per-pool masquerade exclusions (`LPM_TRIE`, `Key<`[`crate::MasqKey`]`>` →
/// [`crate::MasqInfo`]).
pub const MASQ_EXCLUDE: &str = "weft_masq_v1";
/// Capacity of the exclusion map (Cilium's `cilium_ipmasq_v4`).
pub const MASQ_EXCLUDE_MAX: u32 = 16384;

/// IPv4 masquerade mappings (`LRU_HASH`, [`crate::NatTuple4`] → [`crate::NatEntry4`]).
pub const NAT4: &str = "weft_snat4_v1";
/// Capacity of the NAT map: two entries per flow, so 65536 concurrent flows.
pub const NAT4_MAX: u32 = 131_072;

/// IPv6 masquerade mappings (`LRU_HASH`, [`crate::NatTuple6`] → [`crate::NatEntry6`]).
pub const NAT6: &str = "weft_snat6_v1";
/// Capacity of the IPv6 NAT map (as [`NAT4_MAX`]).
pub const NAT6_MAX: u32 = 131_072;

/// Native devices (`HASH`, `u32` ifindex → [`crate::NetdevInfo`]).
pub const NETDEVS: &str = "weft_devs_v1";
/// Capacity of the native-devices map.
pub const NETDEVS_MAX: u32 = 64;

/// Stack flows (`LRU_HASH`, [`crate::StackKey`] → [`crate::StackInfo`]): pod sockets with a
/// flow through the host stack, whose flows to local pods take the stack too.
pub const STACK_FLOWS: &str = "weft_stack_v1";
/// Capacity of the stack-flows map: pod sockets with a flow off the node or to a Service.
pub const STACK_FLOWS_MAX: u32 = 65_536;

/// Tunnel map (`ARRAY`, one `u32` slot 0 → [`crate::TunnelInfo`]): the node's tunnel device.
pub const TUNNEL: &str = "weft_tun_v1";
/// Capacity of the tunnel map: one slot.
pub const TUNNEL_MAX: u32 = 1;

/// tc program on the host-side veth, ingress (packets leaving the pod).
pub const PROG_FROM_CONTAINER: &str = "from_container";
/// tc program on a native device, egress: masquerades pod traffic leaving the node.
pub const PROG_TO_NETDEV: &str = "to_netdev";
/// tc program on a native device, ingress: reverses masquerading and delivers to pods.
pub const PROG_FROM_NETDEV: &str = "from_netdev";
/// tc program on the tunnel device, ingress: delivers decapsulated packets.
pub const PROG_FROM_OVERLAY: &str = "from_overlay";
/// Classifier that returns `TC_ACT_OK` and does nothing: the baseline in benchmarks.
pub const PROG_NOOP: &str = "weft_noop";
/// Benchmark only: `to_netdev` with the frame's head restored after each run.
pub const PROG_BENCH_TO_NETDEV: &str = "weft_bench_to_netdev";
/// Benchmark only: `from_netdev` with the frame's head restored after each run.
pub const PROG_BENCH_FROM_NETDEV: &str = "weft_bench_from_netdev";
/// Benchmark only: `from_container` with the frame's head restored after each run.
pub const PROG_BENCH_FROM_CONTAINER: &str = "weft_bench_from_container";
/// Benchmark only: saves and restores the frame's head (baseline of the three above).
pub const PROG_BENCH_COPY: &str = "weft_bench_copy";
/// Bytes of the frame the benchmark wrappers save and restore: Ethernet (14) + IPv6 (40) + a
/// 20-byte TCP header = 74, rounded up to a multiple of 8. A frame shorter than this is
/// dropped by the wrappers (`TC_ACT_SHOT`), so benchmark frames are at least this long.
pub const BENCH_HEAD: usize = 80;
/// Benchmark only: where the wrappers keep the saved head (`PERCPU_ARRAY`, one
/// `[u8; BENCH_HEAD]`). Never pinned, not in [`PINNED_MAPS`].
pub const BENCH_SAVED: &str = "weft_bench_head";

/// Pins of map layouts this agent replaced: removed on start (their data is not migrated).
pub const RETIRED_MAPS: [&str; 1] = ["weft_ctrs_v1"];

/// Every map the agent pins, in the order it adopts them.
pub const PINNED_MAPS: [&str; 10] = [
    ENDPOINTS,
    IFACES,
    COUNTERS,
    IPCACHE,
    MASQ_EXCLUDE,
    NAT4,
    NAT6,
    NETDEVS,
    STACK_FLOWS,
    TUNNEL,
];

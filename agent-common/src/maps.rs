//! Names and capacities of every map and program the agent looks up in the eBPF object.
//!
//! Map names carry a layout version (`_v1`): a change to a key or value type bumps it, so a new
//! agent creates a fresh map instead of re-adopting a pin of the old shape. Names stay within the
//! kernel's 15 characters so `bpftool map show` prints them whole.

/// Endpoints map (`HASH`, [`crate::EndpointKey`] → [`crate::EndpointInfo`]).
pub const ENDPOINTS: &str = "weft_eps_v1";
/// Capacity of the endpoints map (Cilium's `ENDPOINTS_MAP_SIZE`).
pub const ENDPOINTS_MAX: u32 = 65535;

/// Interfaces map (`HASH`, `u32` host-side ifindex → [`crate::IfaceInfo`]).
pub const IFACES: &str = "weft_ifs_v1";
/// Capacity of the interfaces map: one entry per pod, like the endpoints map.
pub const IFACES_MAX: u32 = ENDPOINTS_MAX;

/// Counters map (`PERCPU_ARRAY`, `u32` reason → [`crate::Counter`]).
pub const COUNTERS: &str = "weft_ctrs_v1";
/// Capacity of the counters map.
pub const COUNTERS_MAX: u32 = crate::reason::COUNT;

// Reserved for the next datapath issues (ipcache and per-pool masquerade exclusion):
/// `IPCache` map name (`LPM_TRIE`, prefix → identity).
pub const IPCACHE: &str = "weft_ipc_v1";
/// Per-pool masquerade exclusion map name (`LPM_TRIE`, (pool, prefix) → flags).
pub const MASQ_EXCLUDE: &str = "weft_masq_v1";

/// tc program on the host-side veth, ingress (packets leaving the pod).
pub const PROG_FROM_CONTAINER: &str = "from_container";
/// Classifier that returns `TC_ACT_OK` and does nothing: the baseline in benchmarks.
pub const PROG_NOOP: &str = "weft_noop";

/// Every map the agent pins, in the order it adopts them.
pub const PINNED_MAPS: [&str; 3] = [ENDPOINTS, IFACES, COUNTERS];

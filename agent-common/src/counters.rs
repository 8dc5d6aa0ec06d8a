//! Per-CPU datapath counters, indexed by [`Reason`]: what the programs did with each packet.

/// Packets and bytes seen for one reason (one slot per CPU; userspace sums them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted (skb length).
    pub bytes: u64,
}

const _: () = assert!(size_of::<Counter>() == 16);

#[cfg(feature = "user")]
// SAFETY: repr(C), two u64, no padding.
unsafe impl aya::Pod for Counter {}

/// Indexes into the counters map: plain `u32` constants, never an enum in the ABI.
pub mod reason {
    /// Delivered to a local pod with `bpf_redirect_peer`.
    pub const REDIRECT_LOCAL: u32 = 0;
    /// Handed to the host stack (destination not a local pod, or not IP).
    pub const PASS_STACK: u32 = 1;
    /// ARP request or IPv6 neighbour solicitation answered by the datapath.
    pub const NEIGH_REPLY: u32 = 2;
    /// Dropped: headers truncated or malformed.
    pub const DROP_MALFORMED: u32 = 3;
    /// Dropped: source IP is not an endpoint behind the interface it came from (spoofing).
    pub const DROP_INVALID_SOURCE: u32 = 4;
    /// Dropped: a packet rewrite or the redirect helper failed.
    pub const DROP_REDIRECT_FAILED: u32 = 5;
    /// Number of reasons (size of the counters map).
    pub const COUNT: u32 = 6;

    /// Stable, human-readable name of a reason (CLI output and metrics label).
    #[must_use]
    pub const fn name(reason: u32) -> &'static str {
        match reason {
            REDIRECT_LOCAL => "redirect_local",
            PASS_STACK => "pass_stack",
            NEIGH_REPLY => "neigh_reply",
            DROP_MALFORMED => "drop_malformed",
            DROP_INVALID_SOURCE => "drop_invalid_source",
            DROP_REDIRECT_FAILED => "drop_redirect_failed",
            _ => "unknown",
        }
    }
}

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

abi_layout!(Counter, 16 { packets: 0, bytes: 8 });

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
    /// Native device: not pod traffic (host sockets, ARP, forwarded packets), passed untouched.
    pub const NETDEV_PASS: u32 = 6;
    /// Pod traffic source-NATed to the node address on its way out.
    pub const SNAT: u32 = 7;
    /// Pod traffic left unmasqueraded: the endpoint has a no-SNAT flag (pool skip).
    pub const SNAT_SKIP_ENDPOINT: u32 = 8;
    /// Pod traffic left unmasqueraded: destination excluded for the pod's pool.
    pub const SNAT_SKIP_EXCLUDED: u32 = 9;
    /// Pod traffic left unmasqueraded: destination has a cluster identity in the IPCache.
    pub const SNAT_SKIP_CLUSTER: u32 = 10;
    /// Pod traffic left unmasqueraded: a reply (echo reply, or a flow the outside opened).
    pub const SNAT_SKIP_REPLY: u32 = 11;
    /// Reply to masqueraded traffic: destination restored to the pod, handed to the stack.
    pub const REV_SNAT: u32 = 12;
    /// Dropped: no free masquerade port for a new flow.
    pub const DROP_NAT_NO_PORT: u32 = 13;
    /// Dropped: pod traffic that needs masquerading but cannot be (IP fragments).
    pub const DROP_NAT_UNSUPPORTED: u32 = 14;
    /// To a local pod, but through the host stack: a socket of the flow has a flow through the
    /// stack (a Service, say), so conntrack must see this flow both ways (`stack` map).
    pub const PASS_STACK_FLOW: u32 = 15;
    /// Native device: to a local pod, handed to the host stack so netfilter sees both
    /// directions of the flow (conntrack, kube-proxy's reverse NAT).
    pub const NETDEV_TO_POD: u32 = 16;
    /// To a pod on another node: encapsulated (tunnel key set) and redirected to the tunnel
    /// device.
    pub const ENCAP: u32 = 17;
    /// Tunnel device: decapsulated and delivered to a local pod with `bpf_redirect_peer`.
    pub const OVERLAY_TO_POD: u32 = 18;
    /// Tunnel device: decapsulated and handed to the host stack (the node's own address, or
    /// a reply of a flow conntrack must see, such as a Service's).
    pub const OVERLAY_PASS: u32 = 19;
    /// Tunnel device: dropped, the packet carries no tunnel key or the host's identity.
    pub const DROP_NO_TUNNEL_KEY: u32 = 20;
    /// Number of reasons in use (rows printed by `weft-agent bpf counters`).
    pub const COUNT: u32 = 21;

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
            NETDEV_PASS => "netdev_pass",
            SNAT => "snat",
            SNAT_SKIP_ENDPOINT => "snat_skip_endpoint",
            SNAT_SKIP_EXCLUDED => "snat_skip_excluded",
            SNAT_SKIP_CLUSTER => "snat_skip_cluster",
            SNAT_SKIP_REPLY => "snat_skip_reply",
            REV_SNAT => "rev_snat",
            DROP_NAT_NO_PORT => "drop_nat_no_port",
            DROP_NAT_UNSUPPORTED => "drop_nat_unsupported",
            PASS_STACK_FLOW => "pass_stack_flow",
            NETDEV_TO_POD => "netdev_to_pod",
            ENCAP => "encap",
            OVERLAY_TO_POD => "overlay_to_pod",
            OVERLAY_PASS => "overlay_pass",
            DROP_NO_TUNNEL_KEY => "drop_no_tunnel_key",
            _ => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reason;

    #[test]
    fn every_reason_below_count_has_a_unique_name() {
        let mut seen = [""; reason::COUNT as usize];
        for why in 0..reason::COUNT {
            let name = reason::name(why);
            assert_ne!(name, "unknown", "reason {why} has no name");
            assert!(!seen.contains(&name), "{name} used twice");
            seen[why as usize] = name;
        }
        assert_eq!(reason::name(reason::COUNT), "unknown");
    }
}

//! The agent's one naming table: each weft metric Cilium's agent has with the same meaning,
//! and Cilium's name, type and labels for it (applied by [`weft_k8s::metrics_naming::encode`]
//! with `--metrics-naming cilium`). Not here, so kept under weft's name: `weft_ipam_available_ips`
//! (free addresses; Cilium's agent has none, and the operator's `available_ips` is a node's
//! capacity), `weft_ipam_needed_ips`, the allocation and CNI durations, the Kubernetes API
//! durations (Cilium labels them by URL path and HTTP method, weft by verb and resource), the
//! CiliumNode writes, the map entries and attachments.

use agent_common::reason;
use weft_k8s::metrics_naming::{Labels, Relabel, Rule, label};

/// weft name → Cilium name, type (the weft metric's) and labels.
pub const RULES: &[Rule] = &[
    Rule {
        weft: "weft_ipam_pool_capacity",
        cilium: "cilium_ipam_capacity",
        help: "Addresses the node's IPAM can hand out, by family",
        relabel: Relabel::Map(family_only),
    },
    Rule {
        weft: "weft_ipam_pool_used_ips",
        cilium: "cilium_ip_addresses",
        help: "Addresses allocated on the node (pods and the router), by family",
        relabel: Relabel::Map(family_only),
    },
    Rule {
        weft: "weft_ipam_ip_allocation_ops",
        cilium: "cilium_ipam_events_total",
        help: "Addresses allocated and released, by action and family",
        relabel: Relabel::Map(allocate),
    },
    Rule {
        weft: "weft_ipam_ip_release_ops",
        cilium: "cilium_ipam_events_total",
        help: "Addresses allocated and released, by action and family",
        relabel: Relabel::Map(release),
    },
    Rule {
        weft: "weft_datapath_packets",
        cilium: "cilium_drop_count_total",
        help: "Packets the datapath dropped, by reason and direction",
        relabel: Relabel::Map(dropped),
    },
    Rule {
        weft: "weft_datapath_bytes",
        cilium: "cilium_drop_bytes_total",
        help: "Bytes of the packets the datapath dropped, by reason and direction",
        relabel: Relabel::Map(dropped),
    },
    Rule {
        weft: "weft_datapath_packets",
        cilium: "cilium_forward_count_total",
        help: "Packets the datapath did not drop, by direction",
        relabel: Relabel::Map(forwarded),
    },
    Rule {
        weft: "weft_datapath_bytes",
        cilium: "cilium_forward_bytes_total",
        help: "Bytes of the packets the datapath did not drop, by direction",
        relabel: Relabel::Map(forwarded),
    },
    Rule {
        weft: "weft_endpoints",
        cilium: "cilium_endpoint_state",
        help: "Endpoints of this node, by state",
        relabel: Relabel::Map(endpoint_state),
    },
    Rule {
        weft: "weft_endpoints",
        cilium: "cilium_endpoint",
        help: "Endpoints this agent manages",
        relabel: Relabel::Map(no_labels),
    },
    Rule::same(
        "weft_process_cpu_seconds",
        "cilium_process_cpu_seconds_total",
        "User and system CPU time spent, in seconds",
    ),
    Rule::same(
        "weft_process_resident_memory_bytes",
        "cilium_process_resident_memory_bytes",
        "Resident memory size, in bytes",
    ),
    Rule::same(
        "weft_process_virtual_memory_bytes",
        "cilium_process_virtual_memory_bytes",
        "Virtual memory size, in bytes",
    ),
    Rule::same(
        "weft_process_open_fds",
        "cilium_process_open_fds",
        "Open file descriptors",
    ),
    Rule::same(
        "weft_process_max_fds",
        "cilium_process_max_fds",
        "Maximum number of open file descriptors",
    ),
    Rule::same(
        "weft_process_start_time_seconds",
        "cilium_process_start_time_seconds",
        "Start time of the process since the Unix epoch, in seconds",
    ),
];

fn one(name: &str, value: &str) -> (String, String) {
    (name.to_owned(), value.to_owned())
}

#[expect(clippy::unnecessary_wraps, reason = "the signature of Relabel::Map")]
fn family_only(labels: &[(String, String)]) -> Option<Labels> {
    Some(vec![one("family", label(labels, "family"))])
}

#[expect(clippy::unnecessary_wraps, reason = "the signature of Relabel::Map")]
fn allocate(labels: &[(String, String)]) -> Option<Labels> {
    Some(vec![
        one("action", "allocate"),
        one("family", label(labels, "family")),
    ])
}

#[expect(clippy::unnecessary_wraps, reason = "the signature of Relabel::Map")]
fn release(labels: &[(String, String)]) -> Option<Labels> {
    Some(vec![
        one("action", "release"),
        one("family", label(labels, "family")),
    ])
}

fn dropped(labels: &[(String, String)]) -> Option<Labels> {
    let why = label(labels, "reason");
    (label(labels, "verdict") == "dropped").then(|| {
        vec![
            one("reason", drop_reason(why)),
            one("direction", direction(why)),
        ]
    })
}

/// Cilium counts every packet it does not drop as forwarded.
fn forwarded(labels: &[(String, String)]) -> Option<Labels> {
    (label(labels, "verdict") != "dropped")
        .then(|| vec![one("direction", direction(label(labels, "reason")))])
}

#[expect(clippy::unnecessary_wraps, reason = "the signature of Relabel::Map")]
fn endpoint_state(labels: &[(String, String)]) -> Option<Labels> {
    Some(vec![one("endpoint_state", label(labels, "state"))])
}

#[expect(clippy::unnecessary_wraps, reason = "the signature of Relabel::Map")]
fn no_labels(_: &[(String, String)]) -> Option<Labels> {
    Some(Vec::new())
}

/// Cilium's drop reason text where weft's drop means the same; weft's reason name otherwise
/// (a failed rewrite or redirect, and traffic that cannot be masqueraded, are each one weft
/// reason for what Cilium tells apart).
#[must_use]
pub fn drop_reason(weft: &str) -> &str {
    match weft {
        n if n == reason::name(reason::DROP_INVALID_SOURCE) => "Invalid source ip",
        n if n == reason::name(reason::DROP_MALFORMED) => "Invalid packet",
        n if n == reason::name(reason::DROP_NAT_NO_PORT) => "No mapping for NAT masquerade",
        other => other,
    }
}

/// Cilium's `direction`: `EGRESS` from an endpoint (`from_container`, and pod traffic leaving
/// through `to_netdev`), `INGRESS` to one (`from_netdev`, `from_overlay`), `UNKNOWN` for the reasons more than
/// one program counts (untouched device traffic, a failed rewrite).
#[must_use]
pub fn direction(weft: &str) -> &'static str {
    const EGRESS: [u32; 14] = [
        reason::REDIRECT_LOCAL,
        reason::PASS_STACK,
        reason::NEIGH_REPLY,
        reason::DROP_MALFORMED,
        reason::DROP_INVALID_SOURCE,
        reason::PASS_STACK_FLOW,
        reason::SNAT,
        reason::SNAT_SKIP_ENDPOINT,
        reason::SNAT_SKIP_EXCLUDED,
        reason::SNAT_SKIP_CLUSTER,
        reason::SNAT_SKIP_REPLY,
        reason::DROP_NAT_NO_PORT,
        reason::DROP_NAT_UNSUPPORTED,
        reason::ENCAP,
    ];
    const INGRESS: [u32; 5] = [
        reason::REV_SNAT,
        reason::NETDEV_TO_POD,
        reason::OVERLAY_TO_POD,
        reason::OVERLAY_PASS,
        reason::DROP_NO_TUNNEL_KEY,
    ];
    if EGRESS.iter().any(|&r| reason::name(r) == weft) {
        "EGRESS"
    } else if INGRESS.iter().any(|&r| reason::name(r) == weft) {
        "INGRESS"
    } else {
        "UNKNOWN"
    }
}

#[cfg(test)]
mod tests;

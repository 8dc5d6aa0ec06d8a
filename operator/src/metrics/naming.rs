//! The operator's one naming table: each weft operator metric Cilium's operator has with the
//! same meaning, labels and label values, and Cilium's exact name for it (applied by
//! [`weft_k8s::metrics_naming::encode`] with `--metrics-naming cilium`). Every one is a plain
//! rename: `available_ips` is a node's capacity in both (Cilium sets it so), the cloud
//! operations carry Cilium's `type`/`status`/`subnet_id` values. Cilium's two operation
//! counters have no `_total`, and keep none here. Not here, so kept under weft's name: the
//! blocks per pool, the CiliumNode writes, the lease, the Kubernetes API durations and the Azure
//! retries (Cilium has no metric of that meaning).

use weft_k8s::metrics_naming::{Relabel, Rule};

const fn same(weft: &'static str, cilium: &'static str, help: &'static str) -> Rule {
    Rule {
        weft,
        cilium,
        help,
        relabel: Relabel::Same,
    }
}

/// weft name → Cilium name (labels and type unchanged).
pub const RULES: &[Rule] = &[
    same(
        "weft_operator_ipam_nodes",
        "cilium_operator_ipam_nodes",
        "Number of nodes by category { total | in-deficit | at-capacity }",
    ),
    same(
        "weft_operator_ipam_available_ips",
        "cilium_operator_ipam_available_ips",
        "Number of available IPs on a node (its capacity)",
    ),
    same(
        "weft_operator_ipam_used_ips",
        "cilium_operator_ipam_used_ips",
        "Number of currently used IPs on a node",
    ),
    same(
        "weft_operator_ipam_needed_ips",
        "cilium_operator_ipam_needed_ips",
        "Number of IPs needed to satisfy allocation on a node",
    ),
    same(
        "weft_operator_ipam_resync",
        "cilium_operator_ipam_resync_total",
        "Number of synchronization operations with external IPAM API",
    ),
    same(
        "weft_operator_ipam_ip_allocation_ops",
        "cilium_operator_ipam_ip_allocation_ops",
        "Number of IP allocation operations",
    ),
    same(
        "weft_operator_ipam_ip_release_ops",
        "cilium_operator_ipam_ip_release_ops",
        "Number of IP release operations",
    ),
    same(
        "weft_operator_ipam_allocation_duration_seconds",
        "cilium_operator_ipam_allocation_duration_seconds",
        "Allocation ip or interface latency in seconds",
    ),
    same(
        "weft_operator_ipam_release_duration_seconds",
        "cilium_operator_ipam_release_duration_seconds",
        "Release ip or interface latency in seconds",
    ),
    same(
        "weft_operator_ipam_background_sync_duration_seconds",
        "cilium_operator_ipam_background_sync_duration_seconds",
        "Duration of the background resync of the cloud's instances",
    ),
    same(
        "weft_operator_ipam_available_ips_per_subnet",
        "cilium_operator_ipam_available_ips_per_subnet",
        "Number of available IPs per subnet ID",
    ),
    same(
        "weft_operator_azure_api_duration_seconds",
        "cilium_operator_azure_api_duration_seconds",
        "Duration of interactions with the Azure API",
    ),
    same(
        "weft_operator_azure_api_rate_limit_duration_seconds",
        "cilium_operator_azure_api_rate_limit_duration_seconds",
        "Duration of client-side rate limiting while accessing the Azure API",
    ),
];

//! The operator's one naming table: each weft operator metric Cilium's operator has with the
//! same meaning, labels and label values, and Cilium's exact name for it (applied by
//! [`weft_k8s::metrics_naming::encode`] with `--metrics-naming cilium`). Every one is a plain
//! rename: `available_ips` is a node's capacity in both (Cilium sets it so), the cloud
//! operations carry Cilium's `type`/`status`/`subnet_id` values. Cilium's two operation
//! counters have no `_total`, and keep none here. Not here, so kept under weft's name: the
//! blocks per pool, the CiliumNode writes, the lease, the Kubernetes API durations and the Azure
//! and EC2 retries (Cilium has no metric of that meaning).

use weft_k8s::metrics_naming::Rule;

/// weft name → Cilium name (labels and type unchanged).
pub const RULES: &[Rule] = &[
    Rule::same(
        "weft_operator_identity_gc_entries",
        "cilium_operator_identity_gc_entries",
        "CiliumIdentities kept (alive) and deleted by the last collection",
    ),
    Rule::same(
        "weft_operator_identity_gc_runs",
        "cilium_operator_identity_gc_runs",
        "Identity collections so far, by outcome",
    ),
    Rule::same(
        "weft_operator_ipam_nodes",
        "cilium_operator_ipam_nodes",
        "Number of nodes by category { total | in-deficit | at-capacity }",
    ),
    Rule::same(
        "weft_operator_ipam_available_ips",
        "cilium_operator_ipam_available_ips",
        "Addresses a node can hold (its capacity)",
    ),
    Rule::same(
        "weft_operator_ipam_used_ips",
        "cilium_operator_ipam_used_ips",
        "Addresses a node reports in use",
    ),
    Rule::same(
        "weft_operator_ipam_needed_ips",
        "cilium_operator_ipam_needed_ips",
        "Addresses a node needs beyond what it holds",
    ),
    Rule::same(
        "weft_operator_ipam_resync",
        "cilium_operator_ipam_resync_total",
        "Passes of the node manager over every node",
    ),
    Rule::same(
        "weft_operator_ipam_ip_allocation_ops",
        "cilium_operator_ipam_ip_allocation_ops",
        "Addresses allocated, per subnet",
    ),
    Rule::same(
        "weft_operator_ipam_ip_release_ops",
        "cilium_operator_ipam_ip_release_ops",
        "Addresses released, per subnet",
    ),
    Rule::same(
        "weft_operator_ipam_interface_creation_ops",
        "cilium_operator_ipam_interface_creation_ops",
        "Interfaces created, per subnet",
    ),
    Rule::same(
        "weft_operator_ipam_allocation_duration_seconds",
        "cilium_operator_ipam_allocation_duration_seconds",
        "Duration of address allocations, by type, status and subnet",
    ),
    Rule::same(
        "weft_operator_ipam_release_duration_seconds",
        "cilium_operator_ipam_release_duration_seconds",
        "Duration of address releases, by type, status and subnet",
    ),
    Rule::same(
        "weft_operator_ipam_background_sync_duration_seconds",
        "cilium_operator_ipam_background_sync_duration_seconds",
        "Duration of the full resync of the cloud's instances",
    ),
    Rule::same(
        "weft_operator_ipam_available_ips_per_subnet",
        "cilium_operator_ipam_available_ips_per_subnet",
        "Free addresses per subnet",
    ),
    Rule::same(
        "weft_operator_azure_api_duration_seconds",
        "cilium_operator_azure_api_duration_seconds",
        "Duration of Azure API calls, by operation and outcome",
    ),
    Rule::same(
        "weft_operator_azure_api_rate_limit_duration_seconds",
        "cilium_operator_azure_api_rate_limit_duration_seconds",
        "Time Azure API calls waited on the client-side rate limit, by operation",
    ),
    Rule::same(
        "weft_operator_ec2_api_duration_seconds",
        "cilium_operator_ec2_api_duration_seconds",
        "Duration of EC2 API calls (retries included), by operation and response code",
    ),
    Rule::same(
        "weft_operator_ec2_api_rate_limit_duration_seconds",
        "cilium_operator_ec2_api_rate_limit_duration_seconds",
        "Time EC2 API calls waited on the client-side rate limit, by operation",
    ),
    Rule::same(
        "weft_operator_process_cpu_seconds",
        "cilium_operator_process_cpu_seconds_total",
        "User and system CPU time spent, in seconds",
    ),
    Rule::same(
        "weft_operator_process_resident_memory_bytes",
        "cilium_operator_process_resident_memory_bytes",
        "Resident memory size, in bytes",
    ),
    Rule::same(
        "weft_operator_process_virtual_memory_bytes",
        "cilium_operator_process_virtual_memory_bytes",
        "Virtual memory size, in bytes",
    ),
    Rule::same(
        "weft_operator_process_open_fds",
        "cilium_operator_process_open_fds",
        "Open file descriptors",
    ),
    Rule::same(
        "weft_operator_process_max_fds",
        "cilium_operator_process_max_fds",
        "Maximum number of open file descriptors",
    ),
    Rule::same(
        "weft_operator_process_start_time_seconds",
        "cilium_operator_process_start_time_seconds",
        "Start time of the process since the Unix epoch, in seconds",
    ),
];

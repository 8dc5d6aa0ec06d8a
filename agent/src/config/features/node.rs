//! Rows: Hubble, monitor and metrics; eBPF map sizes and tuning; how the agent runs on the node.

use super::build::{HUBBLE, L7, MAPS, MONITOR, family, ignored, off, refused};
use super::{
    Area::{Agent, Observability, Tuning},
    Feature,
};

pub(super) const ROWS: &[Feature] = &[
    // Observability.
    ignored("enable-hubble", Observability, HUBBLE),
    family("hubble-", Observability, HUBBLE),
    ignored("enable-hubble-open-metrics", Observability, HUBBLE),
    ignored("monitor-aggregation", Observability, MONITOR),
    ignored("monitor-aggregation-interval", Observability, MONITOR),
    ignored("monitor-aggregation-flags", Observability, MONITOR),
    family("bpf-events-", Observability, MONITOR),
    ignored("enable-drop-events", Observability, MONITOR),
    ignored("enable-trace-events", Observability, MONITOR),
    ignored(
        "metrics-sampling-interval",
        Observability,
        "weft's metrics are read when scraped",
    ),
    ignored(
        "controller-group-metrics",
        Observability,
        "weft has no controller groups",
    ),
    ignored(
        "debug-verbose",
        Observability,
        "debug and RUST_LOG targets set what weft logs",
    ),
    ignored(
        "proxy-prometheus-port",
        Observability,
        "the Envoy proxy's metrics; weft runs no proxy",
    ),
    // Tuning.
    family("bpf-ct-", Tuning, MAPS),
    family("bpf-nat-", Tuning, MAPS),
    family("bpf-policy-", Tuning, MAPS),
    family("bpf-neigh-", Tuning, MAPS),
    family("bpf-map-", Tuning, MAPS),
    family("bpf-fragments-", Tuning, MAPS),
    ignored("bpf-distributed-lru", Tuning, MAPS),
    ignored("bpf-root", Tuning, "weft's pins are under --pin-dir"),
    ignored("cgroup-root", Tuning, "weft attaches no cgroup programs"),
    ignored("preallocate-bpf-maps", Tuning, MAPS),
    ignored("enable-bpf-clock-probe", Tuning, MAPS),
    ignored("enable-bpf-tproxy", Tuning, L7),
    ignored(
        "enable-tcx",
        Tuning,
        "weft attaches with TCX where the kernel has it (6.6+), else tc; --attach-mode chooses",
    ),
    ignored(
        "enable-ipv4-fragment-tracking",
        Tuning,
        "fragments between pods take the host stack, which reassembles them",
    ),
    ignored(
        "enable-ipv6-fragment-tracking",
        Tuning,
        "fragments between pods take the host stack, which reassembles them",
    ),
    ignored(
        "enable-bandwidth-manager",
        Tuning,
        "pods' kubernetes.io/egress-bandwidth annotations are not enforced (no limit, no \
         loss of traffic)",
    ),
    ignored(
        "enable-bbr",
        Tuning,
        "pods keep the kernel's congestion control",
    ),
    ignored(
        "enable-sctp",
        Tuning,
        "SCTP between pods passes weft's datapath like TCP",
    ),
    ignored(
        "enable-xdp-prefilter",
        Tuning,
        "weft attaches no XDP programs",
    ),
    ignored(
        "enable-pmtu-discovery",
        Tuning,
        "the kernel's path MTU discovery applies",
    ),
    ignored(
        "packetization-layer-pmtud-mode",
        Tuning,
        "the node's own net.ipv4.tcp_mtu_probing applies to pods",
    ),
    off(
        "enable-datapath-plugins",
        Tuning,
        "Cilium datapath plugins would not be loaded, and whatever they do to traffic would not \
         happen",
        "set enable-datapath-plugins: \"false\"",
    ),
    ignored(
        "datapath-plugins-state-dir",
        Tuning,
        "read only with enable-datapath-plugins, which weft refuses",
    ),
    ignored(
        "nat-map-stats-entries",
        Tuning,
        "weft's masquerade keeps no NAT statistics map",
    ),
    ignored(
        "nat-map-stats-interval",
        Tuning,
        "weft's masquerade keeps no NAT statistics map",
    ),
    // The agent on the node.
    ignored(
        "custom-cni-conf",
        Agent,
        "weft-cni's network configuration is installed by the DaemonSet (install.md)",
    ),
    ignored(
        "write-cni-conf-when-ready",
        Agent,
        "weft-cni's network configuration is installed by the DaemonSet (install.md)",
    ),
    ignored(
        "cni-exclusive",
        Agent,
        "weft leaves other CNI configurations in place: remove them yourself",
    ),
    ignored(
        "cni-log-file",
        Agent,
        "weft-cni's errors go to the runtime and the agent's log",
    ),
    refused(
        "cni-chaining-mode",
        Agent,
        &["none", ""],
        "Cilium chained on another CNI plugin (the cloud's, a veth plugin, portmap), which \
         stays the pod network; weft would replace it as the pod network",
        "weft is the pod network itself, not a chained plugin: set cni-chaining-mode: none, or \
         keep Cilium on these nodes",
    ),
    ignored(
        "enable-endpoint-health-checking",
        Agent,
        "weft runs no cilium-health endpoint",
    ),
    ignored(
        "health-check-icmp-failure-threshold",
        Agent,
        "weft runs no cilium-health endpoint",
    ),
    ignored(
        "enable-dynamic-config",
        Agent,
        "weft reads its configuration at start; restart the agent after a change",
    ),
    ignored(
        "agent-health-port",
        Agent,
        "weft-agent serves /healthz on --health-addr",
    ),
    ignored(
        "agent-health-require-k8s-connectivity",
        Agent,
        "weft-agent serves /healthz on --health-addr",
    ),
    ignored(
        "synchronize-k8s-nodes",
        Agent,
        "weft-agent watches the CiliumNodes it needs",
    ),
    ignored(
        "enable-node-selector-labels",
        Agent,
        "weft keeps no node labels in identities",
    ),
    ignored(
        "k8s-require-ipv4-pod-cidr",
        Agent,
        "in kubernetes IPAM weft waits for the Node's podCIDRs anyway",
    ),
    ignored(
        "k8s-require-ipv6-pod-cidr",
        Agent,
        "in kubernetes IPAM weft waits for the Node's podCIDRs anyway",
    ),
    ignored(
        "k8s-client-qps",
        Agent,
        "weft's watches use the Kubernetes client's defaults",
    ),
    ignored(
        "k8s-client-burst",
        Agent,
        "weft's watches use the Kubernetes client's defaults",
    ),
    ignored(
        "k8s-heartbeat-timeout",
        Agent,
        "weft's watches use the Kubernetes client's defaults",
    ),
    ignored(
        "enable-k8s-endpoint-slice",
        Agent,
        "kube-proxy reads EndpointSlices; weft does not",
    ),
    ignored(
        "enable-cilium-endpoint-slice",
        Agent,
        "weft writes CiliumEndpoints; with slices on, Cilium's operator batches them as usual",
    ),
    ignored(
        "enable-stale-cilium-endpoint-cleanup",
        Agent,
        "weft-agent removes a pod's CiliumEndpoint when the pod is deleted",
    ),
    ignored(
        "cilium-endpoint-gc-interval",
        Agent,
        "weft-agent removes a pod's CiliumEndpoint when the pod is deleted",
    ),
    ignored(
        "unmanaged-pod-watcher-interval",
        Agent,
        "weft does not restart pods it does not manage",
    ),
    ignored(
        "annotate-k8s-node",
        Agent,
        "weft writes its node's addresses to the CiliumNode, not to Node annotations",
    ),
    ignored(
        "clean-cilium-state",
        Agent,
        "weft's state is removed by `weft-agent cleanup`",
    ),
    ignored(
        "clean-cilium-bpf-state",
        Agent,
        "weft's state is removed by `weft-agent cleanup`",
    ),
    ignored(
        "enable-drift-checker",
        Agent,
        "weft has no dynamic configuration to check",
    ),
    ignored(
        "enable-k8s-api-discovery",
        Agent,
        "weft probes the API groups it needs at start",
    ),
    ignored(
        "procfs",
        Agent,
        "weft reads /proc of its own mount namespace",
    ),
    ignored(
        "set-cilium-node-taints",
        Agent,
        "weft does not add the agent-not-ready taint: register nodes with it (kubelet \
         --register-with-taints) and weft-agent removes it when ready",
    ),
    ignored(
        "set-cilium-is-up-condition",
        Agent,
        "weft sets no NetworkUnavailable condition on the Node",
    ),
];

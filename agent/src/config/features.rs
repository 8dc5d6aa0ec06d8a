//! What weft does with each of Cilium's `cilium-config` keys that it does not read itself: the
//! feature guard's table. A key is either ignored, because leaving it unread changes neither
//! connectivity nor security (each row says why), or refused at values that ask for something
//! weft does not do, because running without it would break traffic or weaken security (each
//! row says what breaks and the way out). Keys weft reads are in [`super::KEYS`] and the
//! operator's reference; a key in neither place nor here is unknown (see [`super::keys`]).
//! `cargo xtask gen-config-ref` renders this table into `docs/cilium-features.md`. Data only;
//! [`super::guard`] applies it.

/// The part of Cilium a key belongs to (the sections of the generated page).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Area {
    /// Routing between nodes.
    Routing,
    /// Services and load balancing.
    Services,
    /// Network policy and identities.
    Policy,
    /// Encryption between nodes.
    Encryption,
    /// Hubble, monitor and metrics.
    Observability,
    /// BGP, L2 announcements and external routing.
    Bgp,
    /// Egress gateway, VTEP, SRv6.
    Egress,
    /// Cluster mesh.
    ClusterMesh,
    /// Ingress, Gateway API and the Envoy proxy.
    Ingress,
    /// eBPF map sizes and datapath tuning.
    Tuning,
    /// How the agent runs on the node: CNI files, health, Kubernetes client.
    Agent,
}

impl Area {
    /// Every area, in page order.
    pub const ALL: [Area; 11] = [
        Self::Routing,
        Self::Services,
        Self::Policy,
        Self::Encryption,
        Self::Observability,
        Self::Bgp,
        Self::Egress,
        Self::ClusterMesh,
        Self::Ingress,
        Self::Tuning,
        Self::Agent,
    ];

    /// The section's title.
    #[must_use]
    pub fn title(self) -> &'static str {
        match self {
            Self::Routing => "Routing",
            Self::Services => "Services",
            Self::Policy => "Network policy and identities",
            Self::Encryption => "Encryption",
            Self::Observability => "Hubble, monitor and metrics",
            Self::Bgp => "BGP and L2 announcements",
            Self::Egress => "Egress gateway, VTEP and SRv6",
            Self::ClusterMesh => "Cluster mesh",
            Self::Ingress => "Ingress, Gateway API and the L7 proxy",
            Self::Tuning => "eBPF maps and datapath tuning",
            Self::Agent => "Running on the node",
        }
    }

    /// What weft does in this area, in a sentence or two.
    #[must_use]
    pub fn summary(self) -> &'static str {
        match self {
            Self::Routing => {
                "weft routes natively: the node's routing table carries pod traffic, with a route \
                 per remote node's pod CIDR (`auto-direct-node-routes`) or routes your network \
                 provides. There is no tunnel mode yet."
            }
            Self::Services => {
                "kube-proxy (iptables or nftables mode) serves Services; weft makes sure their \
                 replies meet conntrack. There is no kube-proxy replacement and no LoadBalancer \
                 address management."
            }
            Self::Policy => {
                "weft allocates CiliumIdentities and keeps the IPCache, but enforces no \
                 NetworkPolicy or CiliumNetworkPolicy. It always drops a pod's packets whose \
                 source address is not the pod's own."
            }
            Self::Encryption => {
                "No IPsec and no WireGuard: traffic between nodes is not encrypted."
            }
            Self::Observability => {
                "No Hubble and no monitor; weft has its own Prometheus metrics (Cilium's names \
                 where the meaning is the same) and `weft-agent status`."
            }
            Self::Bgp => "No BGP control plane and no L2 announcements.",
            Self::Egress => "No egress gateway, VTEP integration or SRv6.",
            Self::ClusterMesh => "One cluster: no cluster mesh.",
            Self::Ingress => "No Envoy: no Ingress controller, Gateway API or L7 policy.",
            Self::Tuning => {
                "weft's eBPF maps have fixed sizes of their own (docs/architecture.md)."
            }
            Self::Agent => "How weft-agent itself runs; see install.md.",
        }
    }
}

/// Which keys a row covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// This key.
    Exact(&'static str),
    /// Every key starting with this (a family such as `hubble-`).
    Prefix(&'static str),
}

impl Keys {
    /// Does this row cover `key`?
    #[must_use]
    pub fn covers(self, key: &str) -> bool {
        match self {
            Keys::Exact(k) => k == key,
            Keys::Prefix(p) => key.starts_with(p),
        }
    }

    /// The key, or the family as `prefix*`.
    #[must_use]
    pub fn label(self) -> String {
        match self {
            Keys::Exact(k) => k.to_owned(),
            Keys::Prefix(p) => format!("{p}*"),
        }
    }
}

/// What weft does with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Ignored whatever its value: why that is harmless.
    Ignored(&'static str),
    /// Harmless at these values (what weft does anyway; booleans compared as booleans; an
    /// empty value only where listed, as it means Cilium's default); any other value is refused.
    RefusedUnless {
        /// The values weft matches.
        accepted: &'static [&'static str],
        /// Another key and value under which this key is moot, whatever its value (the policy
        /// keys with `enable-policy: never`).
        moot_when: Option<(&'static str, &'static str)>,
        /// What would break if weft ran without it.
        breaks: &'static str,
        /// What to do instead.
        way_out: &'static str,
    },
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    /// The key or family.
    pub keys: Keys,
    /// Its section.
    pub area: Area,
    /// What weft does with it.
    pub rule: Rule,
}

use Area::{
    Agent, Bgp, ClusterMesh, Egress, Encryption, Ingress, Observability, Policy, Routing, Services,
    Tuning,
};

const fn ignored(key: &'static str, area: Area, why: &'static str) -> Feature {
    Feature {
        keys: Keys::Exact(key),
        area,
        rule: Rule::Ignored(why),
    }
}

const fn family(prefix: &'static str, area: Area, why: &'static str) -> Feature {
    Feature {
        keys: Keys::Prefix(prefix),
        area,
        rule: Rule::Ignored(why),
    }
}

const fn refused(
    key: &'static str,
    area: Area,
    accepted: &'static [&'static str],
    breaks: &'static str,
    way_out: &'static str,
) -> Feature {
    Feature {
        keys: Keys::Exact(key),
        area,
        rule: Rule::RefusedUnless {
            accepted,
            moot_when: None,
            breaks,
            way_out,
        },
    }
}

/// A policy key: refused when true, unless `enable-policy` is `never` (Cilium then enforces no
/// policy either).
const fn policy(key: &'static str) -> Feature {
    Feature {
        keys: Keys::Exact(key),
        area: Policy,
        rule: Rule::RefusedUnless {
            accepted: &["false"],
            moot_when: Some(("enable-policy", "never")),
            breaks: NO_POLICY,
            way_out: POLICY_WAY_OUT,
        },
    }
}

/// Refused when true.
const fn off(
    key: &'static str,
    area: Area,
    breaks: &'static str,
    way_out: &'static str,
) -> Feature {
    refused(key, area, &["false"], breaks, way_out)
}

const KPR: &str = "Cilium's eBPF Service load balancer (kube-proxy replacement), which weft does \
                   not have; kube-proxy serves Services";
const POLICY: &str = "serves network policy, which weft does not enforce (see enable-policy)";
const MONITOR: &str = "Cilium's monitor and Hubble events; weft emits none (its metrics count \
                       drops and forwards)";
const HUBBLE: &str = "Hubble; weft records no flows, so `hubble observe` finds no peer on weft's \
                      nodes";
const L7: &str = "the Envoy L7 proxy, which weft does not run";
const MAPS: &str = "sizes and tuning of Cilium's own eBPF maps; weft's maps have fixed sizes \
                    (docs/architecture.md)";
const TUNNEL_ONLY: &str = "read only with routing-mode: tunnel, which weft refuses";
const MESH: &str = "cluster mesh, which weft does not join";
const NO_POLICY: &str = "NetworkPolicy and CiliumNetworkPolicy objects are not enforced: traffic \
                         they deny flows";
const POLICY_WAY_OUT: &str = "set enable-policy: never (policies then stay unenforced by \
                              design; the other policy keys no longer matter), or keep Cilium \
                              on these nodes";

/// Every key of Cilium's cilium-config weft does not read, and what it does with it.
pub const FEATURES: &[Feature] = &[
    // Routing.
    refused(
        "routing-mode",
        Routing,
        &["native"],
        "pods on different nodes cannot reach each other: weft does not encapsulate",
        "weft routes natively; set routing-mode: native with auto-direct-node-routes: \"true\" \
         (nodes on one L2 network) or routes to every node's pod CIDR in your network",
    ),
    refused(
        "tunnel",
        Routing,
        &["disabled"],
        "pods on different nodes cannot reach each other: weft does not encapsulate",
        "set tunnel: disabled (Cilium before 1.14; newer: routing-mode: native) with \
         auto-direct-node-routes: \"true\"",
    ),
    ignored("tunnel-protocol", Routing, TUNNEL_ONLY),
    ignored("tunnel-port", Routing, TUNNEL_ONLY),
    ignored("tunnel-source-port-range", Routing, TUNNEL_ONLY),
    ignored(
        "direct-routing-skip-unreachable",
        Routing,
        "weft adds a route per remote node it can reach through a local network and skips \
         others anyway",
    ),
    ignored(
        "enable-endpoint-routes",
        Routing,
        "weft reaches each pod through its own veth from its tc programs; the setting changes \
         nothing",
    ),
    ignored(
        "enable-host-legacy-routing",
        Routing,
        "weft always passes traffic for the host and the network through the host's stack",
    ),
    ignored(
        "enable-local-node-route",
        Routing,
        "weft routes to pods through per-pod routes on the host",
    ),
    refused(
        "mtu",
        Routing,
        &["0", ""],
        "pods would get the device's MTU instead of the one set, and packets larger than the \
         path allows are dropped",
        "remove mtu: weft takes the MTU of the node's device",
    ),
    off(
        "enable-masquerade-to-route-source",
        Routing,
        "masqueraded traffic would leave with the device's first address, not the route's \
         source, and replies may not come back",
        "set enable-masquerade-to-route-source: \"false\"",
    ),
    ignored(
        "enable-ipv4-big-tcp",
        Routing,
        "BIG TCP only raises GSO/GRO sizes; pods get the usual sizes",
    ),
    ignored(
        "enable-ipv6-big-tcp",
        Routing,
        "BIG TCP only raises GSO/GRO sizes; pods get the usual sizes",
    ),
    ignored(
        "enable-ipv6-ndp",
        Routing,
        "the NDP proxy answers for pods on the node's device; weft routes to pods instead",
    ),
    ignored(
        "enable-l2-neigh-discovery",
        Routing,
        "the kernel resolves next hops between nodes for weft's routes",
    ),
    ignored(
        "arping-refresh-period",
        Routing,
        "the kernel resolves next hops",
    ),
    ignored(
        "enable-runtime-device-detection",
        Routing,
        "weft takes the devices at start (devices, or the default route's device)",
    ),
    ignored(
        "enable-ipip-termination",
        Routing,
        "IPIP termination serves Cilium's load balancer, which weft does not have",
    ),
    ignored(
        "iptables-random-fully",
        Routing,
        "weft writes no iptables MASQUERADE rule; its masquerade is in eBPF",
    ),
    ignored(
        "install-no-conntrack-iptables-rules",
        Routing,
        "an optimisation of Cilium's own rules: with weft, conntrack stays on as kube-proxy \
         needs it",
    ),
    ignored(
        "datapath-mode",
        Routing,
        "weft wires pods with veth pairs whatever the mode (netkit is not supported)",
    ),
    ignored(
        "vlan-bpf-bypass",
        Routing,
        "weft's programs do not filter VLAN traffic",
    ),
    // Services.
    refused(
        "kube-proxy-replacement",
        Services,
        &["false", "disabled", "partial"],
        "Services stop working: weft has no eBPF load balancer",
        "keep kube-proxy running (iptables or nftables mode) and set kube-proxy-replacement: \
         \"false\"",
    ),
    family("bpf-lb-", Services, KPR),
    ignored("kube-proxy-replacement-healthz-bind-address", Services, KPR),
    ignored("enable-node-port", Services, KPR),
    off(
        "enable-host-port",
        Services,
        "pods' hostPort mappings would not be served: kube-proxy does not serve them and \
         weft's CNI configuration has no portmap plugin",
        "set enable-host-port: \"false\", or add the portmap plugin to weft's conflist",
    ),
    ignored("enable-external-ips", Services, KPR),
    ignored("enable-session-affinity", Services, KPR),
    ignored("enable-svc-source-range-check", Services, KPR),
    ignored("enable-health-check-nodeport", Services, KPR),
    ignored("enable-health-check-loadbalancer-ip", Services, KPR),
    ignored("enable-internal-traffic-policy", Services, KPR),
    ignored("enable-k8s-terminating-endpoint", Services, KPR),
    ignored("node-port-bind-protection", Services, KPR),
    ignored("enable-auto-protect-node-port-range", Services, KPR),
    ignored("service-no-backend-response", Services, KPR),
    ignored("enable-nat46x64-gateway", Services, KPR),
    ignored("enable-no-service-endpoints-routable", Services, KPR),
    ignored("enable-service-topology", Services, KPR),
    ignored("enable-dynamic-source-lookup-nodeport", Services, KPR),
    off(
        "enable-local-redirect-policy",
        Services,
        "CiliumLocalRedirectPolicy objects would not redirect: traffic goes to the Service's \
         usual backends",
        "set enable-local-redirect-policy: \"false\"",
    ),
    ignored(
        "default-lb-service-ipam",
        Services,
        "weft assigns no LoadBalancer addresses (no CiliumLoadBalancerIPPool); use your \
         cloud's controller or MetalLB",
    ),
    ignored(
        "enable-lb-ipam",
        Services,
        "weft assigns no LoadBalancer addresses (no CiliumLoadBalancerIPPool)",
    ),
    ignored(
        "enable-node-ipam",
        Services,
        "weft assigns no LoadBalancer addresses",
    ),
    // Policy and identities.
    refused(
        "enable-policy",
        Policy,
        &["never"],
        NO_POLICY,
        POLICY_WAY_OUT,
    ),
    policy("enable-k8s-networkpolicy"),
    policy("enable-cilium-network-policy"),
    policy("enable-cilium-clusterwide-network-policy"),
    off(
        "enable-host-firewall",
        Policy,
        "host policies (CiliumClusterwideNetworkPolicy with a nodeSelector) are not enforced: \
         the nodes are open",
        "set enable-host-firewall: \"false\" and protect the nodes otherwise",
    ),
    refused(
        "identity-allocation-mode",
        Policy,
        &["crd"],
        "weft allocates identities as CiliumIdentity objects; with a kvstore, Cilium and weft \
         would give the same labels different numbers",
        "set identity-allocation-mode: crd",
    ),
    refused(
        "identity-management-mode",
        Policy,
        &["agent"],
        "weft-agent allocates identities itself; a second allocator in the operator would give \
         the same labels different numbers",
        "set identity-management-mode: agent",
    ),
    ignored("enable-l7-proxy", Policy, POLICY),
    ignored("mesh-auth-enabled", Policy, POLICY),
    family("mesh-auth-", Policy, POLICY),
    ignored("policy-cidr-match-mode", Policy, POLICY),
    ignored("policy-default-local-cluster", Policy, POLICY),
    ignored("enable-non-default-deny-policies", Policy, POLICY),
    ignored("enable-policy-secrets-sync", Policy, POLICY),
    ignored("policy-secrets-namespace", Policy, POLICY),
    ignored("policy-secrets-only-from-secrets-namespace", Policy, POLICY),
    ignored("policy-deny-response", Policy, POLICY),
    ignored(
        "enable-endpoint-lockdown-on-policy-overflow",
        Policy,
        POLICY,
    ),
    ignored("policy-audit-mode", Policy, POLICY),
    family("tofqdns-", Policy, POLICY),
    family("dnsproxy-", Policy, POLICY),
    ignored("enable-well-known-identities", Policy, POLICY),
    ignored(
        "enable-source-ip-verification",
        Policy,
        "weft always drops a pod's packets whose source address is not the pod's own",
    ),
    ignored(
        "enable-identity-mark",
        Policy,
        "weft carries no identity in the packet mark",
    ),
    // Encryption.
    off(
        "enable-ipsec",
        Encryption,
        "traffic between nodes would leave unencrypted",
        "set enable-ipsec: \"false\" only if unencrypted traffic between nodes is acceptable",
    ),
    off(
        "enable-wireguard",
        Encryption,
        "traffic between nodes would leave unencrypted",
        "set enable-wireguard: \"false\" only if unencrypted traffic between nodes is acceptable",
    ),
    off(
        "encrypt-node",
        Encryption,
        "traffic between nodes would leave unencrypted",
        "set encrypt-node: \"false\"",
    ),
    off(
        "enable-encryption-strict-mode",
        Encryption,
        "unencrypted pod traffic between nodes would not be dropped",
        "set enable-encryption-strict-mode: \"false\"",
    ),
    family(
        "ipsec-",
        Encryption,
        "read only with enable-ipsec, which weft refuses",
    ),
    family(
        "wireguard-",
        Encryption,
        "read only with enable-wireguard, which weft refuses",
    ),
    ignored(
        "encryption-strict-mode-cidr",
        Encryption,
        "read only with enable-encryption-strict-mode, which weft refuses",
    ),
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
    // BGP and L2.
    off(
        "enable-bgp-control-plane",
        Bgp,
        "pod CIDRs and Service addresses would not be announced to your routers",
        "set enable-bgp-control-plane: \"false\" and route the pod CIDRs otherwise (static \
         routes, another BGP speaker)",
    ),
    family(
        "bgp-",
        Bgp,
        "read only with enable-bgp-control-plane, which weft refuses",
    ),
    family(
        "enable-bgp-",
        Bgp,
        "read only with enable-bgp-control-plane, which weft refuses",
    ),
    off(
        "enable-l2-announcements",
        Bgp,
        "LoadBalancer and external addresses would not be answered for on the local network",
        "set enable-l2-announcements: \"false\" and announce them otherwise (MetalLB)",
    ),
    family(
        "l2-announcements-",
        Bgp,
        "read only with enable-l2-announcements, which weft refuses",
    ),
    // Egress.
    off(
        "enable-egress-gateway",
        Egress,
        "CiliumEgressGatewayPolicy objects would not steer traffic: it leaves from each pod's \
         own node",
        "set enable-egress-gateway: \"false\"",
    ),
    off(
        "enable-ipv4-egress-gateway",
        Egress,
        "CiliumEgressGatewayPolicy objects would not steer traffic: it leaves from each pod's \
         own node",
        "set enable-ipv4-egress-gateway: \"false\"",
    ),
    family(
        "egress-gateway-",
        Egress,
        "read only with the egress gateway, which weft refuses",
    ),
    off(
        "enable-vtep",
        Egress,
        "traffic to the VTEP CIDRs would not be encapsulated to the VTEPs",
        "set enable-vtep: \"false\"",
    ),
    family(
        "vtep-",
        Egress,
        "read only with enable-vtep, which weft refuses",
    ),
    off(
        "enable-srv6",
        Egress,
        "SRv6 policies would not steer traffic",
        "set enable-srv6: \"false\"",
    ),
    // Cluster mesh.
    refused(
        "cluster-id",
        ClusterMesh,
        &["0", ""],
        "identities of this cluster would clash with those of the others in the mesh, and \
         policy in the other clusters would match the wrong pods",
        "weft does not join a cluster mesh: set cluster-id: \"0\"",
    ),
    ignored("max-connected-clusters", ClusterMesh, MESH),
    family("clustermesh-", ClusterMesh, MESH),
    ignored("enable-cluster-aware-addressing", ClusterMesh, MESH),
    ignored("enable-inter-cluster-snat", ClusterMesh, MESH),
    // Ingress, Gateway API, L7.
    off(
        "enable-envoy-config",
        Ingress,
        "CiliumEnvoyConfig objects would not be applied",
        "set enable-envoy-config: \"false\"",
    ),
    off(
        "enable-ingress-controller",
        Ingress,
        "Ingress objects of class cilium would not be served",
        "set enable-ingress-controller: \"false\" and run another Ingress controller",
    ),
    off(
        "enable-gateway-api",
        Ingress,
        "Gateway API objects of class cilium would not be served",
        "set enable-gateway-api: \"false\" and run another Gateway API implementation",
    ),
    family("gateway-api-", Ingress, L7),
    family("ingress-", Ingress, L7),
    family("envoy-", Ingress, L7),
    family("proxy-", Ingress, L7),
    ignored("external-envoy-proxy", Ingress, L7),
    ignored("enable-xt-socket-fallback", Ingress, L7),
    ignored("http-retry-count", Ingress, L7),
    ignored("http-stream-idle-timeout", Ingress, L7),
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

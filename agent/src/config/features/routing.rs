//! Rows: routing between nodes, BGP and L2 announcements, egress gateway, VTEP and SRv6.

use super::build::{family, ignored, off, refused};
use super::{
    Area::{Bgp, Egress, Routing},
    Feature,
};

pub(super) const ROWS: &[Feature] = &[
    // Routing.
    refused(
        "tunnel",
        Routing,
        &["disabled"],
        "weft takes the routing mode from routing-mode (Cilium 1.14 and later), not from this \
         key: without routing-mode it routes natively, and pods on different nodes may not \
         reach each other",
        "remove tunnel and set routing-mode: tunnel, or tunnel: disabled with routing-mode: \
         native",
    ),
    ignored(
        "tunnel-source-port-range",
        Routing,
        "the kernel picks the outer UDP source port from a hash of the inner flow in the \
         ephemeral range (Cilium's default, 0-0)",
    ),
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
];

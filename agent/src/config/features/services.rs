//! Rows: Services (kube-proxy stays) and Ingress, Gateway API and the L7 proxy.

use super::build::{KPR, L7, family, ignored, off, refused};
use super::{
    Area::{Ingress, Services},
    Feature,
};

pub(super) const ROWS: &[Feature] = &[
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
];

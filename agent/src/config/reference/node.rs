//! The rows of the keys every store reads, as Cilium's agent does: IPAM mode and families,
//! masquerading, routing, identity, the taints, metrics and logging. Data and the setter of
//! each value; [`super::REFERENCE`] lists them in the documentation's order.

use std::path::PathBuf;

use super::{
    Cilium,
    DefaultValue::{Empty, Value},
    IN_TELEMETRY, Key, Modes, SWITCH, Stores, VALUE, agent, doc,
};
use crate::ipam::mode::IpamMode::{AlibabaCloud, Azure, Crd, MultiPool};

/// The `ipam` row.
pub const IPAM: Key = agent(
    "ipam",
    Value("cluster-pool"),
    Modes::All,
    "IPAM mode: kubernetes, cluster-pool, multi-pool, crd, eni, azure or alibabacloud \
         (Cilium's delegated-plugin is refused)",
    |c, v| {
        c.ipam = v.mode()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `ipam-default-ip-pool` row.
pub const IPAM_DEFAULT_IP_POOL: Key = agent(
    "ipam-default-ip-pool",
    Value("default"),
    Modes::Only(&[MultiPool]),
    "pool of a pod that no annotation or CiliumPodIPPool selector places elsewhere",
    |c, v| {
        if !v.value.is_empty() {
            v.value.clone_into(&mut c.default_pool);
        }
        Ok(())
    },
)
.flag(VALUE);

/// The `ipam-multi-pool-pre-allocation` row.
pub const IPAM_MULTI_POOL_PRE_ALLOCATION: Key = agent(
    "ipam-multi-pool-pre-allocation",
    Empty("`<ipam-default-ip-pool>=8`"),
    Modes::Only(&[MultiPool]),
    "free addresses to keep per pool, `pool=count,…` or a JSON object",
    |c, v| {
        v.value.clone_into(&mut c.multi_pool_pre_allocation);
        Ok(())
    },
)
.flag(VALUE);

/// The `enable-ipv4` row.
pub const ENABLE_IPV4: Key = agent(
    "enable-ipv4",
    Value("true"),
    Modes::All,
    "allocate IPv4 addresses (at least one family must be on)",
    |c, v| {
        c.enable_ipv4 = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `enable-ipv6` row.
pub const ENABLE_IPV6: Key = agent(
    "enable-ipv6",
    Value("false"),
    Modes::All,
    "allocate IPv6 addresses",
    |c, v| {
        c.enable_ipv6 = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `ipam-cilium-node-update-rate` row.
pub const IPAM_CILIUM_NODE_UPDATE_RATE: Key = agent(
    "ipam-cilium-node-update-rate",
    Value("15s"),
    Modes::All,
    "minimum interval between two writes of the own CiliumNode (Go duration)",
    |c, v| {
        c.node_update_rate = v.duration()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `enable-health-checking` row.
pub const ENABLE_HEALTH_CHECKING: Key = agent(
    "enable-health-checking",
    Value("true"),
    Modes::Only(&[Crd, Azure, AlibabaCloud]),
    "the CRD allocator waits for 2 addresses before it is ready",
    |c, v| {
        c.health_checking = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `only-masquerade-default-pool` row.
pub const ONLY_MASQUERADE_DEFAULT_POOL: Key = agent(
    "only-masquerade-default-pool",
    Value("false"),
    Modes::Only(&[MultiPool]),
    "masquerade only pods of the default pool (requires enable-bpf-masquerade)",
    |c, v| {
        c.only_masquerade_default_pool = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `enable-bpf-masquerade` row.
pub const ENABLE_BPF_MASQUERADE: Key = agent(
    "enable-bpf-masquerade",
    Value("false"),
    Modes::All,
    "masquerade pod traffic leaving through the native devices in eBPF (`to_netdev`)",
    |c, v| {
        c.enable_bpf_masquerade = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `enable-ipv4-masquerade` row.
pub const ENABLE_IPV4_MASQUERADE: Key = agent(
    "enable-ipv4-masquerade",
    Value("true"),
    Modes::All,
    "masquerade IPv4 pod traffic (with enable-bpf-masquerade)",
    |c, v| {
        c.enable_ipv4_masquerade = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `enable-ipv6-masquerade` row.
pub const ENABLE_IPV6_MASQUERADE: Key = agent(
    "enable-ipv6-masquerade",
    Value("true"),
    Modes::All,
    "masquerade IPv6 pod traffic (with enable-bpf-masquerade and enable-ipv6)",
    |c, v| {
        c.enable_ipv6_masquerade = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `devices` row.
pub const DEVICES: Key = agent(
    "devices",
    Empty("the device of the IPv4 default route, else of the IPv6 one"),
    Modes::All,
    "native devices, separated by commas or spaces",
    |c, v| {
        c.devices = v
            .value
            .split([',', ' '])
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(())
    },
)
.flag(VALUE);

/// The `enable-ip-masq-agent` row.
pub const ENABLE_IP_MASQ_AGENT: Key = agent(
    "enable-ip-masq-agent",
    Value("false"),
    Modes::All,
    "read non-masquerade CIDRs from the ip-masq-agent file",
    |c, v| {
        c.enable_ip_masq_agent = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `ip-masq-agent-config-path` row.
pub const IP_MASQ_AGENT_CONFIG_PATH: Key = agent(
    "ip-masq-agent-config-path",
    Value(super::super::DEFAULT_IP_MASQ_AGENT_CONFIG),
    Modes::All,
    "the ip-masq-agent file (YAML or JSON; watched, edits apply without a restart)",
    |c, v| {
        if !v.value.is_empty() {
            c.ip_masq_agent_config_path = PathBuf::from(v.value);
        }
        Ok(())
    },
)
.flag(VALUE);

/// The `ipv4-native-routing-cidr` row.
pub const IPV4_NATIVE_ROUTING_CIDR: Key = agent(
    "ipv4-native-routing-cidr",
    Empty("none; eni: the VPC's primary CIDR, azure: the node's subnet, from the CiliumNode"),
    Modes::All,
    "IPv4 destinations that keep the pod address (not masqueraded)",
    |c, v| {
        if let Some(cidr) = v.cidr("IPv4")? {
            c.ipv4_native_routing_cidr = Some(cidr);
        }
        Ok(())
    },
)
.flag(VALUE);

/// The `ipv6-native-routing-cidr` row.
pub const IPV6_NATIVE_ROUTING_CIDR: Key = agent(
    "ipv6-native-routing-cidr",
    Empty("none"),
    Modes::All,
    "IPv6 destinations that keep the pod address (not masqueraded)",
    |c, v| {
        if let Some(cidr) = v.cidr("IPv6")? {
            c.ipv6_native_routing_cidr = Some(cidr);
        }
        Ok(())
    },
)
.flag(VALUE);

/// The `auto-direct-node-routes` row.
pub const AUTO_DIRECT_NODE_ROUTES: Key = agent(
    "auto-direct-node-routes",
    Value("false"),
    Modes::All,
    "route other nodes' pod CIDRs via their addresses (nodes on one L2 network)",
    |c, v| {
        c.auto_direct_node_routes = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `routing-mode` row.
pub const ROUTING_MODE: Key = agent(
    "routing-mode",
    Value("native"),
    Modes::All,
    "how pods on other nodes are reached: native (routed by the network or \
         auto-direct-node-routes) or tunnel (VXLAN between the nodes' addresses); empty is \
         Cilium's default, tunnel",
    |c, v| {
        c.routing_mode = v.routing_mode()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `tunnel-protocol` row.
pub const TUNNEL_PROTOCOL: Key = agent(
    "tunnel-protocol",
    Value("vxlan"),
    Modes::All,
    "encapsulation in tunnel mode: vxlan (geneve is refused: no geneve module on the kernels \
         weft is tested on)",
    |c, v| {
        c.tunnel.protocol = v.tunnel_protocol()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `tunnel-port` row.
pub const TUNNEL_PORT: Key = agent(
    "tunnel-port",
    Value("0"),
    Modes::All,
    "UDP port of the tunnel (0: 8472 for vxlan)",
    |c, v| {
        c.tunnel.port = v.port()?;
        Ok(())
    },
)
.flag(VALUE);

/// The `cluster-name` row.
pub const CLUSTER_NAME: Key = agent(
    "cluster-name",
    Value("default"),
    Modes::All,
    "cluster name in every pod's security labels",
    |c, v| {
        if !v.value.is_empty() {
            v.value.clone_into(&mut c.cluster_name);
        }
        Ok(())
    },
)
.flag(VALUE);

/// The `remove-cilium-node-taints` row.
pub const REMOVE_CILIUM_NODE_TAINTS: Key = doc(
    "remove-cilium-node-taints",
    Value("true"),
    Modes::All,
    Stores::Kubernetes,
    Cilium::Operator,
    "remove agent-not-ready-taint-key from the own Node once ready (Cilium's operator does \
             it for its agents)",
    |c, v| {
        c.remove_node_taints = v.bool()?;
        Ok(())
    },
);

/// The `prometheus-serve-addr` row.
pub const PROMETHEUS_SERVE_ADDR: Key = agent(
    "prometheus-serve-addr",
    Empty("`/metrics` on `--health-addr` only"),
    Modes::All,
    "also serve `/metrics` here (`:9962`: every interface); the `--prometheus-serve-addr` flag (`WEFT_PROMETHEUS_SERVE_ADDR`) wins",
    |c, v| {
        if !v.value.is_empty() {
            c.prometheus_serve_addr = Some(
                crate::cli::parse_listen_addr(v.value)
                    .map_err(|_| v.bad("host:port, or :port for every interface (:9962)"))?,
            );
        }
        Ok(())
    },
);

/// The `bypass-ip-availability-upon-restore` row.
pub const BYPASS_IP_AVAILABILITY_UPON_RESTORE: Key = agent(
    "bypass-ip-availability-upon-restore",
    Value("false"),
    Modes::Only(&[Crd, Azure, AlibabaCloud]),
    "restore a recorded IPv4 address that left `spec.ipam.pool` instead of reporting it",
    |c, v| {
        c.bypass_ip_availability_upon_restore = v.bool()?;
        Ok(())
    },
)
.flag(SWITCH);

/// The `false` row.
pub const FALSE: Key = agent(
    weft_k8s::telemetry::KEYS[0],
    Value("false"),
    Modes::All,
    "log debug messages (log-level wins when both are set; `RUST_LOG` beats both)",
    IN_TELEMETRY,
);

/// The `info` row.
pub const INFO: Key = agent(
    weft_k8s::telemetry::KEYS[1],
    Value("info"),
    Modes::All,
    "trace, debug, info, warn or error (`RUST_LOG`, when set, wins)",
    IN_TELEMETRY,
);

/// The `text-ts` row.
pub const TEXT_TS: Key = agent(
    weft_k8s::telemetry::KEYS[2],
    Value("text-ts"),
    Modes::All,
    "text, text-ts, json or json-ts (`-ts`: with a timestamp)",
    IN_TELEMETRY,
);

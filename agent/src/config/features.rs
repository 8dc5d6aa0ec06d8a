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
                "weft routes natively (`routing-mode: native`: the node's routing table carries \
                 pod traffic, with a route per remote node's pod CIDR (`auto-direct-node-routes`) \
                 or routes your network provides) or through a VXLAN tunnel between the nodes' \
                 addresses (`routing-mode: tunnel`, Cilium's default). Geneve is not supported."
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

mod build;
mod node;
mod routing;
mod security;
mod services;

/// Every key of Cilium's cilium-config weft does not read, and what it does with it.
pub fn all() -> impl Iterator<Item = &'static Feature> {
    [routing::ROWS, services::ROWS, security::ROWS, node::ROWS]
        .into_iter()
        .flatten()
}

//! What the node knows about the rest of the cluster, kept in the datapath incrementally: other
//! nodes' addresses at `remote-node` identity, their pod CIDRs at `init`, and their pods (from
//! their CiliumEndpoints) at their identity with the node as tunnel endpoint, in the IPCache;
//! and kernel routes to other nodes' pod CIDRs: via their addresses with
//! `auto-direct-node-routes`, through the tunnel device in tunnel routing (the host's own
//! traffic and what the stack forwards, such as Service flows kube-proxy translated, there
//! being no eBPF program on that path). In tunnel routing every tunnel endpoint is the node's
//! address of the underlay's family, whatever the family of the prefix.
//!
//! Each sync diffs the snapshot's CiliumNodes and CiliumEndpoints against the ones applied
//! last ([`imbl::OrdMap::diff`] skips what the two share), so its cost follows what changed,
//! not the size of the cluster, and only changed entries are written.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
    sync::Arc,
};

use agent_common::identity;
use imbl::{OrdMap, ordmap::DiffItem};
use ipnet::IpNet;
use tracing::{info, warn};

use super::{State, chain};
use crate::{
    crd::node::CiliumNode,
    datapath::{
        Datapath, DatapathError,
        ipcache::{IpcacheEntry, host_prefix},
        netlink::{self, tunnel::TunnelRoute},
    },
    store::{EndpointSummary, Snapshot},
};

/// The addresses a CiliumNode announces (`spec.addresses`).
#[must_use]
pub fn node_ips(node: &CiliumNode) -> Vec<IpAddr> {
    node.spec
        .addresses
        .iter()
        .filter_map(|a| a.ip.parse().ok())
        .collect()
}

/// Pod CIDRs of a node: `spec.ipam.podCIDRs` and every `spec.ipam.pools.allocated` CIDR.
fn pod_cidrs(node: &CiliumNode) -> Vec<IpNet> {
    let ipam = node.ipam_spec();
    let mut out: Vec<IpNet> = ipam.pod_cidrs.iter().map(IpNet::trunc).collect();
    if let Some(pools) = &ipam.pools {
        out.extend(
            pools
                .allocated
                .iter()
                .flat_map(|a| a.cidrs.iter().map(IpNet::trunc)),
        );
    }
    out
}

/// The address of `node` to tunnel to for a prefix of the family of `prefix`: of the
/// underlay's family in tunnel routing (`underlay_v6`), else of the prefix's own.
fn endpoint_for(ips: &[IpAddr], prefix: IpAddr, underlay_v6: Option<bool>) -> Option<IpAddr> {
    let v4 = underlay_v6.map_or(prefix.is_ipv4(), |v6| !v6);
    ips.iter().find(|ip| ip.is_ipv4() == v4).copied()
}

/// The IPCache entries another node asks for: its addresses at `remote-node`, and its pod
/// CIDRs at `init` with the node as tunnel endpoint (cluster addresses before any of its pods
/// is published, so traffic to them is never taken for the world and masqueraded; a pod's own
/// /32 overrides it).
fn node_entries(node: &CiliumNode, underlay_v6: Option<bool>) -> Vec<(IpNet, IpcacheEntry)> {
    let ips = node_ips(node);
    let mut out: Vec<(IpNet, IpcacheEntry)> = ips
        .iter()
        .map(|ip| {
            (
                host_prefix(*ip),
                IpcacheEntry::identity(identity::REMOTE_NODE),
            )
        })
        .collect();
    for cidr in pod_cidrs(node) {
        let via = endpoint_for(&ips, cidr.addr(), underlay_v6);
        out.push((
            cidr,
            IpcacheEntry {
                identity: identity::INIT,
                tunnel_endpoint: via,
                flags: 0,
            },
        ));
    }
    out
}

/// The IPCache entries a pod of another node asks for: each address at the pod's identity,
/// with its node as tunnel endpoint. Pods on this node (`own_ips`) and pods without an
/// identity ask for none.
fn endpoint_entries(
    endpoint: &EndpointSummary,
    own_ips: &BTreeSet<IpAddr>,
) -> Vec<(IpNet, IpcacheEntry)> {
    let Some(identity) = endpoint.identity else {
        return Vec::new();
    };
    if endpoint.node_ip.is_some_and(|ip| own_ips.contains(&ip)) {
        return Vec::new();
    }
    endpoint
        .ips
        .iter()
        .map(|ip| {
            (
                host_prefix(*ip),
                IpcacheEntry {
                    identity,
                    tunnel_endpoint: endpoint.node_ip,
                    flags: 0,
                },
            )
        })
        .collect()
}

/// The entries some objects ask for one prefix, oldest first; the newest is the one in the
/// map. Two objects ask for the same prefix when an address is reused before the old pod's
/// CiliumEndpoint is gone: when either goes, the other's entry stays.
type Claims = Vec<IpcacheEntry>;

/// The rest of the cluster as applied to the datapath.
#[derive(Debug, Default)]
pub(crate) struct Remote {
    /// The CiliumNodes and CiliumEndpoints applied last (the next snapshot is diffed against
    /// them; they share their structure with the store's snapshots).
    nodes: OrdMap<String, CiliumNode>,
    endpoints: OrdMap<(String, String), Arc<EndpointSummary>>,
    /// This node's addresses when last applied (CiliumEndpoints on them are local).
    own_ips: BTreeSet<IpAddr>,
    /// What is asked for each prefix.
    claims: HashMap<IpNet, Claims>,
    /// Remote entries an earlier run left in the pinned map, until the first sync (which
    /// removes those nothing asks for any more).
    inherited: HashMap<IpNet, IpcacheEntry>,
    /// Prefixes whose last write failed, retried on every sync.
    failed: BTreeSet<IpNet>,
    /// Routes to other nodes' pod CIDRs, as installed.
    routes: BTreeMap<IpNet, NodeRoute>,
    /// In tunnel routing, whether the underlay is IPv6 (`None`: native routing).
    underlay_v6: Option<bool>,
}

/// How the kernel reaches other nodes' pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Routing {
    /// No routes of weft's (the network routes pod CIDRs).
    None,
    /// `auto-direct-node-routes`: via the node's address.
    Direct,
    /// Tunnel routing: through the tunnel device `oif`, at the pods' MTU `mtu`.
    Tunnel {
        /// The tunnel device's ifindex.
        oif: u32,
        /// The pods' MTU.
        mtu: u32,
    },
}

/// One route to a node's pod CIDR, as installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeRoute {
    /// `<cidr> via <node>`.
    Via(IpAddr),
    /// `<cidr> encap … dev <tunnel>`.
    Tunnel(TunnelRoute),
}

impl NodeRoute {
    async fn replace(&self, cidr: IpNet) -> Result<(), netlink::NetlinkError> {
        match self {
            Self::Via(via) => netlink::replace_node_route(cidr, *via).await,
            Self::Tunnel(route) => netlink::tunnel::replace_route(route).await,
        }
    }

    async fn delete(&self, cidr: IpNet) -> Result<bool, netlink::NetlinkError> {
        match self {
            Self::Via(via) => netlink::delete_node_route(cidr, *via).await,
            Self::Tunnel(route) => netlink::tunnel::delete_route(route).await,
        }
    }

    fn via(&self) -> IpAddr {
        match self {
            Self::Via(via) => *via,
            Self::Tunnel(route) => route.endpoint,
        }
    }
}

impl Remote {
    /// Start from what an earlier run left in the IPCache: every entry but the world
    /// prefixes, the node's own (`host`) addresses and the pods in the endpoints map.
    ///
    /// # Errors
    /// A map cannot be read.
    pub(crate) fn inherit(datapath: &mut Datapath) -> Result<Self, DatapathError> {
        let local: BTreeSet<IpAddr> = datapath
            .list_endpoints()?
            .into_iter()
            .map(|e| e.ip)
            .collect();
        let inherited = datapath
            .list_ipcache()?
            .into_iter()
            .filter(|r| r.prefix.prefix_len() > 0 && r.identity != identity::HOST)
            .filter(|r| {
                r.prefix.prefix_len() < r.prefix.max_prefix_len()
                    || !local.contains(&r.prefix.addr())
            })
            .map(|r| (r.prefix, r.entry()))
            .collect();
        Ok(Self {
            inherited,
            ..Self::default()
        })
    }

    /// Tunnel routing over an IPv6 (`Some(true)`) or IPv4 underlay, or native (`None`): which
    /// of a node's addresses its entries tunnel to. Set before the first sync.
    pub(crate) fn with_underlay(self, underlay_v6: Option<bool>) -> Self {
        Self {
            underlay_v6,
            ..self
        }
    }

    /// Take in `snapshot`: what changed since the last call, as the entry each touched prefix
    /// should now have in the map (`None`: remove it), plus every prefix whose write failed.
    fn apply(
        &mut self,
        snapshot: &Snapshot,
        own_ips: &BTreeSet<IpAddr>,
    ) -> Vec<(IpNet, Option<IpcacheEntry>)> {
        // The entry each touched prefix had in the map before.
        let mut before: HashMap<IpNet, Option<IpcacheEntry>> = self
            .inherited
            .drain()
            .map(|(prefix, entry)| (prefix, Some(entry)))
            .collect();
        let nodes = std::mem::take(&mut self.nodes);
        let mut endpoints = std::mem::take(&mut self.endpoints);
        if *own_ips != self.own_ips {
            // Which CiliumEndpoints are this node's changed: take them all in anew.
            for endpoint in endpoints.values() {
                self.endpoint_changed(Some(endpoint), None, &mut before);
            }
            endpoints = OrdMap::new();
            own_ips.clone_into(&mut self.own_ips);
        }
        for change in nodes.diff(&snapshot.nodes) {
            let (name, old, new) = match change {
                DiffItem::Add(name, new) => (name, None, Some(new)),
                DiffItem::Update {
                    old: (name, old),
                    new: (_, new),
                } => (name, Some(old), Some(new)),
                DiffItem::Remove(name, old) => (name, Some(old), None),
            };
            self.node_changed(&snapshot.node_name, name, old, new, &mut before);
        }
        for change in endpoints.diff(&snapshot.endpoints) {
            let (old, new) = match change {
                DiffItem::Add(_, new) => (None, Some(new)),
                DiffItem::Update {
                    old: (_, old),
                    new: (_, new),
                } => (Some(old), Some(new)),
                DiffItem::Remove(_, old) => (Some(old), None),
            };
            self.endpoint_changed(old, new, &mut before);
        }
        self.nodes = snapshot.nodes.clone();
        self.endpoints = snapshot.endpoints.clone();
        let retries: Vec<IpNet> = self
            .failed
            .iter()
            .filter(|p| !before.contains_key(p))
            .copied()
            .collect();
        let mut writes: Vec<(IpNet, Option<IpcacheEntry>)> = before
            .into_iter()
            .filter_map(|(prefix, was)| {
                let now = self.winner(prefix);
                (now != was || self.failed.contains(&prefix)).then_some((prefix, now))
            })
            .collect();
        writes.extend(retries.into_iter().map(|p| (p, self.winner(p))));
        writes
    }

    fn winner(&self, prefix: IpNet) -> Option<IpcacheEntry> {
        self.claims.get(&prefix).and_then(|c| c.last()).copied()
    }

    fn node_changed(
        &mut self,
        own_name: &str,
        name: &str,
        old: Option<&CiliumNode>,
        new: Option<&CiliumNode>,
        before: &mut HashMap<IpNet, Option<IpcacheEntry>>,
    ) {
        if name == own_name {
            return;
        }
        let underlay = self.underlay_v6;
        for (prefix, entry) in old.map(|n| node_entries(n, underlay)).unwrap_or_default() {
            self.release(prefix, entry, before);
        }
        for (prefix, entry) in new.map(|n| node_entries(n, underlay)).unwrap_or_default() {
            self.claim(prefix, entry, before);
        }
    }

    fn endpoint_changed(
        &mut self,
        old: Option<&Arc<EndpointSummary>>,
        new: Option<&Arc<EndpointSummary>>,
        before: &mut HashMap<IpNet, Option<IpcacheEntry>>,
    ) {
        let own_ips = std::mem::take(&mut self.own_ips);
        for (prefix, entry) in old
            .map(|e| endpoint_entries(e, &own_ips))
            .unwrap_or_default()
        {
            self.release(prefix, entry, before);
        }
        for (prefix, entry) in new
            .map(|e| endpoint_entries(e, &own_ips))
            .unwrap_or_default()
        {
            self.claim(prefix, entry, before);
        }
        self.own_ips = own_ips;
    }

    fn claim(
        &mut self,
        prefix: IpNet,
        entry: IpcacheEntry,
        before: &mut HashMap<IpNet, Option<IpcacheEntry>>,
    ) {
        let claims = self.claims.entry(prefix).or_default();
        before
            .entry(prefix)
            .or_insert_with(|| claims.last().copied());
        claims.push(entry);
    }

    fn release(
        &mut self,
        prefix: IpNet,
        entry: IpcacheEntry,
        before: &mut HashMap<IpNet, Option<IpcacheEntry>>,
    ) {
        let Some(claims) = self.claims.get_mut(&prefix) else {
            return;
        };
        before
            .entry(prefix)
            .or_insert_with(|| claims.last().copied());
        // Equal claims are interchangeable: dropping any one of them is the same.
        if let Some(at) = claims.iter().rposition(|c| *c == entry) {
            claims.remove(at);
        }
        if claims.is_empty() {
            self.claims.remove(&prefix);
        }
    }

    /// Remote IPCache entries asked for (one per prefix).
    #[cfg(test)]
    fn entries(&self) -> BTreeMap<IpNet, IpcacheEntry> {
        self.claims
            .keys()
            .filter_map(|p| Some((*p, self.winner(*p)?)))
            .collect()
    }
}

/// Routes to other nodes' pod CIDRs: via the node's first address of the same family
/// (direct), or through the tunnel to its first address of the underlay's family.
fn desired_routes(
    snapshot: &Snapshot,
    routing: Routing,
    underlay_v6: Option<bool>,
) -> BTreeMap<IpNet, NodeRoute> {
    let mut out = BTreeMap::new();
    if routing == Routing::None {
        return out;
    }
    for (name, node) in &snapshot.nodes {
        if *name == snapshot.node_name {
            continue;
        }
        let ips = node_ips(node);
        for cidr in pod_cidrs(node) {
            let route = match routing {
                Routing::None => None,
                Routing::Direct => endpoint_for(&ips, cidr.addr(), None).map(NodeRoute::Via),
                Routing::Tunnel { oif, mtu } => {
                    endpoint_for(&ips, cidr.addr(), underlay_v6).map(|endpoint| {
                        NodeRoute::Tunnel(TunnelRoute {
                            dst: cidr,
                            endpoint,
                            id: identity::REMOTE_NODE,
                            oif,
                            mtu,
                        })
                    })
                }
            };
            if let Some(route) = route {
                out.insert(cidr, route);
            }
        }
    }
    out
}

/// Bring the remote IPCache entries (and, when enabled, the node routes) in line with
/// `snapshot`. Failures are logged and retried on the next sync.
pub(super) async fn sync(
    state: &mut State,
    snapshot: &Snapshot,
    own_ips: &BTreeSet<IpAddr>,
    routing: Routing,
) {
    let writes = state.remote.apply(snapshot, own_ips);
    let mut failures = 0_usize;
    for (prefix, entry) in writes {
        let result = match entry {
            Some(entry) => state.datapath.upsert_ipcache(prefix, &entry),
            None => state.datapath.remove_ipcache(prefix).map(drop),
        };
        match result {
            Ok(()) => drop(state.remote.failed.remove(&prefix)),
            Err(error) => {
                if failures == 0 {
                    warn!(error = %chain(&error), %prefix, "writing a remote IPCache entry; retrying on every sync");
                }
                failures += 1;
                state.remote.failed.insert(prefix);
            }
        }
    }
    if failures > 1 {
        warn!(
            failures,
            "remote IPCache entries not written (first one above)"
        );
    }
    sync_routes(state, snapshot, routing).await;
}

async fn sync_routes(state: &mut State, snapshot: &Snapshot, routing: Routing) {
    let desired = desired_routes(snapshot, routing, state.remote.underlay_v6);
    let installed = &mut state.remote.routes;
    let outdated: Vec<(IpNet, NodeRoute)> = installed
        .iter()
        .filter(|(cidr, route)| desired.get(cidr) != Some(route))
        .map(|(c, r)| (*c, *r))
        .collect();
    for (cidr, route) in outdated {
        let via = route.via();
        match route.delete(cidr).await {
            Ok(_) => {
                info!(%cidr, %via, "removed route to a node's pods");
                installed.remove(&cidr);
            }
            Err(error) => warn!(error = %chain(&error), "removing a node route"),
        }
    }
    for (cidr, route) in desired {
        if installed.get(&cidr) == Some(&route) {
            continue;
        }
        let via = route.via();
        match route.replace(cidr).await {
            Ok(()) => {
                info!(%cidr, %via, "route to a node's pods");
                installed.insert(cidr, route);
            }
            Err(error) => warn!(error = %chain(&error), "adding a node route"),
        }
    }
}

#[cfg(test)]
mod tests;

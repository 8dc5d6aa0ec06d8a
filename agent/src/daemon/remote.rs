//! What the node knows about the rest of the cluster, kept in the datapath incrementally: other
//! nodes' addresses at `remote-node` identity, their pod CIDRs at `init`, and their pods (from
//! their CiliumEndpoints) at their identity with the node as tunnel endpoint, in the IPCache;
//! and, with
//! `auto-direct-node-routes`, kernel routes to other nodes' pod CIDRs via their addresses.
//! Only differences are written: an unchanged cluster costs no map or netlink operation.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use agent_common::identity;
use ipnet::IpNet;
use tracing::{info, warn};

use super::{State, chain};
use crate::{
    crd::node::CiliumNode,
    datapath::{
        ipcache::{IpcacheEntry, host_prefix},
        netlink,
    },
    store::Snapshot,
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

/// The IPCache entries the rest of the cluster contributes.
fn desired_ipcache(
    snapshot: &Snapshot,
    own_ips: &BTreeSet<String>,
) -> BTreeMap<IpNet, IpcacheEntry> {
    let mut out = BTreeMap::new();
    for (name, node) in &snapshot.nodes {
        if *name == snapshot.node_name {
            continue;
        }
        let ips = node_ips(node);
        for ip in &ips {
            out.insert(
                host_prefix(*ip),
                IpcacheEntry::identity(identity::REMOTE_NODE),
            );
        }
        // The node's pod CIDRs are cluster addresses before any of its pods is published: at
        // `init` (labels not known yet) with the node as tunnel endpoint, so traffic to them is
        // never taken for the world (and masqueraded); a pod's own /32 overrides it.
        for cidr in pod_cidrs(node) {
            let via = ips
                .iter()
                .find(|ip| ip.is_ipv4() == cidr.addr().is_ipv4())
                .copied();
            out.insert(
                cidr,
                IpcacheEntry {
                    identity: identity::INIT,
                    tunnel_endpoint: via,
                    flags: 0,
                },
            );
        }
    }
    for cep in snapshot.endpoints.values() {
        let Some(status) = &cep.status else { continue };
        let (Some(net), Some(id)) = (&status.networking, &status.identity) else {
            continue;
        };
        if own_ips.contains(&net.node_ip) {
            continue;
        }
        let Ok(sec) = u32::try_from(id.id) else {
            continue;
        };
        let tunnel = net.node_ip.parse::<IpAddr>().ok();
        for pair in &net.addressing {
            for ip in [&pair.ipv4, &pair.ipv6] {
                if let Ok(ip) = ip.parse::<IpAddr>() {
                    out.insert(
                        host_prefix(ip),
                        IpcacheEntry {
                            identity: sec,
                            tunnel_endpoint: tunnel,
                            flags: 0,
                        },
                    );
                }
            }
        }
    }
    out
}

/// Routes to other nodes' pod CIDRs via the node's first address of the same family.
fn desired_routes(snapshot: &Snapshot) -> BTreeMap<IpNet, IpAddr> {
    let mut out = BTreeMap::new();
    for (name, node) in &snapshot.nodes {
        if *name == snapshot.node_name {
            continue;
        }
        let ips = node_ips(node);
        for cidr in pod_cidrs(node) {
            if let Some(via) = ips.iter().find(|ip| ip.is_ipv4() == cidr.addr().is_ipv4()) {
                out.insert(cidr, *via);
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
    own_ips: &BTreeSet<String>,
    routes: bool,
) {
    let desired = desired_ipcache(snapshot, own_ips);
    let gone: Vec<IpNet> = state
        .remote_ipcache
        .keys()
        .filter(|p| !desired.contains_key(p))
        .copied()
        .collect();
    for prefix in gone {
        match state.datapath.remove_ipcache(prefix) {
            Ok(_) => drop(state.remote_ipcache.remove(&prefix)),
            Err(error) => warn!(error = %chain(&error), %prefix, "removing a remote IPCache entry"),
        }
    }
    for (prefix, entry) in desired {
        if state.remote_ipcache.get(&prefix) == Some(&entry) {
            continue;
        }
        match state.datapath.upsert_ipcache(prefix, &entry) {
            Ok(()) => drop(state.remote_ipcache.insert(prefix, entry)),
            Err(error) => warn!(error = %chain(&error), %prefix, "adding a remote IPCache entry"),
        }
    }
    let desired = if routes {
        desired_routes(snapshot)
    } else {
        BTreeMap::new()
    };
    let outdated: Vec<(IpNet, IpAddr)> = state
        .node_routes
        .iter()
        .filter(|(cidr, via)| desired.get(cidr) != Some(via))
        .map(|(c, v)| (*c, *v))
        .collect();
    for (cidr, via) in outdated {
        match netlink::delete_node_route(cidr, via).await {
            Ok(_) => {
                info!(%cidr, %via, "removed route to a node's pods");
                state.node_routes.remove(&cidr);
            }
            Err(error) => warn!(error = %chain(&error), "removing a node route"),
        }
    }
    for (cidr, via) in desired {
        if state.node_routes.get(&cidr) == Some(&via) {
            continue;
        }
        match netlink::replace_node_route(cidr, via).await {
            Ok(()) => {
                info!(%cidr, %via, "route to a node's pods");
                state.node_routes.insert(cidr, via);
            }
            Err(error) => warn!(error = %chain(&error), "adding a node route"),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn snapshot() -> Snapshot {
        let node = |name: &str, ip: &str, cidr: &str| -> CiliumNode {
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"addresses": [{"type": "InternalIP", "ip": ip}],
                         "ipam": {"podCIDRs": [cidr]}},
            }))
            .expect("node")
        };
        let cep = serde_json::from_value(json!({
            "metadata": {"name": "b", "namespace": "web"},
            "status": {"identity": {"id": 4242},
                       "networking": {"addressing": [{"ipv4": "10.2.0.7"}], "node": "192.0.2.2"}},
        }))
        .expect("cep");
        let own_cep = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "web"},
            "status": {"identity": {"id": 4242},
                       "networking": {"addressing": [{"ipv4": "10.1.0.7"}], "node": "192.0.2.1"}},
        }))
        .expect("cep");
        Snapshot {
            node_name: "n1".into(),
            nodes: BTreeMap::from([
                ("n1".into(), node("n1", "192.0.2.1", "10.1.0.0/24")),
                ("n2".into(), node("n2", "192.0.2.2", "10.2.0.0/24")),
            ]),
            endpoints: BTreeMap::from([
                (("web".into(), "b".into()), std::sync::Arc::new(cep)),
                (("web".into(), "a".into()), std::sync::Arc::new(own_cep)),
            ]),
            ..Snapshot::default()
        }
    }

    #[test]
    fn remote_nodes_and_their_pods_but_not_our_own() {
        let own = BTreeSet::from(["192.0.2.1".to_owned()]);
        let entries = desired_ipcache(&snapshot(), &own);
        assert_eq!(entries.len(), 3, "{entries:?}");
        assert_eq!(
            entries[&"10.2.0.0/24".parse::<IpNet>().unwrap()].identity,
            identity::INIT,
            "a remote pod CIDR is a cluster destination before its pods are known"
        );
        assert_eq!(
            entries[&"192.0.2.2/32".parse::<IpNet>().unwrap()].identity,
            identity::REMOTE_NODE
        );
        let pod = entries[&"10.2.0.7/32".parse::<IpNet>().unwrap()];
        assert_eq!(pod.identity, 4242);
        assert_eq!(pod.tunnel_endpoint, Some("192.0.2.2".parse().unwrap()));
        assert_eq!(
            desired_routes(&snapshot()),
            BTreeMap::from([("10.2.0.0/24".parse().unwrap(), "192.0.2.2".parse().unwrap())])
        );
    }
}

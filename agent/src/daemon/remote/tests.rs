use serde_json::json;

use super::*;

fn node(name: &str, ip: &str, cidr: &str) -> CiliumNode {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"addresses": [{"type": "InternalIP", "ip": ip}],
                 "ipam": {"podCIDRs": [cidr]}},
    }))
    .expect("node")
}

fn endpoint(identity: u32, ip: &str, node_ip: &str) -> Arc<EndpointSummary> {
    Arc::new(EndpointSummary {
        identity: Some(identity),
        node_ip: node_ip.parse().ok(),
        ips: [ip.parse().expect("ip")].into(),
        status_digest: 0,
    })
}

fn key(name: &str) -> (String, String) {
    ("web".to_owned(), name.to_owned())
}

fn net(prefix: &str) -> IpNet {
    prefix.parse().expect("prefix")
}

fn own() -> BTreeSet<IpAddr> {
    BTreeSet::from(["192.0.2.1".parse().expect("ip")])
}

fn snapshot() -> Snapshot {
    Snapshot {
        node_name: "n1".into(),
        nodes: OrdMap::from(vec![
            ("n1".to_owned(), node("n1", "192.0.2.1", "10.1.0.0/24")),
            ("n2".to_owned(), node("n2", "192.0.2.2", "10.2.0.0/24")),
        ]),
        endpoints: OrdMap::from(vec![
            (key("b"), endpoint(4242, "10.2.0.7", "192.0.2.2")),
            (key("a"), endpoint(4242, "10.1.0.7", "192.0.2.1")),
        ]),
        ..Snapshot::default()
    }
}

/// Apply `writes` to `map` as `sync` applies them to the IPCache.
fn write(map: &mut BTreeMap<IpNet, IpcacheEntry>, writes: Vec<(IpNet, Option<IpcacheEntry>)>) {
    for (prefix, entry) in writes {
        match entry {
            Some(entry) => drop(map.insert(prefix, entry)),
            None => drop(map.remove(&prefix)),
        }
    }
}

#[test]
fn remote_nodes_and_their_pods_but_not_our_own() {
    let mut remote = Remote::default();
    let mut map = BTreeMap::new();
    write(&mut map, remote.apply(&snapshot(), &own()));
    assert_eq!(map, remote.entries());
    assert_eq!(map.len(), 3, "{map:?}");
    assert_eq!(
        map[&net("10.2.0.0/24")].identity,
        identity::INIT,
        "a remote pod CIDR is a cluster destination before its pods are known"
    );
    assert_eq!(map[&net("192.0.2.2/32")].identity, identity::REMOTE_NODE);
    let pod = map[&net("10.2.0.7/32")];
    assert_eq!(pod.identity, 4242);
    assert_eq!(pod.tunnel_endpoint, Some("192.0.2.2".parse().unwrap()));
    assert_eq!(
        desired_routes(&snapshot(), Routing::Direct, None),
        BTreeMap::from([(
            net("10.2.0.0/24"),
            NodeRoute::Via("192.0.2.2".parse().unwrap())
        )])
    );
    assert!(
        remote.apply(&snapshot(), &own()).is_empty(),
        "an unchanged cluster writes nothing"
    );
}

#[test]
fn a_reused_address_keeps_the_entry_of_the_pod_still_there() {
    let mut remote = Remote::default();
    let mut map = BTreeMap::new();
    let mut snap = snapshot();
    write(&mut map, remote.apply(&snap, &own()));
    // The address moves to a pod on n3 before the old pod's CiliumEndpoint is gone.
    snap.endpoints
        .insert(key("c"), endpoint(7000, "10.2.0.7", "192.0.2.3"));
    write(&mut map, remote.apply(&snap, &own()));
    assert_eq!(map[&net("10.2.0.7/32")].identity, 7000, "the newest claim");
    snap.endpoints.remove(&key("b"));
    let writes = remote.apply(&snap, &own());
    assert!(
        writes.is_empty(),
        "the old pod leaving changes nothing: {writes:?}"
    );
    assert_eq!(map[&net("10.2.0.7/32")].identity, 7000);
    // The other way round: the newer claim goes first and the older one is written again.
    snap.endpoints
        .insert(key("b"), endpoint(4242, "10.2.0.7", "192.0.2.2"));
    write(&mut map, remote.apply(&snap, &own()));
    snap.endpoints.remove(&key("b"));
    write(&mut map, remote.apply(&snap, &own()));
    assert_eq!(map[&net("10.2.0.7/32")].identity, 7000);
    snap.endpoints.remove(&key("c"));
    write(&mut map, remote.apply(&snap, &own()));
    assert!(!map.contains_key(&net("10.2.0.7/32")));
    assert_eq!(map, remote.entries());
}

#[test]
fn entries_an_earlier_run_left_go_unless_still_asked_for() {
    let kept = (net("10.2.0.7/32"), {
        let mut e = IpcacheEntry::identity(4242);
        e.tunnel_endpoint = "192.0.2.2".parse().ok();
        e
    });
    let gone = (net("10.9.0.9/32"), IpcacheEntry::identity(5000));
    let mut remote = Remote {
        inherited: HashMap::from([kept, gone]),
        ..Remote::default()
    };
    let mut writes = remote.apply(&snapshot(), &own());
    writes.sort_by_key(|(p, _)| *p);
    assert!(
        writes.contains(&(gone.0, None)),
        "a pod deleted while the agent was down: {writes:?}"
    );
    assert!(
        !writes.iter().any(|(p, _)| *p == kept.0),
        "an unchanged entry is not rewritten: {writes:?}"
    );
    assert_eq!(writes.len(), 3, "plus n2's address and CIDR: {writes:?}");
}

#[test]
fn failed_writes_are_retried_until_they_succeed() {
    let mut remote = Remote::default();
    let writes = remote.apply(&snapshot(), &own());
    let prefix = writes[0].0;
    remote.failed.insert(prefix);
    let retried = remote.apply(&snapshot(), &own());
    assert_eq!(retried, vec![(prefix, remote.winner(prefix))]);
    remote.failed.clear();
    assert!(remote.apply(&snapshot(), &own()).is_empty());
}

/// Random churn of nodes, endpoints and the node's own addresses: after every step the writes
/// leave the map exactly as a fresh derivation of the whole snapshot.
#[test]
fn incremental_syncs_match_a_fresh_derivation() {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut remote = Remote::default();
    let mut map = BTreeMap::new();
    let mut snap = snapshot();
    let mut own_ips = own();
    for step in 0..400 {
        for _ in 0..rng.usize(1..20) {
            let n = rng.u8(2..12);
            let node_ip = format!("192.0.2.{n}");
            match rng.u8(0..10) {
                0 => drop(snap.nodes.remove(&format!("n{n}"))),
                1..=2 => drop(snap.nodes.insert(
                    format!("n{n}"),
                    node(&format!("n{n}"), &node_ip, &format!("10.{n}.0.0/24")),
                )),
                3..=5 => drop(snap.endpoints.remove(&key(&format!("p{}", rng.u8(..60))))),
                _ => {
                    // Unique addresses per pod name: a fresh derivation has no conflicts
                    // to resolve by history.
                    let pod = rng.u8(..60);
                    drop(snap.endpoints.insert(
                        key(&format!("p{pod}")),
                        endpoint(rng.u32(256..260), &format!("10.200.0.{pod}"), &node_ip),
                    ));
                }
            }
        }
        if step % 50 == 49 {
            own_ips.insert(format!("192.0.2.{}", rng.u8(2..12)).parse().unwrap());
        }
        write(&mut map, remote.apply(&snap, &own_ips));
        let mut fresh = Remote::default();
        let mut expected = BTreeMap::new();
        write(&mut expected, fresh.apply(&snap, &own_ips));
        assert_eq!(map, expected, "step {step}");
        assert_eq!(remote.entries(), expected, "step {step}");
    }
    assert!(map.len() > 20, "the churn kept some entries: {}", map.len());
}

/// A dual-stack node of another subnet: in tunnel routing both pod CIDRs tunnel to its IPv4
/// address (the underlay's family) through the tunnel device at the pods' MTU; natively each
/// family keeps its own.
#[test]
fn in_tunnel_routing_every_prefix_tunnels_to_the_underlay_address() {
    let dual: CiliumNode = serde_json::from_value(json!({
        "metadata": {"name": "n2"},
        "spec": {"addresses": [{"type": "InternalIP", "ip": "192.0.2.2"},
                               {"type": "InternalIP", "ip": "2001:db8::2"}],
                 "ipam": {"podCIDRs": ["10.2.0.0/24", "fd00:2::/64"]}},
    }))
    .expect("node");
    let mut snap = snapshot();
    snap.nodes.insert("n2".to_owned(), dual);
    let v4: IpAddr = "192.0.2.2".parse().expect("ip");
    let mut remote = Remote::default().with_underlay(Some(false));
    let mut map = BTreeMap::new();
    write(&mut map, remote.apply(&snap, &own()));
    assert_eq!(map[&net("fd00:2::/64")].tunnel_endpoint, Some(v4));
    assert_eq!(map[&net("10.2.0.0/24")].tunnel_endpoint, Some(v4));
    let routes = desired_routes(&snap, Routing::Tunnel { oif: 9, mtu: 1450 }, Some(false));
    let tunnel = |cidr: &str| {
        NodeRoute::Tunnel(TunnelRoute {
            dst: net(cidr),
            endpoint: v4,
            id: identity::REMOTE_NODE,
            oif: 9,
            mtu: 1450,
        })
    };
    assert_eq!(
        routes,
        BTreeMap::from([
            (net("10.2.0.0/24"), tunnel("10.2.0.0/24")),
            (net("fd00:2::/64"), tunnel("fd00:2::/64")),
        ])
    );
    let mut native = Remote::default();
    let mut map = BTreeMap::new();
    write(&mut map, native.apply(&snap, &own()));
    assert_eq!(
        map[&net("fd00:2::/64")].tunnel_endpoint,
        "2001:db8::2".parse().ok()
    );
}

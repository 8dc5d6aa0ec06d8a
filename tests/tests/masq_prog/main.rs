//! `to_netdev` and `from_netdev` under `BPF_PROG_TEST_RUN`: one test per branch of the
//! masquerade decision, the mapping (kept, reused, moved on collision, exhausted), and the
//! reverse NAT of replies, for IPv4 and (`decision6`, `mapping6`) IPv6. The skb runs on `lo` (ifindex 1) of the test's private namespace,
//! which is recorded as the native device; checksums of rewritten frames are recomputed from
//! scratch.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use agent_common::{
    EndpointInfo, NatEntry4, NatEntry6, NatTuple4, NatTuple6,
    endpoint::{ENDPOINT_F_NO_SNAT_V4, ENDPOINT_F_NO_SNAT_V6},
    identity,
    maps::{PROG_FROM_NETDEV, PROG_TO_NETDEV},
    masq::{MASQ_F_IP_MASQ_AGENT, MASQ_F_POOL, POOL_ANY},
    nat::{IPPROTO_UDP, NAT_DIR_EGRESS, NAT_DIR_INGRESS, NAT_PORT_MAX, NAT_PORT_MIN},
};
use weft_agent::datapath::{IpcacheEntry, MasqExclusion, NetdevConfig};
use weft_tests::{
    Node,
    frames::{self, view4, view6},
    test_run,
};

const TC_ACT_OK: u32 = 0;
const TC_ACT_SHOT: u32 = 2;
const LO: u32 = 1;

const NODE_IP: Ipv4Addr = Ipv4Addr::new(172, 31, 0, 2);
/// Default pool, no flags: masqueraded.
const POD: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 11);
/// Default pool, pool annotation `skip-masquerade: "true"` → `ENDPOINT_F_NO_SNAT_V4`.
const POD_SKIP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 12);
/// Pool 5 under `--only-masquerade-default-pool` → also `ENDPOINT_F_NO_SNAT_V4`.
const POD_OTHER_POOL: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 13);
/// Pool 7, which has its own exclusion.
const POD_POOL7: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 14);
const POD_IFINDEX: u32 = 4242;
const POD_MAC: [u8; 6] = [0x0a, 0xbb, 0, 0, 0, 0x11];
const POD_NODE_MAC: [u8; 6] = [0x0a, 0xcc, 0, 0, 0, 0x11];

const WORLD: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);
const EXCLUDED: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);
const POOL7_EXCLUDED: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);
const CLUSTER_POD: Ipv4Addr = Ipv4Addr::new(10, 78, 1, 2);
const REMOTE_NODE: Ipv4Addr = Ipv4Addr::new(172, 20, 0, 5);

fn endpoint(flags: u32, pool_id: u32) -> EndpointInfo {
    EndpointInfo {
        ifindex: POD_IFINDEX,
        flags,
        pod_mac: POD_MAC,
        pad0: [0; 2],
        node_mac: POD_NODE_MAC,
        pad1: [0; 2],
        sec_identity: 300,
        pool_id,
    }
}

fn node() -> Node {
    let mut node = Node::new();
    let dp = &mut node.datapath;
    dp.upsert_netdev(
        LO,
        &NetdevConfig {
            masq_v4: Some(NODE_IP),
            masq_v6: None,
        },
    )
    .expect("netdev");
    for (ip, ep) in [
        (POD, endpoint(0, 0)),
        (POD_SKIP, endpoint(ENDPOINT_F_NO_SNAT_V4, 0)),
        (POD_OTHER_POOL, endpoint(ENDPOINT_F_NO_SNAT_V4, 5)),
        (POD_POOL7, endpoint(0, 7)),
    ] {
        dp.upsert_endpoint(IpAddr::V4(ip), &ep).expect("endpoint");
    }
    dp.ensure_world_ipcache().expect("world");
    dp.upsert_ipcache(
        "10.78.0.0/16".parse().expect("cidr"),
        &IpcacheEntry::identity(300),
    )
    .expect("cluster pods");
    dp.upsert_ipcache(
        IpAddr::V4(REMOTE_NODE).into(),
        &IpcacheEntry::identity(identity::REMOTE_NODE),
    )
    .expect("remote node");
    dp.sync_masq_exclusions(&[
        MasqExclusion {
            pool_id: POOL_ANY,
            cidr: "192.0.2.0/24".parse().expect("cidr"),
            flags: MASQ_F_IP_MASQ_AGENT,
        },
        MasqExclusion {
            pool_id: 7,
            cidr: "203.0.113.0/24".parse().expect("cidr"),
            flags: MASQ_F_POOL,
        },
    ])
    .expect("exclusions");
    node
}

fn egress(node: &mut Node, frame: &[u8]) -> (u32, Vec<u8>) {
    test_run(&mut node.datapath, PROG_TO_NETDEV, frame)
}

fn ingress(node: &mut Node, frame: &[u8]) -> (u32, Vec<u8>) {
    test_run(&mut node.datapath, PROG_FROM_NETDEV, frame)
}

/// The packet left unchanged under `reason`, and nothing else counted.
fn assert_untouched(node: &mut Node, frame: &[u8], reason: &str) {
    let before = node.counters();
    let (verdict, out) = egress(node, frame);
    assert_eq!(
        (verdict, &out),
        (TC_ACT_OK, &frame.to_vec()),
        "{reason}: untouched"
    );
    let after = node.counters();
    assert_eq!(after[reason], before[reason] + 1, "{reason}: {after:?}");
    assert_eq!(
        after["snat"], before["snat"],
        "{reason}: nothing masqueraded"
    );
}

fn assert_masqueraded(out: &[u8], dst: Ipv4Addr) -> frames::Ipv4View {
    let v = view4(out);
    assert_eq!((v.src, v.dst), (NODE_IP, dst), "source is the node IP");
    assert!(v.ip_csum_ok, "IPv4 header checksum");
    assert!(v.l4_csum_ok, "L4 checksum");
    assert!(v.sport >= NAT_PORT_MIN, "port {} in the NAT range", v.sport);
    v
}

/// IPv6 counterparts of the addresses above (`node6`).
const NODE_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x31, 0, 0, 0, 0, 2);
const POD6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x11);
const POD6_SKIP: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x12);
const POD6_OTHER_POOL: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x13);
const POD6_POOL7: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x14);
/// Its endpoint skips IPv4 masquerading only: IPv6 is still masqueraded.
const POD6_V4_SKIP: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x15);
const WORLD6: Ipv6Addr = Ipv6Addr::new(0x2606, 0x4700, 0, 0, 0, 0, 0, 0x1111);
const EXCLUDED6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xe, 0, 0, 0, 0, 9);
const POOL7_EXCLUDED6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x7, 0, 0, 0, 0, 9);
const CLUSTER_POD6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x78, 0, 1, 0, 0, 0, 2);
const REMOTE_NODE6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x20, 0, 0, 0, 0, 5);

/// [`node`] with IPv6 masquerading on `lo` to [`NODE_IP6`], the IPv6 pods, cluster prefixes
/// and exclusions.
fn node6() -> Node {
    let mut node = node();
    let dp = &mut node.datapath;
    dp.upsert_netdev(
        LO,
        &NetdevConfig {
            masq_v4: Some(NODE_IP),
            masq_v6: Some(NODE_IP6),
        },
    )
    .expect("netdev");
    for (ip, ep) in [
        (POD6, endpoint(0, 0)),
        (POD6_SKIP, endpoint(ENDPOINT_F_NO_SNAT_V6, 0)),
        (POD6_OTHER_POOL, endpoint(ENDPOINT_F_NO_SNAT_V6, 5)),
        (POD6_POOL7, endpoint(0, 7)),
        (POD6_V4_SKIP, endpoint(ENDPOINT_F_NO_SNAT_V4, 0)),
    ] {
        dp.upsert_endpoint(IpAddr::V6(ip), &ep).expect("endpoint");
    }
    dp.upsert_ipcache(
        "fd00:78::/48".parse().expect("cidr"),
        &IpcacheEntry::identity(300),
    )
    .expect("cluster pods");
    dp.upsert_ipcache(
        IpAddr::V6(REMOTE_NODE6).into(),
        &IpcacheEntry::identity(identity::REMOTE_NODE),
    )
    .expect("remote node");
    // Replaces the exclusions `node` wrote: the IPv4 ones again, then the IPv6 ones.
    let exclusions = [
        MasqExclusion {
            pool_id: POOL_ANY,
            cidr: "192.0.2.0/24".parse().expect("cidr"),
            flags: MASQ_F_IP_MASQ_AGENT,
        },
        MasqExclusion {
            pool_id: 7,
            cidr: "203.0.113.0/24".parse().expect("cidr"),
            flags: MASQ_F_POOL,
        },
        MasqExclusion {
            pool_id: POOL_ANY,
            cidr: "2001:db8:e::/48".parse().expect("cidr"),
            flags: MASQ_F_IP_MASQ_AGENT,
        },
        MasqExclusion {
            pool_id: 7,
            cidr: "2001:db8:7::/48".parse().expect("cidr"),
            flags: MASQ_F_POOL,
        },
    ];
    dp.sync_masq_exclusions(&exclusions).expect("exclusions");
    node
}

fn assert_masqueraded6(out: &[u8], dst: Ipv6Addr) -> frames::Ipv6View {
    let v = view6(out);
    assert_eq!((v.src, v.dst), (NODE_IP6, dst), "source is the node IPv6");
    assert!(v.l4_csum_ok, "L4 checksum with the rewritten pseudo-header");
    assert!(v.sport >= NAT_PORT_MIN, "port {} in the NAT range", v.sport);
    v
}

mod decision;
mod decision6;
mod mapping;
mod mapping6;
mod reverse;

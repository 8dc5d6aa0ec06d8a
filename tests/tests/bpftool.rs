//! Stock bpftool reads weft's pinned maps with field names (BTF maps): the endpoints map as
//! JSON with `formatted` keys and values, and `map show` with the expected shape; the
//! IPCache and exclusion tries (`prefix_len` + named key data), the NAT maps of both families
//! (ports as numbers).

use std::{net::IpAddr, process::Command};

use agent_common::maps;
use serde_json::Value;
use weft_agent::datapath::PoolIdPerFamily;
use weft_tests::{Node, run};

fn bpftool_json(args: &[&str], pin: &std::path::Path) -> Value {
    let out = run(Command::new("bpftool").arg("-j").args(args).arg(pin));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("bpftool JSON: {e}"))
}

#[test]
fn endpoints_map_dumps_with_named_fields() {
    let mut node = Node::new();
    let pod = node.add_pod(1);
    let row = node
        .datapath
        .list_endpoints()
        .expect("list")
        .into_iter()
        .find(|r| r.ip == IpAddr::V4(pod.v4))
        .expect("pod endpoint");
    let pin = node.config().pin_dir.join(maps::ENDPOINTS);

    let show = bpftool_json(&["map", "show", "pinned"], &pin);
    assert_eq!(show["name"], maps::ENDPOINTS);
    assert_eq!(show["type"], "hash");
    assert_eq!(show["bytes_key"], 20);
    assert_eq!(show["bytes_value"], 32);
    assert!(
        show["btf_id"].as_u64().is_some_and(|id| id > 0),
        "map has BTF: {show}"
    );

    let dump = bpftool_json(&["map", "dump", "pinned"], &pin);
    let entries = dump.as_array().expect("array of entries");
    assert_eq!(entries.len(), 2, "one entry per pod address: {dump}");
    let v4 = entries
        .iter()
        .map(|e| &e["formatted"])
        .find(|f| f["key"]["family"] == 1)
        .unwrap_or_else(|| panic!("no IPv4 entry with named fields in {dump}"));
    let octets: Vec<u64> = pod.v4.octets().iter().map(|&b| u64::from(b)).collect();
    let key_ip: Vec<u64> = v4["key"]["ip"].as_array().expect("ip array")[..4]
        .iter()
        .map(|b| b.as_u64().expect("byte"))
        .collect();
    assert_eq!(key_ip, octets);
    let value = &v4["value"];
    assert_eq!(value["ifindex"], row.ifindex);
    assert_eq!(value["sec_identity"], row.identity);
    assert_eq!(value["pool_id"], 0);
    assert_eq!(value["flags"], 0);
    let mac: Vec<String> = value["pod_mac"]
        .as_array()
        .expect("pod_mac array")
        .iter()
        .map(|b| format!("{:02x}", b.as_u64().expect("byte")))
        .collect();
    assert_eq!(mac.join(":"), row.pod_mac);
    assert!(value.get("node_mac").is_some(), "node_mac field: {value}");
}

/// A dual-stack pod whose addresses come from different pools: each address's endpoint entry
/// carries its own family's pool id.
#[test]
fn each_endpoint_carries_its_family_s_pool_id() {
    let mut node = Node::new();
    let pod = node.add_pod_with(3, 0, PoolIdPerFamily { v4: 3, v6: 7 });
    let rows = node.datapath.list_endpoints().expect("list");
    let pool_of = |ip: IpAddr| {
        rows.iter()
            .find(|r| r.ip == ip)
            .unwrap_or_else(|| panic!("no endpoint {ip}: {rows:?}"))
            .pool_id
    };
    assert_eq!(pool_of(IpAddr::V4(pod.v4)), 3, "IPv4 entry");
    assert_eq!(pool_of(IpAddr::V6(pod.v6)), 7, "IPv6 entry");
}

#[test]
fn counters_dump_with_named_fields_per_cpu() {
    let mut node = Node::new();
    let pods = [node.add_pod(1), node.add_pod(2)];
    assert!(pods[0].ping(IpAddr::V4(pods[1].v4), 1, "0.1"));
    let pin = node.config().pin_dir.join(maps::COUNTERS);
    let dump = bpftool_json(&["map", "dump", "pinned"], &pin);
    let redirect =
        &dump.as_array().expect("entries")[agent_common::reason::REDIRECT_LOCAL as usize];
    let per_cpu = redirect["formatted"]["values"]
        .as_array()
        .expect("per-CPU values");
    let packets: u64 = per_cpu
        .iter()
        .map(|v| v["value"]["packets"].as_u64().expect("packets"))
        .sum();
    assert_eq!(packets, node.counters()["redirect_local"]);
    assert!(packets >= 2);
}

#[test]
fn ipcache_masq_and_nat_maps_dump_with_named_fields() {
    use agent_common::{
        masq::{MASQ_F_IP_MASQ_AGENT, POOL_ANY},
        nat::{IPPROTO_UDP, NAT_DIR_EGRESS},
    };
    use weft_agent::datapath::{IpcacheEntry, MasqExclusion};

    let mut node = Node::new();
    let dp = &mut node.datapath;
    dp.upsert_ipcache(
        "10.78.0.0/16".parse().expect("cidr"),
        &IpcacheEntry::identity(300),
    )
    .expect("ipcache");
    dp.sync_masq_exclusions(&[MasqExclusion {
        pool_id: POOL_ANY,
        cidr: "192.0.2.0/24".parse().expect("cidr"),
        flags: MASQ_F_IP_MASQ_AGENT,
    }])
    .expect("masq");
    let tuple = agent_common::NatTuple4 {
        daddr: [8, 8, 8, 8],
        saddr: [10, 77, 0, 11],
        dport: 53,
        sport: 40000,
        nexthdr: IPPROTO_UDP,
        flags: NAT_DIR_EGRESS,
    };
    let entry = agent_common::NatEntry4 {
        created: 1,
        to_addr: [172, 31, 0, 2],
        to_port: 40001,
        flags: 0,
    };
    dp.upsert_nat4(&tuple, &entry).expect("nat");
    let pod6: std::net::Ipv6Addr = "fd00:77::11".parse().expect("ip");
    let tuple6 = agent_common::NatTuple6 {
        daddr: std::net::Ipv6Addr::new(0x2606, 0x4700, 0, 0, 0, 0, 0, 0x1111).octets(),
        saddr: pod6.octets(),
        dport: 443,
        sport: 40002,
        nexthdr: agent_common::nat::IPPROTO_TCP,
        flags: NAT_DIR_EGRESS,
    };
    let entry6 = agent_common::NatEntry6 {
        created: 1,
        to_addr: std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).octets(),
        to_port: 40003,
        flags: 0,
        pad: [0; 4],
    };
    dp.upsert_nat6(&tuple6, &entry6).expect("nat6");
    let pins = node.config().pin_dir.clone();

    let dump = bpftool_json(&["map", "dump", "pinned"], &pins.join(maps::IPCACHE));
    let f = &dump[0]["formatted"];
    assert_eq!(f["key"]["prefix_len"], 32 + 16, "{dump}");
    assert_eq!(f["key"]["data"]["family"], 1, "{dump}");
    assert_eq!(f["key"]["data"]["ip"][1], 78, "{dump}");
    assert_eq!(f["value"]["sec_identity"], 300, "{dump}");

    let dump = bpftool_json(&["map", "dump", "pinned"], &pins.join(maps::MASQ_EXCLUDE));
    let f = &dump[0]["formatted"];
    assert_eq!(f["key"]["data"]["pool_id"], u64::from(POOL_ANY), "{dump}");
    assert_eq!(f["key"]["prefix_len"], 64 + 24, "{dump}");
    assert_eq!(f["value"]["flags"], MASQ_F_IP_MASQ_AGENT, "{dump}");

    let dump = bpftool_json(&["map", "dump", "pinned"], &pins.join(maps::NAT4));
    let f = &dump[0]["formatted"];
    assert_eq!(f["key"]["sport"], 40000, "ports print as numbers: {dump}");
    assert_eq!(f["key"]["daddr"], serde_json::json!([8, 8, 8, 8]), "{dump}");
    assert_eq!(f["value"]["to_port"], 40001, "{dump}");
    assert_eq!(
        f["value"]["to_addr"],
        serde_json::json!([172, 31, 0, 2]),
        "{dump}"
    );

    let dump = bpftool_json(&["map", "dump", "pinned"], &pins.join(maps::NAT6));
    let f = &dump[0]["formatted"];
    assert_eq!(f["key"]["sport"], 40002, "ports print as numbers: {dump}");
    assert_eq!(f["key"]["nexthdr"], 6, "{dump}");
    assert_eq!(
        f["key"]["saddr"],
        serde_json::json!(pod6.octets()),
        "{dump}"
    );
    assert_eq!(f["value"]["to_port"], 40003, "{dump}");
    assert_eq!(f["value"]["to_addr"][3], 0xb8, "{dump}");
}

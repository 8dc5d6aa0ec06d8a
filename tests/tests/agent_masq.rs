//! The real agent with BPF masquerade on (`--enable-bpf-masquerade --devices wnode
//! --enable-ip-masq-agent`) in a private node namespace with an external host behind `wnode`:
//! a default-pool pod reaches the external host as the node, a pod of the `mars` pool
//! (annotated `skip-masquerade`) with its own address; `weft-agent bpf ipcache|masq|nat|netdev
//! list` show what the agent programmed; an invalid edit of the ip-masq-agent file is reported
//! with file and line and changes nothing, a valid one is applied without a restart; another
//! node's CiliumNode document puts its address and pod CIDR into the IPCache (and takes them
//! out again when it goes), so traffic to that CIDR keeps the pod address. With
//! `--enable-ipv6` the same holds for IPv6 (`enable-ipv6-masquerade` defaults to true): the
//! device's IPv6 address is its IPv6 masquerade address, and switching the key off keeps the
//! pods' IPv6 addresses.

use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    process::Command,
    time::Duration,
};

use ipnet::IpNet;
use serde_json::Value;
use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, example_store},
    bin_path,
    external::{EXT_IP6, External, NODE_DEV, NODE_IP, NODE_IP6},
    require_root, run, unique, wait_until,
};

struct Pod {
    netns: NamedNetNs,
    v4: IpAddr,
    /// The IPv6 address, when the agent runs with `--enable-ipv6`.
    v6: Option<IpAddr>,
}

fn add(agent: &Agent, ns: &str, name: &str) -> Pod {
    let netns = NamedNetNs::new();
    let call = agent.cni(
        "ADD",
        &format!("ctr-{ns}-{name}"),
        &netns.path().display().to_string(),
        (ns, name),
    );
    assert_eq!(call.code, 0, "ADD {ns}/{name}: {}", call.stdout);
    let ips: Vec<IpAddr> = call.stdout["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .map(|ip| {
            ip["address"]
                .as_str()
                .expect("address")
                .parse::<IpNet>()
                .expect("cidr")
                .addr()
        })
        .collect();
    let v4 = *ips.iter().find(|ip| ip.is_ipv4()).expect("an IPv4 address");
    let v6 = ips.iter().copied().find(IpAddr::is_ipv6);
    Pod { netns, v4, v6 }
}

/// `weft-agent bpf <map> list -o json` against the agent's pins.
fn bpf_list(agent: &Agent, map: &str) -> Vec<Value> {
    let out = run(Command::new(bin_path("weft-agent"))
        .arg("--pin-dir")
        .arg(&agent.pin_dir)
        .args(["bpf", map, "list", "-o", "json"]));
    let rows: Value = serde_json::from_slice(&out.stdout).expect("JSON rows");
    rows.as_array().expect("array").clone()
}

fn row<'a>(rows: &'a [Value], key: &str, value: &str) -> Option<&'a Value> {
    rows.iter().find(|r| r[key] == value)
}

/// The IPCache (world, host, pod identities), the native device and the NAT entries of `web`
/// as `weft-agent bpf … list` prints them.
fn assert_maps_programmed(agent: &Agent, web: &Pod) {
    let ipcache = bpf_list(agent, "ipcache");
    let identity = |prefix: &str| row(&ipcache, "prefix", prefix).map(|r| r["identity"].clone());
    assert_eq!(identity("0.0.0.0/0"), Some(2.into()), "world: {ipcache:?}");
    assert_eq!(identity("::/0"), Some(2.into()));
    assert_eq!(
        identity(&format!("{NODE_IP}/32")),
        Some(1.into()),
        "device address is host"
    );
    assert_eq!(
        identity("192.0.2.10/32"),
        Some(1.into()),
        "CiliumNode address is host"
    );
    // The pod starts at `init` (5) and gets its label set's identity (≥ 256) once resolved.
    wait_until(
        "the pod's identity in the IPCache",
        Duration::from_secs(10),
        || {
            let rows = bpf_list(agent, "ipcache");
            row(&rows, "prefix", &format!("{}/32", web.v4))
                .and_then(|r| r["identity"].as_u64())
                .is_some_and(|id| id >= 256)
        },
    );

    let netdevs = bpf_list(agent, "netdev");
    let dev = row(&netdevs, "ifname", NODE_DEV).expect("wnode listed");
    assert_eq!(dev["masq_v4"], NODE_IP.to_string());

    let nat = bpf_list(agent, "nat");
    assert!(
        nat.iter()
            .any(|r| r["saddr"] == web.v4.to_string() && r["to_addr"] == NODE_IP.to_string()),
        "{nat:?}"
    );
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two pools (default and mars) masqueraded by eBPF on the node's device.
const MASQ_FLAGS: [&str; 8] = [
    "--ipam",
    "multi-pool",
    "--ipam-multi-pool-pre-allocation",
    "default=8,mars=4",
    "--enable-bpf-masquerade",
    "true",
    "--devices",
    NODE_DEV,
];

#[test]
fn agent_masquerades_per_pool_and_follows_the_ip_masq_agent_file() {
    require_root();
    let _node = ThreadNetNs::new();
    let ext = External::new(&["10.200.0.0/16", "10.201.0.0/16"]);
    let dir = TempDir(std::env::temp_dir().join(unique("weft-ipmasq-")));
    std::fs::create_dir_all(&dir.0).expect("mkdir");
    let file = dir.0.join("ip-masq-agent");
    std::fs::write(&file, "nonMasqueradeCIDRs:\n  - 198.51.100.0/24\n").expect("write");
    let file_arg = file.display().to_string();
    let mut flags = MASQ_FLAGS.to_vec();
    flags.extend([
        "--enable-ip-masq-agent",
        "true",
        "--ip-masq-agent-config-path",
        &file_arg,
    ]);
    let mut agent = Agent::new(&example_store(), &flags);
    agent.start();
    let web = add(&agent, "default", "web");
    let rover = add(&agent, "mars", "rover");
    assert_eq!(
        ext.tcp_peer(&web.netns.path(), 7200),
        IpAddr::V4(NODE_IP),
        "default pool: masqueraded"
    );
    assert_eq!(
        ext.tcp_peer(&rover.netns.path(), 7201),
        rover.v4,
        "mars pool (skip-masquerade): pod address"
    );

    assert_maps_programmed(&agent, &web);

    let masq = bpf_list(&agent, "masq");
    let cidrs: Vec<&str> = masq
        .iter()
        .map(|r| r["cidr"].as_str().expect("cidr"))
        .collect();
    assert_eq!(
        cidrs,
        ["169.254.0.0/16", "198.51.100.0/24", "fe80::/10"],
        "{masq:?}"
    );
    assert!(
        masq.iter()
            .all(|r| r["pool"] == "*" && r["origin"][0] == "ip-masq-agent")
    );

    // A broken edit: reported with file and line, nothing changes.
    std::fs::write(
        &file,
        "nonMasqueradeCIDRs:\n  - 198.51.100.0/24\n  - 44.77.0.0/99\n",
    )
    .expect("write");
    let at = format!("{}:3", file.display());
    wait_until(
        "the invalid CIDR to be reported",
        Duration::from_secs(10),
        || agent.log().contains(&at),
    );
    assert_eq!(
        bpf_list(&agent, "masq"),
        masq,
        "previous exclusions stay in force"
    );

    // A valid edit is applied without a restart: the external link is now excluded.
    std::fs::write(
        &file,
        "nonMasqueradeCIDRs:\n  - 44.77.0.0/24\nmasqLinkLocal: true\n",
    )
    .expect("write");
    wait_until("the new exclusions", Duration::from_secs(10), || {
        let cidrs: Vec<Value> = bpf_list(&agent, "masq")
            .iter()
            .map(|r| r["cidr"].clone())
            .collect();
        cidrs == [Value::from("44.77.0.0/24"), Value::from("fe80::/10")]
    });
    assert_eq!(
        ext.tcp_peer(&web.netns.path(), 7202),
        web.v4,
        "excluded destination: pod address"
    );

    other_nodes_are_cluster_destinations(&agent, &ext, &web, &file);
}

/// Without Kubernetes, other nodes come from other CiliumNode documents in the store: their
/// addresses are `remote-node`, their pod CIDRs cluster addresses (`init`, tunnel endpoint =
/// the node), so traffic to them keeps the pod address. Here node2 claims the external link's
/// /24 as pod CIDR; the ip-masq-agent exclusions go first so only the IPCache decides.
fn other_nodes_are_cluster_destinations(
    agent: &Agent,
    ext: &External,
    web: &Pod,
    file: &std::path::Path,
) {
    std::fs::write(file, "nonMasqueradeCIDRs: []\nmasqLinkLocal: true\n").expect("write");
    wait_until("no IPv4 exclusions", Duration::from_secs(10), || {
        let cidrs: Vec<Value> = bpf_list(agent, "masq")
            .iter()
            .map(|r| r["cidr"].clone())
            .collect();
        cidrs == [Value::from("fe80::/10")]
    });
    assert_eq!(ext.tcp_peer(&web.netns.path(), 7203), IpAddr::V4(NODE_IP));
    agent.put_doc(
        "ciliumnodes/node2.yaml",
        "apiVersion: cilium.io/v2\nkind: CiliumNode\nmetadata:\n  name: node2\nspec:\n  \
         addresses:\n  - type: InternalIP\n    ip: 192.0.2.20\n  ipam:\n    podCIDRs:\n    \
         - 44.77.0.0/24\n",
    );
    let remote = |rows: &[Value]| {
        let node = row(rows, "prefix", "192.0.2.20/32").map(|r| r["identity"].clone());
        let pods = row(rows, "prefix", "44.77.0.0/24")
            .map(|r| (r["identity"].clone(), r["tunnel_endpoint"].clone()));
        (node, pods)
    };
    wait_until("node2 in the IPCache", Duration::from_secs(10), || {
        remote(&bpf_list(agent, "ipcache")).0.is_some()
    });
    assert_eq!(
        remote(&bpf_list(agent, "ipcache")),
        (Some(6.into()), Some((5.into(), Value::from("192.0.2.20"))))
    );
    assert_eq!(
        ext.tcp_peer(&web.netns.path(), 7204),
        web.v4,
        "another node's pod CIDR: pod address"
    );
    // node2 leaves: its entries go, and the same destination is the world again.
    std::fs::remove_file(agent.store.join("ciliumnodes/node2.yaml")).expect("remove node2");
    wait_until(
        "node2 gone from the IPCache",
        Duration::from_secs(10),
        || remote(&bpf_list(agent, "ipcache")) == (None, None),
    );
    assert_eq!(ext.tcp_peer(&web.netns.path(), 7205), IpAddr::V4(NODE_IP));
}

/// The agent with `--enable-ipv6` and the default-pool pod's IPv6 traffic: masqueraded to the
/// device's IPv6 address (`enable-ipv6-masquerade` defaults to true), the `mars` pod's kept;
/// with `--enable-ipv6-masquerade false` the device gets no IPv6 masquerade address and the
/// default-pool pod keeps its IPv6 address too.
#[test]
fn agent_masquerades_ipv6_when_enabled() {
    require_root();
    let _node = ThreadNetNs::new();
    let ext = External::new(&["fd00:200::/112", "fd00:201::/112"]);
    for (v6_masq, port) in [(None, 7210), (Some("false"), 7220)] {
        let mut args = vec![
            "--ipam",
            "multi-pool",
            "--ipam-multi-pool-pre-allocation",
            "default=8,mars=4",
            "--enable-ipv6",
            "true",
            "--enable-bpf-masquerade",
            "true",
            "--devices",
            NODE_DEV,
        ];
        if let Some(value) = v6_masq {
            args.extend(["--enable-ipv6-masquerade", value]);
        }
        let mut agent = Agent::new(&example_store(), &args);
        agent.start();
        let web = add(&agent, "default", "web");
        let rover = add(&agent, "mars", "rover");
        let (web6, rover6) = (web.v6.expect("web IPv6"), rover.v6.expect("rover IPv6"));
        let masquerading = v6_masq.is_none();
        let to = |p| SocketAddr::new(IpAddr::V6(EXT_IP6), p);
        let expected = if masquerading {
            IpAddr::V6(NODE_IP6)
        } else {
            web6
        };
        assert_eq!(
            ext.tcp_peer_on(&web.netns.path(), to(port)),
            expected,
            "default pool, enable-ipv6-masquerade {v6_masq:?}"
        );
        assert_eq!(
            ext.tcp_peer_on(&rover.netns.path(), to(port + 1)),
            rover6,
            "mars pool (skip-masquerade): pod IPv6"
        );
        let netdevs = bpf_list(&agent, "netdev");
        let dev = row(&netdevs, "ifname", NODE_DEV).expect("wnode listed");
        assert_eq!(dev["masq_v4"], NODE_IP.to_string());
        let want_v6 = if masquerading {
            Value::from(NODE_IP6.to_string())
        } else {
            Value::Null
        };
        assert_eq!(dev["masq_v6"], want_v6, "{netdevs:?}");
        let nat = bpf_list(&agent, "nat");
        let web6_rows = nat
            .iter()
            .filter(|r| r["saddr"] == web6.to_string() && r["to_addr"] == NODE_IP6.to_string())
            .count();
        assert_eq!(web6_rows > 0, masquerading, "{nat:?}");
        drop(agent);
    }
}

/// The example store's `mars` pool without its skip-masquerade annotation (so only what a test
/// adds decides whether its pods are masqueraded).
fn plain_mars_pool() -> String {
    std::fs::read_to_string(example_store().join("ciliumpodippools/mars.yaml"))
        .expect("mars pool")
        .replace(
            "ipam.cilium.io/skip-masquerade: \"true\"",
            "example.com/owner: mars",
        )
}

/// A multi-pool agent masquerading through `NODE_DEV` with `mars` as given and `extra` flags:
/// asserts the default pool's `web` reaches the external host as the node, and returns the
/// address the external host saw from `mars/rover` and rover's own address, and the agent.
fn rover_seen_by_the_external_host(
    ext: &External,
    mars: &str,
    extra: &[&str],
    port: u16,
) -> (IpAddr, IpAddr, Agent) {
    let mut flags = MASQ_FLAGS.to_vec();
    flags.extend(extra);
    let mut agent = Agent::new(&example_store(), &flags);
    agent.put_doc("ciliumpodippools/mars.yaml", mars);
    agent.start();
    let web = add(&agent, "default", "web");
    let rover = add(&agent, "mars", "rover");
    assert_eq!(
        ext.tcp_peer(&web.netns.path(), port),
        IpAddr::V4(NODE_IP),
        "{extra:?}: the default pool is masqueraded"
    );
    let seen = ext.tcp_peer(&rover.netns.path(), port + 100);
    (seen, rover.v4, agent)
}

/// `--only-masquerade-default-pool`: a pod of a pool that does not skip masquerading keeps its
/// address when the flag is set, and is masqueraded when it is not (the same store, so the flag
/// is what decides).
#[test]
fn only_masquerade_default_pool_keeps_other_pools_addresses() {
    require_root();
    let _node = ThreadNetNs::new();
    let ext = External::new(&["10.200.0.0/16", "10.201.0.0/16"]);
    let mars = plain_mars_pool();
    for (only_default, port) in [(false, 7300), (true, 7301)] {
        let flag = if only_default { "true" } else { "false" };
        let (seen, rover, _agent) = rover_seen_by_the_external_host(
            &ext,
            &mars,
            &["--only-masquerade-default-pool", flag],
            port,
        );
        let want = if only_default {
            rover
        } else {
            IpAddr::V4(NODE_IP)
        };
        assert_eq!(
            seen, want,
            "only-masquerade-default-pool={only_default}: pool mars (no skip-masquerade)"
        );
    }
}

/// weft's per-pool exclusions: pool `mars` (no skip-masquerade) annotated
/// `weft.io/non-masquerade-cidrs` with the external host's network keeps its pods' addresses
/// towards it, while the default pool's pod is masqueraded to the same host; without the
/// annotation the mars pod is masqueraded too (the same store otherwise).
#[test]
fn a_pool_annotation_excludes_its_destinations_from_masquerading() {
    require_root();
    let _node = ThreadNetNs::new();
    let ext = External::new(&["10.200.0.0/16", "10.201.0.0/16"]);
    let plain = plain_mars_pool();
    let annotated = plain.replace(
        "example.com/owner: mars",
        &format!(
            "example.com/owner: mars\n    {}: \"not-a-cidr, {}/24\"",
            weft_agent::daemon::NON_MASQUERADE_CIDRS,
            weft_tests::external::EXT_IP
        ),
    );
    for (doc, excluded, port) in [(&plain, false, 7400), (&annotated, true, 7401)] {
        let (seen, rover, agent) = rover_seen_by_the_external_host(&ext, doc, &[], port);
        let want = if excluded { rover } else { IpAddr::V4(NODE_IP) };
        assert_eq!(
            seen,
            want,
            "annotated={excluded}: pool mars towards {}\n{}",
            weft_tests::external::EXT_IP,
            agent.log()
        );
        if excluded {
            assert!(
                agent.log().contains("not-a-cidr"),
                "the bad entry is reported:\n{}",
                agent.log()
            );
        }
    }
}

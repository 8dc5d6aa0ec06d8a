//! What each fuzz target does with one input: feed it through the same parse and decode path the
//! agent (or `weft-cni`) uses on that input, then check the invariants that are cheap to check.
//! A panic anywhere is a finding. This file is also compiled into the stable test suite
//! (`tests/tests/fuzz_regressions.rs`), which replays the seed corpora and every input the
//! fuzzer found, so it uses nothing but `weft-agent`, `serde_json` and `futures`.

use std::{collections::HashMap, path::Path, time::Instant};

use weft_agent::{
    cni::{
        client::{Invocation, parse},
        proto::Request,
        server::{MAX_REQUEST_BYTES, decode_request, read_request},
        types::{CniError, SUPPORTED_VERSIONS, valid_container_id, valid_ifname},
    },
    crd::{
        ipam::{IpamPoolAllocation, IpamPoolSpec},
        meta::{Namespace, Pod},
        node::{CiliumNode, IpamSpec},
        pool::CiliumPodIPPool,
    },
    ipam::{
        Random,
        input::PoolInput,
        manager::{IpamConfig, IpamManager},
        mode::IpamMode,
    },
    masq::{MasqConfig, exclusions, parse_ip_masq_agent},
    store::{Snapshot, embedded::docs, writeback},
};

/// Every target, by name (also the directory names under `corpus/` and `regressions/`).
pub const TARGETS: [&str; 4] = ["cni_plugin", "socket_request", "crd_decode", "masq_file"];

/// Run target `name` on `data`.
///
/// # Panics
/// On an unknown target, and whenever the input breaks an invariant (that is the point).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "cni_plugin" => cni_plugin(data),
        "socket_request" => socket_request(data),
        "crd_decode" => crd_decode(data),
        "masq_file" => masq_file(data),
        other => panic!("unknown fuzz target {other:?}"),
    }
}

/// `weft-cni`'s view of one invocation: `K=V` environment lines, a NUL byte, then stdin (no
/// NUL: all of it is stdin, with an empty environment).
///
/// Invariants: an error is a printable CNI error; `VERSION` prints JSON naming a supported
/// version; a request carries spec-valid identifiers and is accepted unchanged by the agent's
/// socket decoder (the plugin never builds a request the agent refuses to read).
///
/// # Panics
/// When an invariant does not hold.
pub fn cni_plugin(data: &[u8]) {
    let (env_part, stdin) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (&[][..], data),
    };
    let env: HashMap<String, String> = String::from_utf8_lossy(env_part)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    match parse(&env, stdin) {
        Err(error) => check_cni_error(&error),
        Ok(Invocation::Version(json)) => {
            let v: serde_json::Value = serde_json::from_str(&json).expect("VERSION prints JSON");
            let version = v["cniVersion"].as_str().expect("VERSION names cniVersion");
            assert!(SUPPORTED_VERSIONS.contains(&version), "{json}");
        }
        Ok(Invocation::Ask {
            version,
            request,
            socket,
            delete_queue,
        }) => {
            assert!(SUPPORTED_VERSIONS.contains(&version.as_str()));
            let _ = (socket, delete_queue);
            if let Request::Add(pod) | Request::Check(pod) = request.as_ref() {
                assert!(!pod.netns.as_os_str().is_empty(), "ADD/CHECK without netns");
            }
            if let Request::Add(pod) | Request::Del(pod) | Request::Check(pod) = request.as_ref() {
                assert!(valid_container_id(&pod.container_id), "{pod:?}");
                assert!(valid_ifname(&pod.ifname), "{pod:?}");
                assert!(!pod.owner().is_empty());
            }
            let line = serde_json::to_vec(&request).expect("requests serialise");
            assert_eq!(
                decode_request(&line).expect("the agent reads what the plugin sends"),
                *request
            );
        }
    }
}

/// The agent's unix socket: the bytes of one connection, framed and decoded as the server does.
///
/// Invariants: framing agrees with decoding the whole input when it is one short line; a
/// decoded request re-encodes to the same request; every refusal is a printable CNI error.
///
/// # Panics
/// When an invariant does not hold.
pub fn socket_request(data: &[u8]) {
    let framed = futures::executor::block_on(read_request(data));
    let direct = decode_request(data);
    if !data.contains(&b'\n') && data.len() <= MAX_REQUEST_BYTES {
        assert_eq!(framed, direct, "framing changed a one-line request");
    }
    for result in [framed, direct] {
        match result {
            Ok(request) => {
                let line = serde_json::to_vec(&request).expect("requests serialise");
                assert_eq!(decode_request(&line).expect("re-decodes"), request);
            }
            Err(error) => check_cni_error(&error),
        }
    }
}

fn check_cni_error(error: &CniError) {
    assert!(!error.msg.is_empty(), "an error says what went wrong");
    assert!(error.code != 0, "error code 0 is not an error");
    let json = serde_json::to_string(error).expect("CNI errors serialise");
    let back: CniError = serde_json::from_str(&json).expect("CNI errors read back");
    assert_eq!(&back, error);
}

/// A CiliumNode or CiliumPodIPPool document as the stores read it. The first byte picks the
/// kind (bit 0: pool) and the format (bit 1: JSON, like the API server; else YAML, like the
/// embedded store); the rest is the document text.
///
/// Invariants: a decoded object re-serialises and decodes to the same value; the embedded
/// store's writer renders the generic document (YAML and JSON) so that it reads back the same;
/// a node fed to the IPAM manager in every mode answers allocations with distinct addresses,
/// and the write-back patched into the document still decodes as a CiliumNode.
///
/// # Panics
/// When an invariant does not hold.
pub fn crd_decode(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    // The stores read documents as UTF-8 text (`read_to_string`, the API's JSON).
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let pool = selector & 1 == 1;
    let ext = if selector & 2 == 2 { "json" } else { "yaml" };
    let dir = if pool {
        "ciliumpodippools"
    } else {
        "ciliumnodes"
    };
    let path = Path::new(dir).join(format!("fuzz.{ext}"));
    let Ok(value) = docs::parse_text(&path, text) else {
        return;
    };
    check_render_round_trip(&value);
    if pool {
        if let Ok(pool) = decode_round_trip::<CiliumPodIPPool>(&path, &value) {
            exercise_pool(&pool);
        }
    } else if let Ok(node) = decode_round_trip::<CiliumNode>(&path, &value) {
        exercise_node(&node, &value);
    }
}

fn decode_round_trip<T>(path: &Path, value: &serde_json::Value) -> Result<T, ()>
where
    T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
{
    let decoded: T = docs::decode(path, value.clone()).map_err(|_| ())?;
    let again = serde_json::to_value(&decoded).expect("decoded objects serialise");
    let back: T = docs::decode(path, again.clone()).expect("re-serialised object decodes");
    assert_eq!(back, decoded, "decode ∘ encode changed the object");
    check_render_round_trip(&again);
    Ok(decoded)
}

/// The embedded store's writer output reads back as the same generic document.
fn check_render_round_trip(value: &serde_json::Value) {
    for ext in ["yaml", "json"] {
        let path = Path::new("ciliumnodes").join(format!("rt.{ext}"));
        let text = docs::render_text(&path, value).expect("documents render");
        let back = docs::parse_text(&path, &text)
            .unwrap_or_else(|e| panic!("rendered {ext} does not parse: {e}\n{text}"));
        assert_eq!(
            &back, value,
            "{ext} rendering changed the document:\n{text}"
        );
    }
}

/// Deterministic randomness for the allocators.
struct Counter(u64);

impl Random for Counter {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (self.0 >> 11) % n
    }
}

fn ipam_config(mode: IpamMode) -> IpamConfig {
    IpamConfig {
        mode,
        default_pool: "default".into(),
        pre_allocation: String::new(),
        ipv4: true,
        ipv6: true,
        health_checking: false,
        only_masquerade_default_pool: false,
        bypass_ip_availability_upon_restore: false,
    }
}

fn objects() -> Snapshot {
    let mut snap = Snapshot::default();
    let mut pod = Pod::default();
    pod.metadata.name = "p".into();
    pod.metadata.namespace = "default".into();
    pod.metadata.labels.insert("app".into(), "web".into());
    snap.pods.insert(("default".into(), "p".into()), pod);
    let mut ns = Namespace::default();
    ns.metadata.name = "default".into();
    ns.metadata.labels.insert("team".into(), "a".into());
    snap.namespaces.insert("default".into(), ns);
    snap
}

/// Allocate a few addresses (and release them) with `manager` and `pools`.
fn allocate_some(manager: &mut IpamManager, pools: &[CiliumPodIPPool], snap: &Snapshot) {
    let pools = &PoolInput::all(pools);
    let now = Instant::now();
    let mut rng = Counter(7);
    let mut given = Vec::new();
    for owner in ["default/p", "default/q", "router"] {
        if let Ok(list) = manager.allocate(owner, snap, pools, &mut rng, now) {
            given.extend(list);
        }
    }
    let mut ips: Vec<_> = given.iter().map(|a| a.ip).collect();
    ips.sort_unstable();
    let before = ips.len();
    ips.dedup();
    assert_eq!(
        before,
        ips.len(),
        "an address was handed out twice: {given:?}"
    );
    for a in &given {
        manager.release(a.ip, &a.pool);
    }
    let _ = manager.explain("default/p", snap, pools);
    let _ = manager.status();
}

fn exercise_node(node: &CiliumNode, doc: &serde_json::Value) {
    let snap = objects();
    for mode in IpamMode::ALL {
        let Ok(mut manager) = IpamManager::new(ipam_config(mode)) else {
            continue;
        };
        manager.observe_node(Some(node));
        let _ = manager.ready();
        allocate_some(&mut manager, &[], &snap);
        let write = manager.node_write(Some(node), Instant::now());
        let mut patched = doc.clone();
        let _ = writeback::apply(&mut patched, &write);
        let path = Path::new("ciliumnodes/fuzz.yaml");
        let _: CiliumNode = docs::decode(path, patched.clone())
            .unwrap_or_else(|e| panic!("{mode:?} write-back made the node unreadable: {e}"));
        check_render_round_trip(&patched);
    }
}

fn exercise_pool(pool: &CiliumPodIPPool) {
    let snap = objects();
    let cidrs = |spec: Option<&weft_agent::crd::pool::PoolFamilySpec>| {
        spec.map(|f| {
            f.cidrs
                .iter()
                .filter_map(|c| c.parse().ok())
                .take(4)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
    };
    let mut all = cidrs(pool.spec.ipv4.as_ref());
    all.extend(cidrs(pool.spec.ipv6.as_ref()));
    let mut node = CiliumNode::new("fuzz");
    node.spec.ipam = Some(IpamSpec {
        pools: Some(IpamPoolSpec {
            requested: Vec::new(),
            allocated: vec![
                IpamPoolAllocation {
                    pool: "default".into(),
                    cidrs: vec!["10.0.0.0/28".parse().expect("literal")],
                    ..IpamPoolAllocation::default()
                },
                IpamPoolAllocation {
                    pool: pool.name().to_owned(),
                    allow_first_ip: pool.spec.allow_first_ip.unwrap_or(false),
                    allow_last_ip: pool.spec.allow_last_ip.unwrap_or(false),
                    cidrs: all,
                },
            ],
        }),
        ..IpamSpec::default()
    });
    let pools = [pool.clone()];
    let Ok(mut manager) = IpamManager::new(ipam_config(IpamMode::MultiPool)) else {
        return;
    };
    manager.observe_node(Some(&node));
    manager.restore_finished();
    allocate_some(&mut manager, &pools, &snap);
    let _ = manager.node_write(Some(&node), Instant::now());
    let _ = pool.skip_masquerade();
}

/// The ip-masq-agent configuration file, as [`weft_agent::masq::Masquerade::reload`] reads it.
///
/// Invariants: an accepted file yields masked CIDRs only, and the exclusion list built from it
/// holds every one of them; a refusal names a line inside the file.
///
/// # Panics
/// When an invariant does not hold.
pub fn masq_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/etc/config/ip-masq-agent");
    match parse_ip_masq_agent(path, text) {
        Ok(parsed) => {
            for cidr in &parsed.non_masquerade_cidrs {
                assert_eq!(*cidr, cidr.trunc(), "host bits kept in {cidr}");
            }
            let config = MasqConfig {
                ip_masq_agent_config: Some(path.to_owned()),
                ..MasqConfig::default()
            };
            let list = exclusions(&config, Some(&parsed));
            for cidr in &parsed.non_masquerade_cidrs {
                assert!(list.iter().any(|e| e.cidr == *cidr), "{cidr} dropped");
            }
        }
        Err(error) => {
            let message = error.to_string();
            assert!(
                message.starts_with("/etc/config/ip-masq-agent:"),
                "{message}"
            );
            let lines = text.lines().count().max(1);
            if let weft_agent::masq::MasqError::InvalidCidr { line, .. } = error {
                assert!(
                    (1..=lines).contains(&line),
                    "line {line} of {lines}: {message}"
                );
            }
        }
    }
}

//! `weft-cni` driven as a container runtime drives it (environment + stdin), for everything the
//! plugin decides on its own: VERSION, malformed configuration, missing or invalid `CNI_*`,
//! unsupported versions, an unreachable agent (ADD: try again later; DEL: queued on disk).
//!
//! Then, against a live agent, the calls containerd makes through libcni (`ctr run --cni`,
//! see `tests/containerd.rs`), as regressions: no `CNI_ARGS` (the container id
//! `<namespace>-<name>` names the Pod); DEL after the sandbox, and with it the veth, is gone,
//! with an empty `CNI_NETNS` and libcni's cached `prevResult`, repeated; ADD of a container id
//! whose earlier sandbox died without a DEL (`ctr run -d`); CHECK with `prevResult` after ADD.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
};

use serde_json::{Value, json};
use weft_tests::{
    NamedNetNs, ThreadNetNs,
    agent::{Agent, example_store},
    bin_path,
    containerd::{pinned_endpoints, pinned_ifaces},
    require_root, unique,
};

struct Call {
    code: i32,
    stdout: Value,
}

fn cni(env: &[(&str, &str)], stdin: &str) -> Call {
    let mut cmd = Command::new(bin_path("weft-cni"));
    cmd.env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn weft-cni");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("weft-cni");
    let text = String::from_utf8_lossy(&out.stdout);
    Call {
        code: out.status.code().expect("exit code"),
        stdout: if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text}"))
        },
    }
}

fn conf(version: &str, socket: &Path, queue: &Path) -> String {
    json!({
        "cniVersion": version, "name": "weft", "type": "weft-cni",
        "agent-socket": socket, "delete-queue-dir": queue,
    })
    .to_string()
}

fn dirs() -> (std::path::PathBuf, std::path::PathBuf) {
    let base = std::env::temp_dir().join(unique("weft-cni-"));
    (base.join("absent.sock"), base.join("queue"))
}

#[test]
fn version_lists_the_supported_versions() {
    let call = cni(&[("CNI_COMMAND", "VERSION")], r#"{"cniVersion":"1.0.0"}"#);
    assert_eq!(call.code, 0);
    assert_eq!(call.stdout["cniVersion"], "1.0.0");
    assert_eq!(
        call.stdout["supportedVersions"],
        json!(["0.4.0", "1.0.0", "1.1.0"])
    );
}

#[test]
fn malformed_configuration_is_a_decode_failure() {
    let call = cni(
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/proc/1/ns/net"),
        ],
        "{not json",
    );
    assert_eq!(call.code, 1);
    assert_eq!(call.stdout["code"], 6);
    assert!(
        call.stdout["msg"]
            .as_str()
            .expect("msg")
            .contains("network configuration")
    );
}

#[test]
fn unknown_version_is_incompatible() {
    let (sock, queue) = dirs();
    let call = cni(
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/var/run/netns/x"),
        ],
        &conf("9.9.9", &sock, &queue),
    );
    assert_eq!((call.code, call.stdout["code"].as_u64()), (1, Some(1)));
    assert!(
        call.stdout["details"]
            .as_str()
            .expect("details")
            .contains("1.0.0")
    );
}

#[test]
fn missing_or_invalid_environment_is_code_4() {
    let (sock, queue) = dirs();
    let c = conf("1.0.0", &sock, &queue);
    let cases: [&[(&str, &str)]; 7] = [
        &[
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/var/run/netns/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/var/run/netns/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "-bad"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/var/run/netns/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "way-too-long-name"),
            ("CNI_NETNS", "/var/run/netns/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/etc/passwd"),
        ],
        &[
            ("CNI_COMMAND", "CHECK"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/var/run/netns/../../proc/1/ns/net"),
        ],
    ];
    for env in cases {
        let call = cni(env, &c);
        assert_eq!(
            (call.code, call.stdout["code"].as_u64()),
            (1, Some(4)),
            "{env:?}: {}",
            call.stdout
        );
        assert_eq!(call.stdout["cniVersion"], "1.0.0");
    }
}

#[test]
fn agent_down_add_says_try_again_and_del_is_queued() {
    let (sock, queue) = dirs();
    let c = conf("1.0.0", &sock, &queue);
    let env = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_NETNS", "/var/run/netns/x"),
        ("CNI_ARGS", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=a"),
    ];
    let call = cni(&env, &c);
    assert_eq!(
        (call.code, call.stdout["code"].as_u64()),
        (1, Some(11)),
        "{}",
        call.stdout
    );
    assert!(
        call.stdout["msg"]
            .as_str()
            .expect("msg")
            .contains("not reachable")
    );

    let del = [
        ("CNI_COMMAND", "DEL"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_NETNS", ""),
    ];
    let call = cni(&del, &c);
    assert_eq!(
        (call.code, &call.stdout),
        (0, &Value::Null),
        "DEL succeeds by queueing"
    );
    let queued = std::fs::read_to_string(queue.join("c1-eth0.json")).expect("queued DEL");
    let request: Value = serde_json::from_str(&queued).expect("json");
    assert_eq!(request["command"], "del");
    assert_eq!(request["container_id"], "c1");
    let _ = std::fs::remove_dir_all(queue.parent().expect("base"));
}

#[test]
fn status_and_gc_need_version_1_1() {
    let (sock, queue) = dirs();
    let call = cni(&[("CNI_COMMAND", "STATUS")], &conf("1.0.0", &sock, &queue));
    assert_eq!(call.stdout["code"], 1);
    let call = cni(&[("CNI_COMMAND", "STATUS")], &conf("1.1.0", &sock, &queue));
    assert_eq!(
        call.stdout["code"], 50,
        "agent down: the plugin is not available"
    );
}

/// A live multi-pool agent on `examples/store` (dual-stack) in a private node namespace.
fn live_agent(extra_pods: &[(&str, &str)]) -> (ThreadNetNs, Agent) {
    require_root();
    let node = ThreadNetNs::new();
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--enable-ipv6",
            "true",
            "--ipam-multi-pool-pre-allocation",
            "default=8,mars=4",
        ],
    );
    for (ns, name) in extra_pods {
        agent.put_doc(
            &format!("pods/{ns}/{name}.yaml"),
            &format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n"),
        );
    }
    agent.start();
    (node, agent)
}

/// The network configuration exactly as libcni hands it to the plugin (name and cniVersion
/// injected from the conflist), with libcni's cached `prevResult` when given.
fn libcni_conf(agent: &Agent, prev_result: Option<&Value>) -> String {
    let mut conf = json!({
        "cniVersion": "1.0.0", "name": "weft", "type": "weft-cni",
        "agent-socket": agent.socket, "delete-queue-dir": agent.delete_queue,
    });
    if let Some(prev) = prev_result {
        conf["prevResult"] = prev.clone();
    }
    conf.to_string()
}

/// `weft-cni` called as `ctr run --cni` calls it: `CNI_ARGS` set but empty, both plugin dirs.
fn containerd_call(command: &str, id: &str, netns: &str, conf: &str) -> Call {
    cni(
        &[
            ("CNI_COMMAND", command),
            ("CNI_CONTAINERID", id),
            ("CNI_NETNS", netns),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", ""),
            ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni"),
        ],
        conf,
    )
}

fn ips_of(result: &Value) -> Vec<std::net::IpAddr> {
    result["ips"]
        .as_array()
        .unwrap_or_else(|| panic!("no ips in {result}"))
        .iter()
        .map(|ip| {
            ip["address"]
                .as_str()
                .and_then(|a| a.parse::<ipnet::IpNet>().ok())
                .unwrap_or_else(|| panic!("bad address {ip}"))
                .addr()
        })
        .collect()
}

/// Delete `netns` (as containerd deletes the task) and wait until its veth is gone with it.
fn destroy_sandbox(netns: NamedNetNs, host_veth: &str) {
    drop(netns);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Command::new("ip")
        .args(["link", "show", "dev", host_veth])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "veth {host_veth} outlived its namespace by 10 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn containerd_add_without_cni_args_maps_the_container_id_to_its_pod() {
    let (_node, agent) = live_agent(&[("a-b", "c"), ("a", "b-c")]);
    let conf = libcni_conf(&agent, None);
    let in_pool = |id: &str, cidr: &str| {
        let netns = NamedNetNs::new();
        let add = containerd_call("ADD", id, &netns.path().display().to_string(), &conf);
        assert_eq!(add.code, 0, "ADD {id}: {}", add.stdout);
        let v4 = ips_of(&add.stdout)
            .into_iter()
            .find(std::net::IpAddr::is_ipv4)
            .expect("an IPv4 address");
        let net: ipnet::IpNet = cidr.parse().expect("cidr");
        assert!(net.contains(&v4), "{id} got {v4}, not from {cidr}");
        let del = containerd_call("DEL", id, "", &libcni_conf(&agent, Some(&add.stdout)));
        assert_eq!(del.code, 0, "DEL {id}: {}", del.stdout);
    };
    // `ctr -n mars run … rover` is Pod mars/rover, whose namespace selects pool mars.
    in_pool("mars-rover", "10.201.0.0/28");
    in_pool("default-web", "10.200.0.0/27");
    // No such Pod: the container id is the owner, as before; it gets the default pool.
    in_pool("mars-nopod", "10.200.0.0/27");
    // Two Pods match: refuse rather than guess.
    let netns = NamedNetNs::new();
    let twin = containerd_call("ADD", "a-b-c", &netns.path().display().to_string(), &conf);
    assert_eq!(twin.stdout["code"], 100, "{}", twin.stdout);
    let details = twin.stdout["details"].as_str().unwrap_or_default();
    assert!(
        details.contains("a-b/c") && details.contains("a/b-c") && details.contains("K8S_POD_NAME"),
        "{details}"
    );
}

#[test]
fn containerd_del_after_the_sandbox_is_gone_removes_the_endpoint() {
    let (_node, agent) = live_agent(&[]);
    let netns = NamedNetNs::new();
    let id = "default-web";
    let add = containerd_call(
        "ADD",
        id,
        &netns.path().display().to_string(),
        &libcni_conf(&agent, None),
    );
    assert_eq!(add.code, 0, "ADD: {}", add.stdout);
    let ips = ips_of(&add.stdout);
    let veth = add.stdout["interfaces"][0]["name"]
        .as_str()
        .expect("host interface")
        .to_owned();
    let ifindex = pinned_endpoints(&agent.pin_dir)[&ips[0]];

    // containerd deletes the task (the netns, the veth) first, then calls DEL.
    destroy_sandbox(netns, &veth);
    let del = containerd_call("DEL", id, "", &libcni_conf(&agent, Some(&add.stdout)));
    assert_eq!(
        (del.code, &del.stdout),
        (0, &Value::Null),
        "DEL: {}",
        del.stdout
    );
    let endpoints = pinned_endpoints(&agent.pin_dir);
    assert!(
        ips.iter().all(|ip| !endpoints.contains_key(ip)),
        "endpoints {ips:?} survived DEL: {endpoints:?}"
    );
    assert!(
        !pinned_ifaces(&agent.pin_dir).contains(&ifindex),
        "interface entry {ifindex} survived DEL"
    );
    assert!(
        !agent
            .state
            .join(format!("endpoints/{id}_eth0.json"))
            .exists()
    );

    // Repeated DEL: with libcni's prevResult again, and without (its cache is gone by then).
    for prev in [Some(&add.stdout), None] {
        let again = containerd_call("DEL", id, "", &libcni_conf(&agent, prev));
        assert_eq!(
            (again.code, &again.stdout),
            (0, &Value::Null),
            "repeated DEL"
        );
    }
}

#[test]
fn containerd_add_after_a_missed_del_wires_the_new_sandbox() {
    let (_node, agent) = live_agent(&[]);
    let conf = libcni_conf(&agent, None);
    let id = "default-ghost";
    let first_ns = NamedNetNs::new();
    let first = containerd_call("ADD", id, &first_ns.path().display().to_string(), &conf);
    assert_eq!(first.code, 0, "ADD: {}", first.stdout);
    let veth = first.stdout["interfaces"][0]["name"]
        .as_str()
        .expect("host interface")
        .to_owned();
    // `ctr run -d`, then the task is killed and removed: no DEL ever arrives.
    destroy_sandbox(first_ns, &veth);

    let second_ns = NamedNetNs::new();
    let path = second_ns.path().display().to_string();
    let second = containerd_call("ADD", id, &path, &conf);
    assert_eq!(second.code, 0, "second ADD: {}", second.stdout);
    assert_eq!(
        second.stdout["interfaces"][1]["sandbox"], path,
        "the dead sandbox's result was replayed: {}",
        second.stdout
    );
    let ips = ips_of(&second.stdout);
    let out = second_ns
        .command("ip")
        .args(["-j", "addr", "show", "dev", "eth0"])
        .output()
        .expect("ip addr");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(&format!("\"{}\"", ips[0])),
        "eth0 in the new sandbox lacks {}: {text}",
        ips[0]
    );
    let endpoints = pinned_endpoints(&agent.pin_dir);
    let live = endpoints[&ips[0]];
    for ip in ips_of(&first.stdout) {
        assert!(
            endpoints.get(&ip).is_none_or(|i| *i == live),
            "the dead sandbox's endpoint {ip} is still there: {endpoints:?}"
        );
    }
    // A repeated ADD for the live sandbox is still answered from the record.
    let again = containerd_call("ADD", id, &path, &conf);
    assert_eq!(ips_of(&again.stdout), ips, "repeated ADD is idempotent");
    let del = containerd_call("DEL", id, "", &libcni_conf(&agent, Some(&second.stdout)));
    assert_eq!(del.code, 0, "DEL: {}", del.stdout);
    assert!(pinned_endpoints(&agent.pin_dir).is_empty());
}

#[test]
fn containerd_check_after_add_with_prev_result() {
    let (_node, agent) = live_agent(&[]);
    let netns = NamedNetNs::new();
    let path = netns.path().display().to_string();
    let id = "default-db";
    let add = containerd_call("ADD", id, &path, &libcni_conf(&agent, None));
    assert_eq!(add.code, 0, "ADD: {}", add.stdout);
    let with_prev = libcni_conf(&agent, Some(&add.stdout));
    let check = containerd_call("CHECK", id, &path, &with_prev);
    assert_eq!(
        (check.code, &check.stdout),
        (0, &Value::Null),
        "CHECK: {}",
        check.stdout
    );
    let veth = add.stdout["interfaces"][0]["name"]
        .as_str()
        .expect("host interface")
        .to_owned();
    destroy_sandbox(netns, &veth);
    let check = containerd_call("CHECK", id, &path, &with_prev);
    assert_eq!(
        check.code, 1,
        "CHECK of a dead sandbox must fail: {}",
        check.stdout
    );
    let del = containerd_call("DEL", id, "", &with_prev);
    assert_eq!(del.code, 0, "DEL: {}", del.stdout);
}

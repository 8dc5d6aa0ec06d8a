//! `weft-cni` driven as a container runtime drives it (environment + stdin), for everything the
//! plugin decides on its own: VERSION, malformed configuration, missing or invalid `CNI_*`,
//! unsupported versions, an unreachable agent (ADD: try again later; DEL: queued on disk).

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
};

use serde_json::{Value, json};
use weft_tests::{bin_path, unique};

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
            ("CNI_NETNS", "/x"),
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
    let cases: [&[(&str, &str)]; 5] = [
        &[
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "-bad"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_NETNS", "/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "way-too-long-name"),
            ("CNI_NETNS", "/x"),
        ],
        &[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0"),
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
        ("CNI_NETNS", "/x"),
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

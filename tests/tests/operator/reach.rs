//! The operator when it cannot use the API server: a rejected token (401) is named with the
//! kubeconfig and its user, a missing permission (403) with the verb, resource and RBAC rule,
//! each logged once however often it is retried; `/healthz` answers 503 with the reason (also
//! while waiting for the leader-election lease) and 200 once the server can be used; SIGTERM
//! ends the process whatever it waits on. Also its logging flags: `--log-format json` prints
//! JSON lines, and a `RUST_LOG` that does not parse is refused with the reason.

use std::{net::TcpListener, path::PathBuf, time::Duration};

use serde_json::Value;
use weft_tests::{
    agent::http_get,
    kube::{Answer, Emulator, Verb},
    operator::Operator,
    unique,
};

use super::{Cluster, wait_for};

/// Generous: the process must exit, not exit fast.
const EXIT_DEADLINE: Duration = Duration::from_secs(20);

/// GET `/healthz` once the listener is up: code and body.
fn healthz(op: &mut Operator) -> (u16, String) {
    op.wait_log("serving HTTP", Duration::from_secs(20));
    http_get(&op.addr("--operator-api-serve-addr"), "/healthz")
}

/// Wait until `/healthz` answers `code` with a body containing `text`.
fn wait_healthz(op: &mut Operator, code: u16, text: &str) {
    wait_for(
        &format!("/healthz {code} with {text:?}"),
        Duration::from_secs(30),
        || match healthz(op) {
            (c, body) if c == code && body.contains(text) => Ok(()),
            (c, body) => Err(format!("{c} {body}")),
        },
    );
}

/// SIGTERM, and the exit code (panics when the process has not exited by the deadline).
fn terminate(op: &mut Operator) -> i32 {
    let pid = op.pid().expect("running");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    );
    op.wait_exit(EXIT_DEADLINE).unwrap_or_else(|| {
        panic!(
            "weft-operator still runs {EXIT_DEADLINE:?} after SIGTERM:\n{}",
            op.log()
        )
    })
}

/// A kubeconfig for the API server at `server` with `token`.
fn kubeconfig(server: &str, token: &str) -> PathBuf {
    let path = std::env::temp_dir().join(unique("weft-op-kubeconfig-"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: {server}\n\
         contexts:\n- name: emulator\n  context:\n    cluster: emulator\n    user: emulator\n\
         current-context: emulator\nusers:\n- name: emulator\n  user:\n    token: {token}\n"
    );
    std::fs::write(&path, text).expect("kubeconfig");
    path
}

/// Requests the emulator answered with `code`.
fn answered(emu: &Emulator, code: u16) -> u64 {
    emu.requests()
        .snapshot()
        .iter()
        .filter(|(key, _)| key.code == code)
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn a_rejected_token_names_the_kubeconfig_once_and_healthz_is_503() {
    let cluster = Cluster::start();
    let bad = kubeconfig(&cluster.emu.url(), "an-expired-token");
    let mut op = Operator::new(&bad, &["--cluster-pool-ipv4-cidr", "10.120.0.0/16"]);
    op.spawn();
    let rejected = format!(
        "the API server rejected the credential (user \"emulator\" of kubeconfig {}) with 401 \
         Unauthorized: renew the user's token",
        bad.display()
    );
    op.wait_log(&rejected, Duration::from_secs(20));
    wait_healthz(&mut op, 503, "401 Unauthorized");
    // Retried (the lease acquisition goes on), but said once.
    wait_for("three 401s", Duration::from_secs(30), || {
        let n = answered(&cluster.emu, 401);
        if n >= 3 { Ok(()) } else { Err(format!("{n}")) }
    });
    assert_eq!(
        op.log().matches("401 Unauthorized").count(),
        1,
        "{}",
        op.log()
    );
    assert_eq!(terminate(&mut op), 0, "{}", op.log());
    let _ = std::fs::remove_file(bad);
}

#[test]
fn a_missing_permission_names_the_rule_and_healthz_recovers_when_granted() {
    let cluster = Cluster::start();
    let faults = cluster.emu.faults();
    faults.inject(Some(Verb::Get), "leases", u32::MAX, Answer::Forbidden);
    let mut op = cluster.operator(&["--cluster-pool-ipv4-cidr", "10.120.0.0/16"]);
    op.wait_log(
        "the API server refused to get leases (403 Forbidden)",
        Duration::from_secs(20),
    );
    let log = op.log();
    assert!(
        log.contains(
            "apiGroups: [\"coordination.k8s.io\"], resources: [\"leases\"], verbs: [\"get\"]"
        ),
        "{log}"
    );
    wait_healthz(&mut op, 503, "refused to get leases");
    wait_for("three 403s", Duration::from_secs(30), || {
        let n = answered(&cluster.emu, 403);
        if n >= 3 { Ok(()) } else { Err(format!("{n}")) }
    });
    faults.clear();
    wait_healthz(&mut op, 200, "ok");
    op.wait_log(
        "acquired the leader-election lease",
        Duration::from_secs(30),
    );
    assert_eq!(
        op.log().matches("refused to get leases").count(),
        1,
        "{}",
        op.log()
    );
    assert_eq!(terminate(&mut op), 0, "{}", op.log());
}

/// A local address nothing listens on (yet).
fn free_addr() -> std::net::SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

#[test]
fn an_unreachable_api_server_is_503_until_it_answers() {
    let addr = free_addr();
    let config = kubeconfig(&format!("http://{addr}"), "weft-emulator-token");
    let mut op = Operator::new(&config, &["--cluster-pool-ipv4-cidr", "10.120.0.0/16"]);
    op.spawn();
    wait_healthz(
        &mut op,
        503,
        &format!("cannot reach the API server at http://{addr}/"),
    );
    let cluster = Cluster::with(Emulator::builder().listen(addr).start());
    wait_healthz(&mut op, 200, "ok");
    op.wait_log(
        "acquired the leader-election lease",
        Duration::from_secs(30),
    );
    assert_eq!(
        op.log().matches("cannot reach the API server").count(),
        1,
        "{}",
        op.log()
    );
    assert_eq!(terminate(&mut op), 0, "{}", op.log());
    drop(cluster);
    let _ = std::fs::remove_file(config);
}

#[test]
fn sigterm_ends_the_pool_probe_against_an_unreachable_server() {
    let addr = free_addr();
    let config = kubeconfig(&format!("http://{addr}"), "weft-emulator-token");
    let mut op = Operator::new(
        &config,
        &["--ipam", "multi-pool", "--leader-election=false"],
    );
    // Each retry of the probe at debug: the signal then comes while it retries.
    op.env
        .push(("RUST_LOG".into(), "info,weft_operator::run=debug".into()));
    op.spawn();
    op.wait_log(
        "probing cilium.io/v2 CiliumPodIPPool failed; retrying",
        Duration::from_secs(20),
    );
    assert_eq!(terminate(&mut op), 0, "{}", op.log());
    let _ = std::fs::remove_file(config);
}

#[test]
fn log_format_json_prints_json_lines() {
    let cluster = Cluster::start();
    let mut op = cluster.operator(&[
        "--leader-election=false",
        "--cluster-pool-ipv4-cidr",
        "10.120.0.0/16",
        "--log-format",
        "json",
    ]);
    op.wait_log("serving HTTP", Duration::from_secs(20));
    assert_eq!(terminate(&mut op), 0, "{}", op.log());
    let log = op.log();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let serving = lines
        .iter()
        .find(|l| l["message"] == "serving HTTP")
        .unwrap_or_else(|| panic!("no serving line:\n{log}"));
    assert_eq!(serving["level"], "INFO", "{log}");
    assert_eq!(serving["flag"], "--operator-api-serve-addr", "{log}");
}

#[test]
fn the_log_format_key_of_the_config_dir_counts_from_the_first_line() {
    let cluster = Cluster::start();
    let dir = std::env::temp_dir().join(unique("weft-op-config-"));
    std::fs::create_dir_all(&dir).expect("config dir");
    std::fs::write(dir.join("log-format"), "json").expect("log-format key");
    let dir_flag = dir.display().to_string();
    let mut op = cluster.operator(&[
        "--leader-election=false",
        "--cluster-pool-ipv4-cidr",
        "10.120.0.0/16",
        "--config-dir",
        &dir_flag,
    ]);
    op.wait_log("serving HTTP", Duration::from_secs(20));
    assert_eq!(terminate(&mut op), 0, "{}", op.log());
    let log = op.log();
    let _ = std::fs::remove_dir_all(&dir);
    let first = log.lines().next().unwrap_or_default();
    let first: Value =
        serde_json::from_str(first).unwrap_or_else(|e| panic!("not JSON ({e}):\n{log}"));
    assert_eq!(first["message"], "weft-operator starting", "{log}");
    for line in log.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}

#[test]
fn an_unparsable_rust_log_is_refused_with_the_reason() {
    let cluster = Cluster::start();
    let mut op = Operator::new(&cluster.kubeconfig, &["--leader-election=false"]);
    op.env.push(("RUST_LOG".into(), "infoo".into()));
    op.spawn();
    assert_eq!(op.wait_exit(EXIT_DEADLINE), Some(1), "{}", op.log());
    assert_eq!(
        op.log().trim(),
        "weft-operator: RUST_LOG=\"infoo\": \"infoo\" is not a level (trace, debug, info, warn, \
         error, off); a target needs one, e.g. infoo=debug"
    );
}

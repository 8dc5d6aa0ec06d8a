//! The feature guard on a real agent: Cilium's default Helm-rendered cilium-config (1.20) stops
//! it before it serves, naming each feature weft lacks (NetworkPolicy; its tunnel weft runs)
//! and the way out; with
//! `--allow-unsupported-features` it runs, with a warning per refused key and an info line per
//! ignored one; a refused key in a CiliumNodeConfig stops it too.

use std::{path::PathBuf, time::Duration};

use weft_tests::{
    ThreadNetNs,
    agent::{Agent, example_store},
    require_root,
};

/// Cilium 1.20's chart rendered with its default values (tests/fixtures/cilium-config).
fn helm_default() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/cilium-config/1.20.yaml")
}

fn helm_agent(extra: &[&str]) -> Agent {
    let config = helm_default();
    let mut flags = vec![
        "--config",
        config.to_str().expect("utf-8 path"),
        "--ipam",
        "multi-pool",
    ];
    flags.extend_from_slice(extra);
    Agent::new(&example_store(), &flags)
}

#[test]
fn cilium_s_default_helm_config_stops_the_agent_naming_what_breaks() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = helm_agent(&[]);
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    let log = agent.log();
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}:\n{log}");
    for needed in [
        "enable-policy: \"default\"",
        "enable-k8s-networkpolicy: \"true\"",
        "--allow-unsupported-features",
    ] {
        assert!(
            log.contains(needed),
            "the refusal must say {needed:?}:\n{log}"
        );
    }
    assert!(
        !log.contains("weft-agent ready"),
        "the agent served CNI before refusing its configuration:\n{log}"
    );
}

#[test]
fn a_ciliumnodeconfig_that_fixes_the_refused_keys_lets_the_agent_start() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = helm_agent(&[]);
    // As on a cluster where Cilium's nodes keep tunnel and policy, and weft's nodes get a
    // CiliumNodeConfig.
    agent.put_doc(
        "ciliumnodeconfigs/kube-system/weft.yaml",
        "apiVersion: cilium.io/v2\nkind: CiliumNodeConfig\nmetadata:\n  name: weft\n  \
         namespace: kube-system\nspec:\n  nodeSelector: {}\n  defaults:\n    \
         routing-mode: native\n    enable-policy: never\n",
    );
    agent.start();
    assert!(!agent.log().contains("running without"), "{}", agent.log());
}

#[test]
fn allowed_it_runs_with_a_warning_per_refused_key_and_a_line_per_ignored_one() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = helm_agent(&["--allow-unsupported-features"]);
    agent.start();
    let log = agent.log();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("running without"))
        .collect();
    assert_eq!(warned.len(), 2, "one warning per refused key:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("INFO") && l.contains("ignoring enable-hubble: Hubble")),
        "no info line for enable-hubble:\n{log}"
    );
    assert!(
        !log.contains("weft does not know"),
        "a key of Cilium's default config is unknown:\n{log}"
    );
}

#[test]
fn a_refused_key_in_a_ciliumnodeconfig_stops_the_agent() {
    require_root();
    let _node = ThreadNetNs::new();
    let mut agent = Agent::new(&example_store(), &["--ipam", "multi-pool"]);
    agent.put_doc(
        "ciliumnodeconfigs/kube-system/wg.yaml",
        "apiVersion: cilium.io/v2\nkind: CiliumNodeConfig\nmetadata:\n  name: wg\n  \
         namespace: kube-system\nspec:\n  nodeSelector: {}\n  defaults:\n    \
         enable-wireguard: \"true\"\n",
    );
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    let log = agent.log();
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}:\n{log}");
    assert!(
        log.contains("enable-wireguard: \"true\" (CiliumNodeConfig)")
            && log.contains("traffic between nodes would leave unencrypted"),
        "{log}"
    );
}

//! Configuration as a Cilium user writes it, and the ways it goes wrong: a whole ConfigMap
//! manifest, a file that is no configuration, misspelt keys, Cilium's names for weft's flags,
//! bare boolean flags, `ipam: delegated-plugin`, a bad value; and what a running agent leaves
//! behind (a plain-text log, no socket after SIGTERM).

use std::{
    fs,
    net::IpAddr,
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use serde_json::Value;
use weft_tests::{
    ThreadNetNs,
    agent::{Agent, add, example_store},
    bin_path, require_root, unique,
};

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(unique("weft-config-"));
        fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    /// Write `text` to `name` in the scratch directory; its path.
    fn put(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `weft-agent ipam simulate --store <store> <args>` with only `env` of the node-name variables.
fn simulate(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(bin_path("weft-agent"))
        .args(["ipam", "simulate", "--store"])
        .arg(store)
        .args(args)
        .env_remove("NODE_NAME")
        .env_remove("K8S_NODE_NAME")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .output()
        .expect("run weft-agent ipam simulate")
}

/// The plan `simulate` printed; panics with its stderr when it failed.
fn plan(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "simulate failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("simulate printed no plan ({e}): {stderr}"))
}

const CONFIG_MAP: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
  namespace: kube-system
  resourceVersion: \"1234\"
data:
  ipam: multi-pool
  enable-ipv6: \"true\"
";

#[test]
fn a_configmap_manifest_given_to_config_uses_its_data_and_says_so() {
    let scratch = Scratch::new();
    let file = scratch.put("cilium-config.yaml", CONFIG_MAP);
    let out = simulate(
        &example_store(),
        &[
            "--node-name",
            "node1",
            "--config",
            &file.display().to_string(),
        ],
        &[],
    );
    let plan = plan(&out);
    assert_eq!(
        plan["ipam"], "multi-pool",
        "the ConfigMap's data.ipam was not used"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("kube-system/cilium-config"))
        .collect();
    assert_eq!(
        said.len(),
        1,
        "one info line must say that the ConfigMap's data is used:\n{stderr}"
    );
    assert!(
        said[0].contains("INFO") && said[0].contains(&file.display().to_string()),
        "the line must be informational and name the file: {}",
        said[0]
    );
}

#[test]
fn a_config_file_that_is_no_key_map_nor_configmap_is_refused_naming_it() {
    let scratch = Scratch::new();
    let files = [
        scratch.put(
            "deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: cilium-operator\nspec:\n  replicas: 1\n",
        ),
        scratch.put("list.yaml", "- ipam\n- multi-pool\n"),
        scratch.put("scalar.yaml", "ipam=multi-pool\n"),
    ];
    for file in &files {
        let out = simulate(
            &example_store(),
            &[
                "--node-name",
                "node1",
                "--config",
                &file.display().to_string(),
            ],
            &[],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{} was accepted as a configuration:\n{stderr}",
            file.display()
        );
        assert!(
            stderr.contains(&file.display().to_string()) && stderr.contains("ConfigMap"),
            "the refusal must name {} and say what is accepted:\n{stderr}",
            file.display()
        );
    }
}

#[test]
fn misspelt_keys_from_every_layer_get_one_warning_with_the_closest_key() {
    let scratch = Scratch::new();
    // Not started: only its private copy of the store is used.
    let agent = Agent::new(&example_store(), &[]);
    agent.put_doc(
        "ciliumnodeconfigs/kube-system/pools.yaml",
        "apiVersion: cilium.io/v2\nkind: CiliumNodeConfig\nmetadata:\n  name: pools\n  \
         namespace: kube-system\nspec:\n  nodeSelector: {}\n  defaults:\n    \
         ipam-default-ip-poool: mars\n",
    );
    scratch.put("config-dir/ipam", "multi-pool");
    scratch.put("config-dir/ipam-multipool-pre-allocation", "default=4");
    let file = scratch.put("config.yaml", "enable_ipv6: \"true\"\n");
    let out = simulate(
        &agent.store,
        &[
            "--node-name",
            "node1",
            "--config-dir",
            &scratch.0.join("config-dir").display().to_string(),
            "--config",
            &file.display().to_string(),
        ],
        &[],
    );
    let _ = plan(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ipam-multipool-pre-allocation"))
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one line must name the misspelt keys:\n{stderr}"
    );
    let line = warnings[0];
    assert!(line.contains("WARN"), "not a warning: {line}");
    for (wrong, right) in [
        (
            "ipam-multipool-pre-allocation",
            "ipam-multi-pool-pre-allocation",
        ),
        ("ipam-default-ip-poool", "ipam-default-ip-pool"),
        ("enable_ipv6", "enable-ipv6"),
    ] {
        assert!(
            line.contains(wrong) && line.contains(right),
            "the warning must name {wrong} and its closest key {right}: {line}"
        );
    }
}

#[test]
fn cilium_s_node_name_variable_is_accepted() {
    let out = simulate(&example_store(), &[], &[("K8S_NODE_NAME", "node1")]);
    let plan = plan(&out);
    assert_eq!(
        plan["ciliumNode"]["metadata"]["name"], "node1",
        "the plan is not for K8S_NODE_NAME's node"
    );
    let out = simulate(&example_store(), &[], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("K8S_NODE_NAME") && stderr.contains("--node-name"),
        "without a node name simulate must fail naming --node-name and K8S_NODE_NAME:\n{stderr}"
    );
}

/// Spawn an agent with `flags` that must exit before serving; its exit code and log.
fn refused_at_start(flags: &[&str]) -> (Option<i32>, String) {
    let mut agent = Agent::new(&example_store(), flags);
    agent.spawn();
    let code = agent.wait_exit(Duration::from_secs(20));
    (code, agent.log())
}

#[test]
fn delegated_plugin_is_refused_at_start_naming_the_key_and_the_modes() {
    require_root();
    let _node = ThreadNetNs::new();
    let (code, log) = refused_at_start(&["--ipam", "delegated-plugin"]);
    assert!(
        code.is_some_and(|c| c != 0),
        "an agent with ipam delegated-plugin must exit at start ({code:?}):\n{log}"
    );
    for needed in [
        "ipam",
        "delegated-plugin",
        "cluster-pool",
        "multi-pool",
        "crd",
    ] {
        assert!(
            log.contains(needed),
            "the refusal must name {needed:?}:\n{log}"
        );
    }
    assert!(
        !log.contains("serving /healthz"),
        "the agent said it was serving before refusing its configuration:\n{log}"
    );
}

#[test]
fn a_bad_value_stops_the_agent_before_it_says_it_is_serving() {
    require_root();
    let _node = ThreadNetNs::new();
    let (code, log) = refused_at_start(&["--ipam", "multi-pool", "--enable-ipv6", "maybe"]);
    assert!(
        code.is_some_and(|c| c != 0) && log.contains("enable-ipv6"),
        "a bad enable-ipv6 must stop the agent naming the key ({code:?}):\n{log}"
    );
    assert!(
        !log.contains("serving /healthz"),
        "the agent said it was serving before checking its configuration:\n{log}"
    );
}

#[test]
fn a_bare_boolean_flag_means_true() {
    require_root();
    let _node = ThreadNetNs::new();
    // Last on the command line, as `--enable-ipv6` alone in a DaemonSet's args.
    let mut agent = Agent::new(&example_store(), &["--ipam", "multi-pool", "--enable-ipv6"]);
    agent.start();
    let pod = add(&agent, "default", "web");
    assert!(
        pod.ips.iter().any(IpAddr::is_ipv6),
        "--enable-ipv6 alone did not give the pod an IPv6 address: {:?}",
        pod.ips
    );
}

#[test]
fn the_agent_logs_plain_text_warns_about_unknown_keys_and_removes_its_socket_on_sigterm() {
    require_root();
    let _node = ThreadNetNs::new();
    let scratch = Scratch::new();
    let file = scratch.put("config.yaml", "ipam-multipool-pre-allocation: default=4\n");
    let mut agent = Agent::new(
        &example_store(),
        &[
            "--ipam",
            "multi-pool",
            "--config",
            &file.display().to_string(),
        ],
    );
    agent.start();
    let log = agent.log();
    assert!(
        !log.contains('\u{1b}'),
        "the log is a file, not a terminal, yet has ANSI colour codes:\n{log:?}"
    );
    let warned = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("ipam-multipool-pre-allocation"))
        .count();
    assert_eq!(
        warned, 1,
        "the agent must warn once about the misspelt key:\n{log}"
    );
    assert!(agent.socket.exists(), "no socket while running");
    agent.stop();
    assert!(
        !agent.socket.exists(),
        "the socket {} is left behind after SIGTERM:\n{}",
        agent.socket.display(),
        agent.log()
    );
}

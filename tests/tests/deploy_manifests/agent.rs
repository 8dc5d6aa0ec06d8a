//! The agent's manifests: `rbac.yaml` grants exactly the agent's table, and the DaemonSet agrees
//! with the agent's CLI: its env variables are the agent's, its mounts carry the agent's default
//! paths (socket, pins, state, DEL queue) at their host paths, the init container's command
//! parses as `cni install` into the host's CNI directories, the probes hit the health address,
//! and the rules `kubernetes-validate` cannot see (Bidirectional propagation only in privileged
//! containers, the capability set) hold.

use std::{collections::BTreeSet, net::SocketAddr, path::Path};

use clap::{CommandFactory as _, Parser as _};
use serde_json::{Value, json};
use weft_agent::{
    cli::{Cli, CniCommand, Command as AgentCommand},
    cni::proto::{DEFAULT_DELETE_QUEUE, DEFAULT_SOCKET},
    datapath::DEFAULT_PIN_DIR,
};

use crate::{
    AGENT_CONFIGMAP, AGENT_DAEMONSET, AGENT_RBAC, assert_binds, assert_grants, resource, strings,
    strings_of, table_grants,
};

/// The agent's `--health-addr` default (`WEFT_HEALTH_ADDR`), which the probes must hit.
const HEALTH_ADDR: &str = weft_agent::metrics::DEFAULT_HEALTH_ADDR;

/// What the agent may do: (API group, resource, verbs). Exactly this, no more, no less.
const RBAC: &[(&str, &str, &[&str])] = &[
    ("", "nodes", &["get", "patch"]),
    ("", "pods", &["list", "watch"]),
    ("", "namespaces", &["list", "watch"]),
    (
        "cilium.io",
        "ciliumnodes",
        &["get", "list", "watch", "create", "update"],
    ),
    ("cilium.io", "ciliumnodes/status", &["update"]),
    ("cilium.io", "ciliumpodippools", &["list", "watch"]),
    ("cilium.io", "ciliumnodeconfigs", &["list", "watch"]),
    (
        "cilium.io",
        "ciliumendpoints",
        &["get", "list", "watch", "create", "update", "delete"],
    ),
    (
        "cilium.io",
        "ciliumidentities",
        &["list", "watch", "create", "patch"],
    ),
    ("", "events", &["create"]),
];

/// The agent container's added capabilities (see the comments in agent/daemonset.yaml).
const CAPABILITIES: [&str; 2] = ["NET_ADMIN", "SYS_ADMIN"];

#[test]
fn cluster_role_grants_exactly_the_table() {
    let role = resource(AGENT_RBAC, "ClusterRole");
    let expected = table_grants(
        RBAC.iter()
            .map(|&(group, res, verbs)| (group, res, verbs, &[][..])),
    );
    assert_grants(&role, &expected);

    let account = resource(AGENT_RBAC, "ServiceAccount");
    assert_binds(&resource(AGENT_RBAC, "ClusterRoleBinding"), &role, &account);
    let daemonset = resource(AGENT_DAEMONSET, "DaemonSet");
    assert_eq!(
        daemonset["spec"]["template"]["spec"]["serviceAccountName"],
        account["metadata"]["name"]
    );
    assert_eq!(
        daemonset["metadata"]["namespace"],
        account["metadata"]["namespace"]
    );
}

fn pod_spec() -> Value {
    resource(AGENT_DAEMONSET, "DaemonSet")["spec"]["template"]["spec"].clone()
}

fn pod_containers() -> Vec<Value> {
    let spec = pod_spec();
    let mut all = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    all.extend(spec["containers"].as_array().cloned().unwrap_or_default());
    all
}

fn container(name: &str) -> Value {
    pod_containers()
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name} in the DaemonSet"))
}

/// The volume named `name` in the pod spec.
fn volume(name: &Value) -> Value {
    pod_spec()["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == *name)
        .unwrap_or_else(|| panic!("no volume {name}"))
        .clone()
}

/// The mount of `container` that contains `path`, whose host path is the same path: a file
/// the agent finds at `path` is at `path` on the host too, where weft-cni looks for it.
fn host_identical_mount(container: &Value, path: &str) -> Value {
    let mount = container["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .filter(|m| {
            let at = m["mountPath"].as_str().expect("mountPath");
            Path::new(path).starts_with(at)
        })
        .max_by_key(|m| m["mountPath"].as_str().map_or(0, str::len))
        .unwrap_or_else(|| panic!("{path} is on no volume of {}", container["name"]))
        .clone();
    let host = &volume(&mount["name"])["hostPath"]["path"];
    assert_eq!(
        *host, mount["mountPath"],
        "{path}: mount {} must show the host's same path",
        mount["name"]
    );
    mount
}

/// The `run` subcommand's arguments and the global ones, as clap sees them.
fn run_args() -> Vec<clap::Arg> {
    let cli = Cli::command();
    let run = cli.find_subcommand("run").expect("a run subcommand");
    cli.get_arguments()
        .chain(run.get_arguments())
        .cloned()
        .collect()
}

#[test]
fn daemonset_agrees_with_the_agent_cli() {
    let spec = pod_spec();
    assert_eq!(spec["hostNetwork"], true);
    assert_eq!(spec["priorityClassName"], "system-node-critical");
    assert!(
        strings_of(&spec["tolerations"]).contains(&json!({"operator": "Exists"})),
        "a toleration for every taint"
    );
    let strategy = &resource(AGENT_DAEMONSET, "DaemonSet")["spec"]["updateStrategy"];
    assert_eq!(strategy["type"], "RollingUpdate");
    assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], 1);
    assert_eq!(strategy["rollingUpdate"]["maxSurge"], 0);

    let agent = container("weft-agent");
    assert_eq!(agent["command"], json!(["weft-agent", "run"]));
    assert!(agent.get("args").is_none());

    // Every variable is one the agent reads.
    let args = run_args();
    for var in strings_of(&agent["env"]) {
        let name = var["name"].as_str().expect("env name");
        assert!(
            args.iter().any(|a| a.get_env().is_some_and(|e| e == name)),
            "the agent reads no {name}"
        );
    }
    let env = |name: &str| {
        strings_of(&agent["env"])
            .into_iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no env {name}"))
    };
    assert_eq!(
        env("NODE_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    let config_dir = env("WEFT_CONFIG_DIR")["value"].clone();
    let config_mount = strings_of(&agent["volumeMounts"])
        .into_iter()
        .find(|m| m["mountPath"] == config_dir)
        .expect("WEFT_CONFIG_DIR is a mount");
    assert_eq!(config_mount["readOnly"], true);
    assert_eq!(
        volume(&config_mount["name"])["configMap"]["name"],
        resource(AGENT_CONFIGMAP, "ConfigMap")["metadata"]["name"]
    );

    // The agent's default paths are mounted at their host paths.
    for path in [DEFAULT_SOCKET, DEFAULT_DELETE_QUEUE, DEFAULT_PIN_DIR] {
        host_identical_mount(&agent, path);
    }
    for arg in &args {
        for default in arg.get_default_values() {
            let default = default.to_string_lossy();
            if default.starts_with('/') {
                host_identical_mount(&agent, &default);
            }
        }
    }
    assert_eq!(
        host_identical_mount(&agent, DEFAULT_PIN_DIR)["mountPropagation"],
        "HostToContainer"
    );
    assert_eq!(
        host_identical_mount(&agent, "/var/run/netns/cni-1234")["mountPropagation"],
        "HostToContainer",
        "pod namespaces are mounted after the agent starts"
    );

    // Probes hit the health address.
    let health: SocketAddr = HEALTH_ADDR.parse().expect("address");
    if let Some(arg) = args
        .iter()
        .find(|a| a.get_env().is_some_and(|e| e == "WEFT_HEALTH_ADDR"))
    {
        let defaults: Vec<_> = arg.get_default_values().iter().collect();
        assert_eq!(defaults, [HEALTH_ADDR], "--health-addr default");
    }
    for (probe, path) in [
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ] {
        assert_eq!(
            agent[probe]["httpGet"],
            json!({"host": health.ip().to_string(), "port": health.port(), "path": path}),
            "{probe}"
        );
    }
}

#[test]
fn install_cni_writes_into_the_hosts_cni_directories() {
    let init = container("install-cni");
    let command = strings(&init["command"]);
    let cli =
        Cli::try_parse_from(&command).unwrap_or_else(|e| panic!("{command:?} does not parse: {e}"));
    let AgentCommand::Cni(CniCommand::Install(install)) = cli.command else {
        panic!("{command:?} is not `weft-agent cni install`");
    };
    assert!(install.bin_src.is_none(), "weft-cni beside weft-agent");
    // The host paths behind --bin-dir/--conf-dir are where the agent's defaults point, that
    // is where runtimes look.
    let Ok(defaults) = Cli::try_parse_from(["weft-agent", "cni", "install"]) else {
        panic!("`weft-agent cni install` without flags does not parse");
    };
    let AgentCommand::Cni(CniCommand::Install(defaults)) = defaults.command else {
        panic!("not cni install");
    };
    for (inside, host) in [
        (&install.bin_dir, &defaults.bin_dir),
        (&install.conf_dir, &defaults.conf_dir),
    ] {
        let mount = strings_of(&init["volumeMounts"])
            .into_iter()
            .find(|m| m["mountPath"] == inside.to_string_lossy().as_ref())
            .unwrap_or_else(|| panic!("{} is not a mount", inside.display()));
        assert!(mount.get("readOnly").is_none_or(|r| r == false));
        assert_eq!(
            volume(&mount["name"])["hostPath"]["path"],
            host.to_string_lossy().as_ref()
        );
    }
}

#[test]
fn containers_are_unprivileged_with_the_listed_capabilities() {
    for container in pod_containers() {
        let name = container["name"].as_str().expect("name").to_owned();
        let security = &container["securityContext"];
        let privileged = security["privileged"] == true;
        assert!(!privileged, "{name} is privileged");
        // The API server's rule, which schemas cannot express.
        for mount in strings_of(&container["volumeMounts"]) {
            assert!(
                privileged || mount["mountPropagation"] != "Bidirectional",
                "{name}: Bidirectional propagation ({}) is only allowed in privileged containers",
                mount["name"]
            );
        }
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{name}");
        let added: BTreeSet<String> = security["capabilities"]["add"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| c.as_str().expect("cap").to_owned())
                    .collect()
            })
            .unwrap_or_default();
        let expected: BTreeSet<String> = if name == "weft-agent" {
            CAPABILITIES.iter().map(|c| (*c).to_owned()).collect()
        } else {
            BTreeSet::new()
        };
        assert_eq!(added, expected, "{name}'s capabilities");
    }
}

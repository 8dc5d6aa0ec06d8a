//! weft-operator's manifests (`deploy/operator/`): the ClusterRole and the lease Role grant
//! exactly the tables below and are bound to the Deployment's service account; the Deployment's
//! command line and environment parse with the operator's own `Cli` and resolve with the
//! ConfigMap into a configuration it runs with (the mode the agents use, the agents' default
//! pool created, the Lease where the Role is); the probes hit `/healthz` on the resolved API
//! address; two replicas stay on two nodes; the container is non-root with no capability.

use std::{collections::BTreeMap, net::Ipv4Addr};

use clap::{CommandFactory as _, Parser as _, parser::ValueSource};
use serde_json::{Value, json};
use weft_agent::config::AgentConfig;
use weft_cluster_ipam::{
    Family,
    manager::{Allocator as _, ClusterPoolAllocator, MultiPoolAllocator},
};
use weft_operator::{
    cli::Cli,
    config::{ConfigError, IpamMode, LEASE_NAME, OperatorConfig},
};

use crate::{
    AGENT_CONFIGMAP, assert_binds, assert_grants, config_data, resource, strings, strings_of,
    table_grants,
};

/// What the operator may do cluster-wide: (API group, resource, verbs). Exactly this, no more,
/// no less.
pub(crate) const CLUSTER_RBAC: &[(&str, &str, &[&str])] = &[
    // The Node watch (kube's watcher lists, then watches): deleted nodes, garbage collection.
    ("", "nodes", &["list", "watch"]),
    // The CiliumNode watch; the writer's merge patches of spec.ipam and its deletes.
    (
        "cilium.io",
        "ciliumnodes",
        &["list", "watch", "patch", "delete"],
    ),
    // The writer's merge patch of status.ipam.operator-status.
    ("cilium.io", "ciliumnodes/status", &["patch"]),
    // The pool watch, the v2 probe (a list with limit 1), auto-create-cilium-pod-ip-pools.
    (
        "cilium.io",
        "ciliumpodippools",
        &["list", "watch", "create"],
    ),
    // Warning Events on refused pools (overlapping CIDRs).
    ("", "events", &["create"]),
    // The identity garbage collection: the identity watch, the mark (a merge patch), the
    // delete with preconditions.
    (
        "cilium.io",
        "ciliumidentities",
        &["list", "watch", "patch", "delete"],
    ),
    // The endpoint watch of the identity garbage collection (which identities are in use).
    ("cilium.io", "ciliumendpoints", &["list", "watch"]),
];

/// What the azure component adds cluster-wide, and no other install has: the pod watch
/// (pending pods raise a node's allocation).
pub(crate) const AZURE_RBAC: &[(&str, &str, &[&str])] = &[("", "pods", &["list", "watch"])];

/// What it may do in its own namespace, for leader election: (API group, resource, verbs,
/// resource names; empty: any name). Exactly this.
const LEASE_RBAC: &[(&str, &str, &[&str], &[&str])] = &[
    ("coordination.k8s.io", "leases", &["create"], &[]),
    (
        "coordination.k8s.io",
        "leases",
        &["get", "update"],
        &[LEASE_NAME],
    ),
];

const DEPLOYMENT: &str = "operator/deployment.yaml";
const RBAC_FILE: &str = "operator/rbac.yaml";
const SERVICE_ACCOUNT: &str = "operator/serviceaccount.yaml";
/// The variables the operator reads that no flag does: `POD_NAME`, the base of its lease
/// identity (`run.rs`).
const NOT_FLAGS: [&str; 1] = ["POD_NAME"];
/// A stand-in for the pod's name in `metadata.name` references.
const POD_NAME: &str = "weft-operator-5d9c7b6f4-x2x7k";

fn deployment() -> Value {
    resource(DEPLOYMENT, "Deployment")
}

fn pod_spec() -> Value {
    deployment()["spec"]["template"]["spec"].clone()
}

/// The one container of the pod.
fn container() -> Value {
    let spec = pod_spec();
    assert!(spec.get("initContainers").is_none(), "no init containers");
    let containers = strings_of(&spec["containers"]);
    assert_eq!(containers.len(), 1, "one container");
    assert_eq!(containers[0]["name"], "weft-operator");
    containers[0].clone()
}

/// The container's variable `name`.
fn env(name: &str) -> Value {
    strings_of(&container()["env"])
        .into_iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no env {name}"))
}

/// What variable `var` holds in the pod.
fn env_value(var: &Value) -> String {
    if let Some(value) = var["value"].as_str() {
        return value.to_owned();
    }
    match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
        Some("metadata.namespace") => deployment()["metadata"]["namespace"]
            .as_str()
            .expect("the Deployment's namespace")
            .to_owned(),
        Some("metadata.name") => POD_NAME.to_owned(),
        _ => panic!("{var}: not a value this test knows how to resolve"),
    }
}

/// The container's command line as the operator parses it, with its environment applied as
/// clap applies it: a variable a flag reads counts where the command line does not give that
/// flag. Every variable is one the operator reads.
fn cli() -> Cli {
    let container = container();
    let mut argv = strings(&container["command"]);
    argv.extend(
        strings_of(&container["args"])
            .iter()
            .map(|a| a.as_str().expect("an argument").to_owned()),
    );
    let command = Cli::command();
    let given = command
        .clone()
        .try_get_matches_from(&argv)
        .unwrap_or_else(|e| panic!("{argv:?} does not parse: {e}"));
    let mut full = argv.clone();
    for var in strings_of(&container["env"]) {
        let name = var["name"].as_str().expect("env name");
        let Some(arg) = command
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == name))
        else {
            assert!(NOT_FLAGS.contains(&name), "weft-operator reads no {name}");
            continue;
        };
        if given.value_source(arg.get_id().as_str()) != Some(ValueSource::CommandLine) {
            let long = arg.get_long().expect("a long flag");
            full.push(format!("--{long}={}", env_value(&var)));
        }
    }
    Cli::try_parse_from(&full).unwrap_or_else(|e| panic!("{full:?} does not parse: {e}"))
}

/// The operator's configuration from the Deployment's command line over the config keys `data`.
pub(crate) fn resolve(data: &BTreeMap<String, String>) -> Result<OperatorConfig, ConfigError> {
    OperatorConfig::resolve(&cli(), data)
}

/// What the Deployment runs with.
fn config() -> OperatorConfig {
    resolve(&config_data())
        .unwrap_or_else(|e| panic!("weft-operator refuses its configuration: {e}"))
}

#[test]
fn operator_roles_grant_exactly_the_tables() {
    let cluster_role = resource(RBAC_FILE, "ClusterRole");
    let expected = table_grants(
        CLUSTER_RBAC
            .iter()
            .map(|&(group, res, verbs)| (group, res, verbs, &[][..])),
    );
    assert_grants(&cluster_role, &expected);
    let role = resource(RBAC_FILE, "Role");
    assert_grants(&role, &table_grants(LEASE_RBAC.iter().copied()));

    let account = resource(SERVICE_ACCOUNT, "ServiceAccount");
    assert_binds(
        &resource(RBAC_FILE, "ClusterRoleBinding"),
        &cluster_role,
        &account,
    );
    assert_binds(&resource(RBAC_FILE, "RoleBinding"), &role, &account);
    assert_eq!(
        pod_spec()["serviceAccountName"],
        account["metadata"]["name"]
    );
    assert_eq!(
        deployment()["metadata"]["namespace"],
        account["metadata"]["namespace"]
    );
    // The Lease is where the Role grants it.
    assert_eq!(
        role["metadata"]["namespace"],
        config().lease_namespace.as_str(),
        "the leader-election namespace"
    );
}

#[test]
fn deployment_agrees_with_the_operator_cli() {
    let container = container();
    let cli = cli();
    let config = config();
    // The config directory is the agents' ConfigMap, read-only.
    let dir = cli.config_dir.as_ref().expect("--config-dir");
    let mount = strings_of(&container["volumeMounts"])
        .into_iter()
        .find(|m| m["mountPath"] == dir.to_string_lossy().as_ref())
        .unwrap_or_else(|| panic!("--config-dir {} is not a mount", dir.display()));
    assert_eq!(mount["readOnly"], true);
    let volume = strings_of(&pod_spec()["volumes"])
        .into_iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the config volume");
    assert_eq!(
        volume["configMap"]["name"],
        resource(AGENT_CONFIGMAP, "ConfigMap")["metadata"]["name"]
    );
    // The lease identity and namespace come from the downward API.
    assert_eq!(
        env("POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(
        env("POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );

    assert_serves_the_agents(&config_data(), "weft-config");

    // The probes reach /healthz on the API address through the host's loopback (hostNetwork).
    assert_eq!(pod_spec()["hostNetwork"], true);
    let ip = config.api_addr.ip();
    assert!(
        ip == Ipv4Addr::LOCALHOST || ip.is_unspecified(),
        "operator-api-serve-addr {} is not reachable on 127.0.0.1",
        config.api_addr
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(
            container[probe]["httpGet"],
            json!({"host": Ipv4Addr::LOCALHOST.to_string(), "port": config.api_addr.port(), "path": "/healthz"}),
            "{probe}"
        );
    }
}

/// weft-operator, run by the Deployment on the config keys `data` (from `what`), serves the
/// agents' mode and families, and its allocator accepts the configuration (run.rs builds it the
/// same way); in multi-pool mode the pool the agents fall back to is created with blocks to
/// hand out.
pub(crate) fn assert_serves_the_agents(data: &BTreeMap<String, String>, what: &str) {
    let agent =
        AgentConfig::resolve([data]).unwrap_or_else(|e| panic!("the agent rejects {what}: {e}"));
    let config = resolve(data).unwrap_or_else(|e| panic!("weft-operator rejects {what}: {e}"));
    let mode = config.ipam.as_str();
    assert_eq!(
        mode,
        agent.ipam.to_string(),
        "the operator's and the agents' ipam"
    );
    assert_eq!(
        (config.enable_ipv4, config.enable_ipv6),
        (agent.enable_ipv4, agent.enable_ipv6)
    );
    // Its allocator accepts the configuration (run.rs builds it the same way), and in
    // multi-pool mode the pool the agents fall back to is created with blocks to hand out.
    match config.ipam {
        IpamMode::ClusterPool => {
            if let Err(e) = ClusterPoolAllocator::new(&config.cluster_pool) {
                panic!("the cluster pool is refused: {e}");
            }
        }
        IpamMode::MultiPool => {
            let pool = &agent.default_pool;
            let spec = config.auto_create_pools.get(pool).unwrap_or_else(|| {
                panic!(
                    "auto-create-cilium-pod-ip-pools does not create {pool}, the agents' \
                     ipam-default-ip-pool"
                )
            });
            let mut allocator = MultiPoolAllocator::new(config.enable_ipv4, config.enable_ipv6);
            let refused = allocator
                .pool_upsert(pool, spec)
                .map_err(|e| weft_operator::chain(&e));
            assert_eq!(
                refused,
                Ok(Vec::new()),
                "the pool is accepted without warnings"
            );
            let enabled = |family| match family {
                Family::V4 => config.enable_ipv4,
                Family::V6 => config.enable_ipv6,
            };
            assert!(
                allocator
                    .blocks()
                    .iter()
                    .any(|b| b.pool == *pool && enabled(b.family) && b.free > 0),
                "pool {pool} has no block of an enabled family: {:?}",
                allocator.blocks()
            );
        }
        // Azure needs no pool: the addresses come from the nodes' NICs.
        IpamMode::Azure | IpamMode::Eni => {}
    }
}

#[test]
fn two_replicas_on_two_nodes_one_leading() {
    let deployment = deployment();
    let spec = pod_spec();
    assert_eq!(deployment["spec"]["replicas"], 2, "replicas");
    assert!(config().leader_election, "replicas need leader election");
    // Never two on one node (they would share the host's port 9234 and fail over together)...
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let terms = strings_of(
        &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
    );
    assert!(
        terms.iter().any(|term| {
            term["topologyKey"] == "kubernetes.io/hostname"
                && term.get("namespaces").is_none()
                && term.get("namespaceSelector").is_none()
                && term["labelSelector"]["matchLabels"]
                    .as_object()
                    .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| labels[k] == *v))
        }),
        "a required anti-affinity on kubernetes.io/hostname that selects the operator's own pods: \
         {terms:?}"
    );
    // ...so an update must free a node before the new pod can have it: no surge.
    let strategy = &deployment["spec"]["strategy"];
    assert_eq!(strategy["type"], "RollingUpdate");
    assert_eq!(
        strategy["rollingUpdate"]["maxUnavailable"], 1,
        "maxUnavailable"
    );
    assert_eq!(strategy["rollingUpdate"]["maxSurge"], 0, "maxSurge");

    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    let tolerations = strings_of(&spec["tolerations"]);
    for key in [
        "node-role.kubernetes.io/control-plane",
        "node.kubernetes.io/not-ready",
    ] {
        assert!(
            tolerations
                .iter()
                .any(|t| t["key"] == key && t["operator"] == "Exists" && t.get("effect").is_none()),
            "no toleration of {key}"
        );
    }
    // Not every taint, unlike the agent: a drained node's replica must move elsewhere.
    assert!(
        tolerations.iter().all(|t| t.get("key").is_some()),
        "{tolerations:?}"
    );
}

#[test]
fn operator_runs_as_non_root_without_capabilities() {
    let spec = pod_spec();
    let security = &container()["securityContext"];
    // A container's setting wins over the pod's.
    let effective = |key: &str| match security.get(key) {
        Some(v) if !v.is_null() => v.clone(),
        _ => spec["securityContext"][key].clone(),
    };
    assert_eq!(effective("runAsNonRoot"), true);
    assert!(
        effective("runAsUser").as_u64().is_none_or(|uid| uid != 0),
        "runAsUser 0"
    );
    assert_eq!(effective("seccompProfile")["type"], "RuntimeDefault");
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_ne!(security["privileged"], true);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert!(security["capabilities"].get("add").is_none(), "{security}");
    for host in ["hostPID", "hostIPC"] {
        assert_ne!(spec[host], true, "{host}");
    }
    for volume in strings_of(&spec["volumes"]) {
        assert!(volume.get("hostPath").is_none(), "{volume}");
    }
}

//! A container of a manifest's pod template run by `ctr` as the kubelet would run it: its
//! image, command, environment, securityContext, host network and volume mounts turned into
//! `ctr run` flags. Every field is read from the manifest; one this does not know how to honour
//! fails the test, so a manifest change cannot be silently ignored. Only the things a kubelet
//! itself supplies come from the caller ([`Node`]): the node's network namespace and name, the
//! directories holding ConfigMap volumes, and the API credentials.
//!
//! `ctr` starts from containerd's default set of capabilities and applies `--cap-add` before
//! `--cap-drop`, so `drop: [ALL]` becomes a drop of every capability the add list lacks.

use std::{collections::BTreeMap, path::PathBuf, process::Output};

use serde_json::Value;

use super::Containerd;

/// Every Linux capability (`capability.h`, 0 to 40), by its Kubernetes name.
const CAPABILITIES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// What the kubelet of the node provides to a pod.
#[derive(Debug, Clone)]
pub struct Node {
    /// The node's name (`fieldRef: spec.nodeName`).
    pub name: String,
    /// The node's network namespace (a `hostNetwork` pod joins it).
    pub netns: PathBuf,
    /// Directory holding each ConfigMap's data as files, by ConfigMap name.
    pub config_maps: BTreeMap<String, PathBuf>,
    /// Variables added to every container (the API server's address and credentials, which
    /// the kubelet injects as service-account env and volume).
    pub env: Vec<(String, String)>,
    /// Read-only bind mounts added to every container (host path, container path).
    pub mounts: Vec<(PathBuf, String)>,
}

/// The effective capability mask `container`'s securityContext grants: the bits of its
/// `capabilities.add` (with `drop: [ALL]`, which the manifests use).
#[must_use]
pub fn capability_mask(container: &Value) -> u64 {
    let context = &container["securityContext"];
    assert!(
        dropped_all(context),
        "securityContext.capabilities.drop must be [ALL]"
    );
    added(context).iter().fold(0, |mask, cap| {
        let bit = CAPABILITIES
            .iter()
            .position(|known| known == cap)
            .unwrap_or_else(|| panic!("unknown capability {cap}"));
        mask | (1 << bit)
    })
}

fn added(context: &Value) -> Vec<String> {
    context["capabilities"]["add"]
        .as_array()
        .map(|caps| {
            caps.iter()
                .map(|cap| {
                    let name = cap.as_str().expect("capability names are strings");
                    name.strip_prefix("CAP_").unwrap_or(name).to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn dropped_all(context: &Value) -> bool {
    context["capabilities"]["drop"]
        .as_array()
        .is_some_and(|caps| caps.iter().any(|cap| cap == "ALL"))
}

/// The `ctr run` flags, image, id and command for `container` of pod template `pod` (its
/// `spec`), ready to follow `ctr run`.
///
/// # Panics
/// A field this cannot honour, or a volume the pod does not declare.
#[must_use]
pub fn ctr_run_args(pod: &Value, container: &Value, id: &str, node: &Node) -> Vec<String> {
    let mut args = Vec::new();
    if pod["hostNetwork"] == true {
        args.push(format!("--with-ns=network:{}", node.netns.display()));
    }
    if let Some(context) = pod["securityContext"].as_object() {
        assert!(
            context.is_empty(),
            "pod securityContext {context:?} is not supported here"
        );
    }
    security_args(&container["securityContext"], &mut args);
    env_args(container, node, &mut args);
    mount_args(pod, container, node, &mut args);
    args.push(
        container["image"]
            .as_str()
            .expect("container image")
            .to_owned(),
    );
    args.push(id.to_owned());
    for key in ["command", "args"] {
        for word in container[key].as_array().into_iter().flatten() {
            args.push(word.as_str().expect("command words are strings").to_owned());
        }
    }
    args
}

fn security_args(context: &Value, args: &mut Vec<String>) {
    let Some(fields) = context.as_object() else {
        panic!("every container must have a securityContext");
    };
    // Kubernetes allows privilege escalation unless told not to; ctr forbids it by default.
    let mut no_new_privs = false;
    for (key, value) in fields {
        match key.as_str() {
            "runAsUser" => assert_eq!(value, 0, "the image runs as root; runAsUser must be 0"),
            "readOnlyRootFilesystem" if value == true => args.push("--read-only".into()),
            "readOnlyRootFilesystem" => {}
            "allowPrivilegeEscalation" => no_new_privs = value == false,
            "privileged" => assert!(value == false, "the containers must not be privileged"),
            "capabilities" => {
                let add = added(context);
                for cap in &add {
                    args.push(format!("--cap-add=CAP_{cap}"));
                }
                let drops: Vec<String> = if dropped_all(context) {
                    CAPABILITIES
                        .iter()
                        .filter(|cap| !add.iter().any(|a| a == *cap))
                        .map(|cap| (*cap).to_owned())
                        .collect()
                } else {
                    value["drop"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|cap| cap.as_str().expect("capability").to_owned())
                        .collect()
                };
                for cap in drops {
                    args.push(format!("--cap-drop=CAP_{cap}"));
                }
            }
            "seccompProfile" => match value["type"].as_str() {
                Some("RuntimeDefault") => args.push("--seccomp".into()),
                Some("Unconfined") => {}
                other => panic!("seccompProfile type {other:?} is not supported here"),
            },
            "appArmorProfile" => assert_eq!(
                value["type"], "Unconfined",
                "only an Unconfined AppArmor profile is supported here"
            ),
            other => panic!("securityContext.{other} is not supported here: teach podspec.rs"),
        }
    }
    if !no_new_privs {
        args.push("--allow-new-privs".into());
    }
}

fn env_args(container: &Value, node: &Node, args: &mut Vec<String>) {
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().expect("env name");
        let value = if let Some(value) = var["value"].as_str() {
            value.to_owned()
        } else {
            let path = &var["valueFrom"]["fieldRef"]["fieldPath"];
            assert_eq!(
                path, "spec.nodeName",
                "env {name}: only spec.nodeName is supported"
            );
            node.name.clone()
        };
        args.push(format!("--env={name}={value}"));
    }
    for (name, value) in &node.env {
        args.push(format!("--env={name}={value}"));
    }
}

fn mount_args(pod: &Value, container: &Value, node: &Node, args: &mut Vec<String>) {
    let volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let name = mount["name"].as_str().expect("volumeMount name");
        let volume = volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("volumeMount {name} names no volume of the pod"));
        let src = if let Some(path) = volume["hostPath"]["path"].as_str() {
            PathBuf::from(path)
        } else if let Some(map) = volume["configMap"]["name"].as_str() {
            node.config_maps
                .get(map)
                .unwrap_or_else(|| panic!("no data for ConfigMap {map}"))
                .clone()
        } else {
            panic!("volume {name}: only hostPath and configMap volumes are supported here")
        };
        let access = if mount["readOnly"] == true {
            "ro"
        } else {
            "rw"
        };
        let propagation = match mount["mountPropagation"].as_str() {
            None | Some("None") => "rprivate",
            Some("HostToContainer") => "rslave",
            Some("Bidirectional") => "rshared",
            Some(other) => panic!("mountPropagation {other} of {name}"),
        };
        let dst = mount["mountPath"].as_str().expect("mountPath");
        args.push(format!(
            "--mount=type=bind,src={},dst={dst},options=rbind:{access}:{propagation}",
            src.display()
        ));
    }
    for (src, dst) in &node.mounts {
        args.push(format!(
            "--mount=type=bind,src={},dst={dst},options=rbind:ro",
            src.display()
        ));
    }
}

impl Containerd {
    /// `ctr run --rm` of `args` (from [`ctr_run_args`]) to completion (an init container).
    #[must_use]
    pub fn run_pod_container(&self, namespace: &str, id: &str, args: &[String]) -> Output {
        self.note_namespace(namespace);
        let mut cmd = self.ctr(namespace);
        cmd.args(["run", "--rm"])
            .arg(format!("--cgroup=/{}/{namespace}-{id}", self.cgroup))
            .args(args);
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
    }

    /// `ctr run -d` of `args` (from [`ctr_run_args`]): the task keeps running. Returns the
    /// file its output goes to.
    #[must_use]
    pub fn start_pod_container(&self, namespace: &str, id: &str, args: &[String]) -> PathBuf {
        self.note_namespace(namespace);
        let log = self.base.join(format!("{namespace}-{id}.log"));
        crate::run(
            self.ctr(namespace)
                .args(["run", "-d"])
                .arg(format!("--cgroup=/{}/{namespace}-{id}", self.cgroup))
                .arg(format!("--log-uri=file://{}", log.display()))
                .args(args),
        );
        log
    }
}

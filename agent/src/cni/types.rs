//! CNI wire types (spec 1.0.0 / 1.1.0, with 0.4.0 results): the network configuration a runtime
//! passes on stdin, the success result and the error object, and the validation rules the spec
//! puts on the environment. No IO here.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// CNI versions whose configurations weft accepts (and whose result format it prints).
pub const SUPPORTED_VERSIONS: [&str; 3] = ["0.4.0", "1.0.0", "1.1.0"];

/// Error codes of the CNI spec (and weft's own, from 100 up).
pub mod code {
    /// Incompatible CNI version.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// Unsupported field in the network configuration.
    pub const UNSUPPORTED_FIELD: u32 = 2;
    /// Container unknown or does not exist.
    pub const UNKNOWN_CONTAINER: u32 = 3;
    /// Invalid necessary environment variables.
    pub const INVALID_ENV: u32 = 4;
    /// I/O failure.
    pub const IO_FAILURE: u32 = 5;
    /// Failed to decode content.
    pub const DECODE_FAILURE: u32 = 6;
    /// Invalid network config.
    pub const INVALID_CONFIG: u32 = 7;
    /// Try again later (for example: the pool is not ready yet, the agent is down).
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// STATUS: the plugin is not available.
    pub const NOT_AVAILABLE: u32 = 50;
    /// weft: address allocation failed (pool exhausted, no matching pool, …).
    pub const IPAM_FAILED: u32 = 100;
    /// weft: wiring the pod's interface failed.
    pub const DATAPATH_FAILED: u32 = 101;
}

/// The network configuration on stdin (the fields weft reads; the rest is ignored).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NetConf {
    /// CNI version of the configuration (and of the result to print).
    #[serde(rename = "cniVersion", default)]
    pub cni_version: String,
    /// Network name.
    #[serde(default)]
    pub name: String,
    /// Plugin type (`weft-cni`).
    #[serde(rename = "type", default)]
    pub plugin_type: String,
    /// MTU of the pod interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Agent socket (default `/var/run/weft/weft.sock`, or env `WEFT_SOCK`).
    #[serde(
        rename = "agent-socket",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub agent_socket: Option<String>,
    /// Where DELs are queued while the agent is down (default `/var/run/weft/delete-queue`).
    #[serde(
        rename = "delete-queue-dir",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub delete_queue_dir: Option<String>,
    /// Result of a previous plugin (CHECK and DEL get it from the runtime).
    #[serde(
        rename = "prevResult",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub prev_result: Option<Value>,
    /// GC (1.1.0): attachments that must be kept.
    #[serde(
        rename = "cni.dev/valid-attachments",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub valid_attachments: Option<Vec<Attachment>>,
    /// Only in a network configuration *list*: never in what a runtime gives a plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<Value>,
}

impl NetConf {
    /// The spec's required fields: `cniVersion`, `name` and `type` set, and no `plugins` (a
    /// configuration list is the runtime's to read, one plugin entry at a time).
    ///
    /// # Errors
    /// Code 7 (invalid network config), naming the field and the fix.
    pub fn validate(&self) -> Result<(), CniError> {
        let invalid = |msg: &str, details: String| {
            Err(CniError::new(
                &self.cni_version,
                code::INVALID_CONFIG,
                msg,
                details,
            ))
        };
        if self.plugins.is_some() {
            return invalid(
                "this is a network configuration list, not a plugin configuration",
                "it has \"plugins\"; put the list in the runtime's CNI configuration directory \
                 (e.g. /etc/cni/net.d/05-weft.conflist) and let the runtime call weft-cni with \
                 its entry"
                    .to_owned(),
            );
        }
        if self.cni_version.is_empty() {
            return invalid(
                "the network configuration has no \"cniVersion\"",
                format!("set it to one of {}", SUPPORTED_VERSIONS.join(", ")),
            );
        }
        if self.name.is_empty() {
            return invalid(
                "the network configuration has no \"name\"",
                "set \"name\" to the network's name, e.g. \"weft\"".to_owned(),
            );
        }
        if self.plugin_type.is_empty() {
            return invalid(
                "the network configuration has no \"type\"",
                "set \"type\" to the plugin binary's name, \"weft-cni\"".to_owned(),
            );
        }
        Ok(())
    }
}

/// An attachment named in a GC request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Container id.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// Interface name in the container.
    pub ifname: String,
}

/// A successful ADD result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniResult {
    /// Version of the result format (= the configuration's).
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    /// Host-side and pod-side interfaces.
    pub interfaces: Vec<Interface>,
    /// Addresses given to the pod.
    pub ips: Vec<IpConfig>,
    /// Routes installed in the pod.
    pub routes: Vec<Route>,
    /// DNS (weft sets none; the runtime's own DNS applies).
    pub dns: Value,
}

/// An interface of a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Name.
    pub name: String,
    /// MAC address.
    pub mac: String,
    /// Netns path for interfaces inside the sandbox; absent for host interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// An address of a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig {
    /// 0.4.0 results only: "4" or "6".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Address with prefix length (`10.0.0.5/32`).
    pub address: IpNet,
    /// Gateway (the node's router IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Index into `interfaces` of the interface that carries the address.
    pub interface: usize,
}

/// A route of a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Destination.
    pub dst: IpNet,
    /// Next hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
}

/// The error object a plugin prints on failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("CNI error {code}: {msg}{}", if details.is_empty() { String::new() } else { format!(" ({details})") })]
pub struct CniError {
    /// Version of the configuration (or the newest supported one if it could not be read).
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    /// One of [`code`].
    pub code: u32,
    /// Short message.
    pub msg: String,
    /// Longer explanation, with the fix where there is one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    /// An error with `code`, `msg` and `details` for configuration version `version`.
    #[must_use]
    pub fn new(
        version: &str,
        code: u32,
        msg: impl Into<String>,
        details: impl Into<String>,
    ) -> Self {
        let cni_version = if version.is_empty() { "1.0.0" } else { version };
        Self {
            cni_version: cni_version.to_owned(),
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }
}

/// The spec's container-id rule: starts alphanumeric, then alphanumerics, `_`, `.`, `-`.
#[must_use]
pub fn valid_container_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The spec's interface-name rule: 1–15 bytes, not `.`/`..`, no `/`, `:` or whitespace.
#[must_use]
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
}

/// Directories whose entries are network namespace bind mounts (iproute2, containerd's CRI,
/// CRI-O, podman); `/var/run` is normally a link to `/run`, so both spellings are accepted.
pub const NETNS_DIRS: [&str; 2] = ["/run/netns", "/var/run/netns"];

/// Where a pod's network namespace may be: an entry directly inside one of [`NETNS_DIRS`], or
/// a process's namespace, `/proc/<pid>/ns/net` or `/proc/<pid>/task/<tid>/ns/net` (`ctr run
/// --cni`, cri-dockerd). Purely lexical: an absolute path without `.` or `..` components and
/// with numeric ids (so `/proc/self` is refused). The agent also checks what the path opens.
#[must_use]
pub fn allowed_netns_path(path: &str) -> bool {
    if !path.starts_with('/') || path.contains("//") || path.ends_with('/') {
        return false;
    }
    let parts: Vec<&str> = path[1..].split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return false;
    }
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let in_netns_dir = |dir: &str| {
        path.strip_prefix(dir)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|name| !name.contains('/'))
    };
    match parts.as_slice() {
        ["proc", pid, "ns", "net"] => numeric(pid),
        ["proc", pid, "task", tid, "ns", "net"] => numeric(pid) && numeric(tid),
        _ => NETNS_DIRS.iter().any(|dir| in_netns_dir(dir)),
    }
}

/// The error for a `CNI_NETNS` that [`allowed_netns_path`] refuses (code 4).
#[must_use]
pub fn netns_refused(version: &str, netns: &str) -> CniError {
    CniError::new(
        version,
        code::INVALID_ENV,
        "CNI_NETNS is not a network namespace path weft accepts",
        format!(
            "got {netns:?}; it must be an entry of {} or /proc/<pid>/ns/net (/proc/<pid>/task/<tid>/ns/net)",
            NETNS_DIRS.join(" or ")
        ),
    )
}

/// `K8S_POD_NAMESPACE=a;K8S_POD_NAME=b` → pairs (empty or malformed items are skipped).
#[must_use]
pub fn parse_cni_args(args: &str) -> Vec<(String, String)> {
    args.split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_and_ifnames_follow_the_spec() {
        assert!(valid_container_id("abc-123_x.y"));
        assert!(!valid_container_id("-abc"));
        assert!(!valid_container_id(""));
        assert!(!valid_container_id("a/b"));
        assert!(valid_ifname("eth0"));
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "sixteen-chars-xx"] {
            assert!(!valid_ifname(bad), "{bad:?}");
        }
    }

    #[test]
    fn netns_paths_must_be_in_a_netns_dir_or_a_process() {
        for good in [
            "/var/run/netns/cni-1234",
            "/run/netns/x",
            "/proc/42/ns/net",
            "/proc/42/task/43/ns/net",
        ] {
            assert!(allowed_netns_path(good), "{good}");
        }
        for bad in [
            "",
            "x",
            "/x",
            "/etc/passwd",
            "/var/run/netns",
            "/var/run/netns/",
            "/var/run/netns/../../etc/passwd",
            "/var/run/netns/a/b",
            "/var/run/netns//x",
            "/var/run/netns/./x",
            "/var/run/netnsx/y",
            "/proc/self/ns/net",
            "/proc/thread-self/ns/net",
            "/proc/1/ns/pid",
            "/proc/1/ns/net/",
            "/proc/1/root/var/run/netns/x",
            "/proc/1/task/x/ns/net",
        ] {
            assert!(!allowed_netns_path(bad), "{bad}");
        }
    }

    #[test]
    fn cni_args_parse() {
        let args = parse_cni_args("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=a;junk");
        assert_eq!(args[1], ("K8S_POD_NAMESPACE".into(), "default".into()));
        assert_eq!(args.len(), 3);
    }

    #[test]
    fn a_configuration_needs_version_name_and_type_and_no_plugins() {
        let conf = |json: Value| -> NetConf { serde_json::from_value(json).expect("decodes") };
        let full = serde_json::json!({"cniVersion": "1.0.0", "name": "weft", "type": "weft-cni"});
        conf(full.clone()).validate().expect("complete");
        for (field, says) in [
            ("cniVersion", "no \"cniVersion\""),
            ("name", "no \"name\""),
            ("type", "no \"type\""),
        ] {
            let mut json = full.clone();
            json.as_object_mut().expect("object").remove(field);
            let error = conf(json).validate().expect_err(field);
            assert_eq!(error.code, code::INVALID_CONFIG, "{error}");
            assert!(error.msg.contains(says), "{error}");
        }
        let mut list = full;
        list["plugins"] = serde_json::json!([{"type": "weft-cni"}]);
        let error = conf(list).validate().expect_err("a list");
        assert!(error.msg.contains("configuration list"), "{error}");
    }

    #[test]
    fn error_json_has_the_spec_fields() {
        let e = CniError::new("", code::INVALID_ENV, "CNI_IFNAME is missing", "set it");
        let v = serde_json::to_value(&e).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"cniVersion": "1.0.0", "code": 4, "msg": "CNI_IFNAME is missing", "details": "set it"})
        );
    }
}

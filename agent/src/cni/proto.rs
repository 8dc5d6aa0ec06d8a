//! The request/response protocol between `weft-cni` and the agent over the agent's unix
//! socket: one JSON request line, one JSON response line, per connection. Shared by the plugin
//! (client) and `cni::server`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::types::{Attachment, CniError, CniResult};

/// Default agent socket.
pub const DEFAULT_SOCKET: &str = "/var/run/weft/weft.sock";
/// Default directory of queued DELs.
pub const DEFAULT_DELETE_QUEUE: &str = "/var/run/weft/delete-queue";

/// What the plugin asks the agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "lowercase")]
pub enum Request {
    /// Allocate addresses, wire the pod, register the endpoint.
    Add(PodRequest),
    /// Remove the endpoint, unwire the pod, release its addresses (idempotent).
    Del(PodRequest),
    /// Verify that the attachment is as ADD left it.
    Check(PodRequest),
    /// Is the agent ready to serve ADDs?
    Status {
        /// Version of the configuration.
        cni_version: String,
    },
    /// Which pool each family of `owner` gets and why (`weft-agent ipam explain`).
    Explain {
        /// `namespace/pod`.
        owner: String,
    },
    /// The agent's own status (`weft-agent status`; not a CNI command).
    AgentStatus,
    /// Remove every attachment not listed.
    Gc {
        /// Version of the configuration.
        cni_version: String,
        /// Attachments to keep.
        valid: Vec<Attachment>,
    },
}

/// One attachment's request, as built from `CNI_*` and stdin.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRequest {
    /// `cniVersion` of the configuration (format of the result).
    pub cni_version: String,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_NETNS` (empty on a DEL whose sandbox is gone).
    pub netns: PathBuf,
    /// `K8S_POD_NAMESPACE` from `CNI_ARGS` (empty outside Kubernetes).
    pub pod_namespace: String,
    /// `K8S_POD_NAME` from `CNI_ARGS`.
    pub pod_name: String,
    /// MTU from the configuration.
    pub mtu: Option<u32>,
}

impl PodRequest {
    /// Cilium's IPAM owner string: `namespace/pod`, or the container id outside Kubernetes.
    #[must_use]
    pub fn owner(&self) -> String {
        if self.pod_namespace.is_empty() || self.pod_name.is_empty() {
            self.container_id.clone()
        } else {
            format!("{}/{}", self.pod_namespace, self.pod_name)
        }
    }
}

/// The agent's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Response {
    /// ADD: the result to print.
    Added(CniResult),
    /// DEL, CHECK, STATUS, GC succeeded (nothing to print).
    Done,
    /// `Explain`: one line per family.
    Explained(Vec<String>),
    /// `AgentStatus`: the report.
    Status(Box<crate::status::AgentStatus>),
    /// The CNI error to print.
    Error(CniError),
}

//! The Kubernetes side of the agent, and the only module that imports kube: the client (from a
//! kubeconfig or the in-cluster service account), the resources weft reads and writes, node
//! discovery (the own CiliumNode is created and seeded from the v1.Node), the store that turns
//! watches into snapshots, the one task that writes the CiliumNode back, and the one that
//! creates it again when it is deleted while the agent runs.
//!
//! Objects travel as `DynamicObject`s and are decoded into the wire types of `crate::crd`
//! (which keep every field weft does not model), so nothing here depends on generated Go-shaped
//! structs and a write never drops what another writer (the operator) put in the object.
//!
//! The Kubernetes store implements `store::Store` and counts its writes in
//! `metrics::WriteStats`; it never names the embedded store nor the daemon, which picks one of
//! the two (`daemon::NodeStore`). Errors are written with `crate::error::chain`.

pub mod discovery;
pub mod endpoints;
mod events;
mod fold;
mod recreate;
pub mod seed;
mod store;
pub mod taint;
mod writer;

use std::path::{Path, PathBuf};

use kube::Client;
pub use weft_k8s::{
    client::status_code,
    instrument,
    resource::{self as resources, DecodeError, FieldError, Resource},
};

pub use self::store::KubeStore;

/// Why talking to the API server failed.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// No client: no kubeconfig or service account, or it does not work.
    #[error(transparent)]
    Connect(#[from] weft_k8s::client::ConnectError),
    /// The API server turned the agent away: its credential is rejected (401: which one and
    /// the fix) or its service account lacks a permission (403: which, and the RBAC rule).
    #[error(transparent)]
    Refused(Box<weft_k8s::access::Refusal>),
    /// A request failed (after retries where they make sense).
    #[error("{verb} {resource}")]
    Api {
        /// The verb.
        verb: &'static str,
        /// The resource.
        resource: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A test injected a failure (`WEFT_TEST_FAULTS`).
    #[error(transparent)]
    Injected(#[from] crate::faults::Injected),
    /// An object the agent built is not one of its resource.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Every identity id tried for a new CiliumIdentity was taken by another agent meanwhile.
    #[error("ciliumidentities: {attempts} identity ids in a row were taken")]
    IdentitiesTaken {
        /// How many ids were tried.
        attempts: u32,
    },
    /// Azure IPAM needs the node's provider ID.
    #[error("v1.Node {node} cannot be used for Azure IPAM")]
    ProviderId {
        /// The node.
        node: String,
        /// What is wrong with its provider ID.
        #[source]
        source: seed::SeedError,
    },
    /// The custom CNI configuration (`read-cni-conf`) could not be read.
    #[error("reading the custom CNI configuration {path} (read-cni-conf)")]
    CniConf {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The custom CNI configuration is not JSON.
    #[error("custom CNI configuration {path} (read-cni-conf)")]
    CniConfJson {
        /// The file.
        path: PathBuf,
        /// Where and why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// The custom CNI configuration is JSON of the wrong shape.
    #[error("custom CNI configuration {path} (read-cni-conf)")]
    CniConfParse {
        /// The file.
        path: PathBuf,
        /// The field that does not fit.
        #[source]
        source: FieldError,
    },
}

impl K8sError {
    /// Classify a failed request: a 401 or 403 becomes [`K8sError::Refused`].
    pub(crate) fn from_api(verb: &'static str, resource: &str, source: kube::Error) -> Self {
        match status_code(&source).and_then(|code| refusal(code, verb, resource)) {
            Some(refusal) => Self::Refused(Box::new(refusal)),
            None => Self::Api {
                verb,
                resource: resource.to_owned(),
                source,
            },
        }
    }

    /// Worth retrying: the API server is unreachable or overloaded, not refusing us.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Api { source, .. } => match status_code(source) {
                Some(code) => code == 429 || code >= 500 || code == 409,
                None => true,
            },
            _ => false,
        }
    }
}

/// Where a 403's fix points.
const RBAC_HINT: &str = "; deploy/agent/rbac.yaml has the ClusterRole weft-agent needs";

/// The refusal a 401 or 403 to `verb` on `resource` means (`None` for other codes).
pub(crate) fn refusal(code: u16, verb: &str, resource: &str) -> Option<weft_k8s::access::Refusal> {
    weft_k8s::access::Refusal::of_status(
        code,
        verb,
        resource,
        weft_k8s::access::group_of(resource),
        RBAC_HINT,
    )
}

/// A client from `kubeconfig`, or else from `KUBECONFIG`, `~/.kube/config` or the in-cluster
/// service account (kube's usual inference). With `api_metrics`, every request it sends is
/// timed by verb, resource and response code.
///
/// # Errors
/// No usable configuration, or the client cannot be built from it.
pub async fn connect(
    kubeconfig: Option<&Path>,
    api_metrics: Option<crate::metrics::KubeApiMetrics>,
) -> Result<Client, K8sError> {
    Ok(weft_k8s::client::connect(
        kubeconfig,
        api_metrics,
        " (or --store DIR for the single-host store)",
    )
    .await?)
}

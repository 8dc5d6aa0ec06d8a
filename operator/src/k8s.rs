//! The operator's Kubernetes side: watches of CiliumNodes, CiliumPodIPPools, v1 Nodes (and in
//! cloud modes Pods) fed to the node manager ([`controller`]), the one CiliumNode writer ([`writer`]), and the pools
//! created at start ([`pools`]). Objects travel as `DynamicObject`s and are read field by field
//! ([`weft_cluster_ipam::node::NodeView`]) or through `weft_k8s::crd`, so nothing here drops a field another
//! writer put in an object.

pub mod controller;
pub mod pools;
pub mod writer;

use weft_k8s::{DecodeError, client::status_code};

/// Why the operator's Kubernetes side stopped.
#[derive(Debug, thiserror::Error)]
pub enum OperatorK8sError {
    /// The operator's service account may not do what it needs.
    #[error(
        "the API server refused to {verb} {resource} ({code}): grant the operator's service \
         account `{verb}` on `{resource}` (deploy/operator/rbac.yaml has the ClusterRole it needs)"
    )]
    Forbidden {
        /// The verb.
        verb: &'static str,
        /// The resource.
        resource: String,
        /// 401 or 403.
        code: u16,
    },
    /// A request failed.
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
    /// A watch failed for good.
    #[error("watching {resource}")]
    Watch {
        /// The resource.
        resource: &'static str,
        /// The watcher's error.
        #[source]
        source: kube::runtime::watcher::Error,
    },
    /// An object built by the operator is not one.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

impl OperatorK8sError {
    /// Classify a failed request: 401/403 become [`OperatorK8sError::Forbidden`].
    #[must_use]
    pub fn from_api(verb: &'static str, resource: &str, source: kube::Error) -> Self {
        match status_code(&source) {
            Some(code @ (401 | 403)) => Self::Forbidden {
                verb,
                resource: resource.to_owned(),
                code,
            },
            _ => Self::Api {
                verb,
                resource: resource.to_owned(),
                source,
            },
        }
    }
}

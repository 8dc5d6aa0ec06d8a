//! The daemon's choice of store: the embedded store in a directory or the Kubernetes API.
//! The daemon is the composition root, so the one type that names both stores lives here;
//! `store` (the trait and the embedded store) and `k8s` (the Kubernetes store) never name
//! each other's stores.

use std::sync::Arc;

use tokio::sync::watch;

use crate::{
    k8s::KubeStore,
    metrics::WriteStats,
    store::{NodeWrite, Snapshot, Store, StoreError, embedded::EmbeddedStore},
};

/// The store the agent runs on: a directory, or the Kubernetes API.
#[derive(Debug, Clone)]
pub enum NodeStore {
    /// `--store DIR`.
    Embedded(EmbeddedStore),
    /// The API server.
    Kube(KubeStore),
}

impl NodeStore {
    /// The writer's counters.
    #[must_use]
    pub fn stats(&self) -> &WriteStats {
        match self {
            Self::Embedded(s) => s.stats(),
            Self::Kube(s) => s.stats(),
        }
    }
}

impl Store for NodeStore {
    fn snapshots(&self) -> watch::Receiver<Arc<Snapshot>> {
        match self {
            Self::Embedded(s) => s.snapshots(),
            Self::Kube(s) => s.snapshots(),
        }
    }

    fn write_node(&self, write: NodeWrite, base_version: &str) {
        match self {
            Self::Embedded(s) => s.write_node(write, base_version),
            Self::Kube(s) => s.write_node(write, base_version),
        }
    }

    async fn flush(&self) -> Result<(), StoreError> {
        match self {
            Self::Embedded(s) => s.flush().await,
            Self::Kube(s) => s.flush().await,
        }
    }
}

//! Connecting to the API server: a `kube::Client` from an explicit kubeconfig, or else from
//! kube's usual inference (`KUBECONFIG`, `~/.kube/config`, the in-cluster service account),
//! optionally with every request timed ([`crate::instrument`]).

use std::path::{Path, PathBuf};

use kube::{
    Client, Config,
    client::ClientBuilder,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{api_metrics::KubeApiMetrics, instrument};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read.
    #[error("reading kubeconfig {path}; pass --kubeconfig or set KUBECONFIG")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither a kubeconfig nor the in-cluster service account was found.
    #[error(
        "no Kubernetes configuration: run in a pod with a service account, set KUBECONFIG, or \
         pass --kubeconfig{hint}"
    )]
    Infer {
        /// What else the program accepts (the agent: ` (or --store DIR …)`).
        hint: &'static str,
        /// Why inference failed.
        #[source]
        source: kube::config::InferConfigError,
    },
    /// The client could not be built from the configuration.
    #[error("building the Kubernetes client")]
    Client(#[source] kube::Error),
}

/// A client from `kubeconfig`, or else from `KUBECONFIG`, `~/.kube/config` or the in-cluster
/// service account. With `api_metrics`, every request it sends is timed by verb, resource and
/// response code. `hint` is appended to the "no configuration" error (what else the program
/// accepts instead of a cluster), e.g. `" (or --store DIR for the single-host store)"`.
///
/// # Errors
/// No usable configuration, or the client cannot be built from it.
pub async fn connect(
    kubeconfig: Option<&Path>,
    api_metrics: Option<KubeApiMetrics>,
    hint: &'static str,
) -> Result<Client, ConnectError> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|source| ConnectError::Kubeconfig {
                path: path.to_path_buf(),
                source,
            })?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|source| ConnectError::Kubeconfig {
                    path: path.to_path_buf(),
                    source,
                })?
        }
        None => Config::infer()
            .await
            .map_err(|source| ConnectError::Infer { hint, source })?,
    };
    let Some(metrics) = api_metrics else {
        return Client::try_from(config).map_err(ConnectError::Client);
    };
    let builder = ClientBuilder::try_from(config).map_err(ConnectError::Client)?;
    Ok(builder
        .with_layer(&tower::layer::layer_fn(|service| {
            instrument::Timed::new(service, metrics.clone())
        }))
        .build())
}

/// The HTTP status of an API error, if the server answered with one.
#[must_use]
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

//! Connecting to the API server: a `kube::Client` from an explicit kubeconfig, or else from
//! kube's usual inference (`KUBECONFIG`, `~/.kube/config`, the in-cluster service account),
//! optionally with every request timed ([`crate::instrument`]), and every answer recorded in
//! an [`ApiReach`] ([`crate::reach`]) that `/healthz` asks and that logs each change of state
//! once. The credential used is recorded for the texts of [`crate::access::Refusal`].

use std::path::{Path, PathBuf};

use kube::{
    Client, Config,
    client::ClientBuilder,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{
    access::{self, Credential},
    api_metrics::KubeApiMetrics,
    instrument,
    reach::{ApiReach, Watched},
};

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
    let (config, credential) = configure(kubeconfig, hint).await?;
    access::set_credential(credential);
    let builder = ClientBuilder::try_from(config).map_err(ConnectError::Client)?;
    Ok(match api_metrics {
        None => builder.build(),
        Some(metrics) => builder
            .with_layer(&tower::layer::layer_fn(|service| {
                instrument::Timed::new(service, metrics.clone())
            }))
            .build(),
    })
}

/// As [`connect`], and the [`ApiReach`] every answer the client gets is recorded in (which logs
/// each change of state once: for a program that retries rather than fails);
/// `rbac_hint` is appended to a 403's fix (where the program's RBAC rules are).
///
/// # Errors
/// No usable configuration, or the client cannot be built from it.
pub async fn connect_watched(
    kubeconfig: Option<&Path>,
    api_metrics: Option<KubeApiMetrics>,
    hint: &'static str,
    rbac_hint: &'static str,
) -> Result<(Client, ApiReach), ConnectError> {
    let (config, credential) = configure(kubeconfig, hint).await?;
    access::set_credential(credential);
    let reach = ApiReach::new(&config.cluster_url.to_string(), rbac_hint);
    let builder = ClientBuilder::try_from(config)
        .map_err(ConnectError::Client)?
        .with_layer(&tower::layer::layer_fn(|service| {
            Watched::new(service, reach.clone())
        }));
    let client = match api_metrics {
        None => builder.build(),
        Some(metrics) => builder
            .with_layer(&tower::layer::layer_fn(|service| {
                instrument::Timed::new(service, metrics.clone())
            }))
            .build(),
    };
    Ok((client, reach))
}

/// The client configuration and where its credential comes from.
async fn configure(
    kubeconfig: Option<&Path>,
    hint: &'static str,
) -> Result<(Config, Credential), ConnectError> {
    let Some(path) = kubeconfig else {
        let config = Config::infer()
            .await
            .map_err(|source| ConnectError::Infer { hint, source })?;
        let credential = inferred_credential(&config);
        return Ok((config, credential));
    };
    let file = Kubeconfig::read_from(path).map_err(|source| ConnectError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    })?;
    let user = current_user(&file);
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|source| ConnectError::Kubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
    let credential = Credential::Kubeconfig {
        path: path.to_path_buf(),
        user,
    };
    Ok((config, credential))
}

/// The user the current context of `file` names.
fn current_user(file: &Kubeconfig) -> Option<String> {
    let current = file.current_context.as_deref()?;
    file.contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone())
}

/// Which credential kube's inference picked: a kubeconfig (`KUBECONFIG`, else
/// `~/.kube/config`) when one was read, else the in-cluster service-account token.
fn inferred_credential(config: &Config) -> Credential {
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .filter(|v| !v.is_empty())
        .map(|v| {
            std::env::split_paths(&v)
                .next()
                .unwrap_or_else(|| PathBuf::from(&v))
        })
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".kube/config"))
                .filter(|p| p.exists())
        });
    match (kubeconfig, &config.auth_info.token_file) {
        (Some(path), _) => {
            let user = Kubeconfig::read_from(&path)
                .ok()
                .as_ref()
                .and_then(current_user);
            Credential::Kubeconfig { path, user }
        }
        (None, token_file) => Credential::ServiceAccount {
            token_file: token_file
                .clone()
                .unwrap_or_else(|| "/var/run/secrets/kubernetes.io/serviceaccount/token".into()),
        },
    }
}

/// The HTTP status of an API error, if the server answered with one.
#[must_use]
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

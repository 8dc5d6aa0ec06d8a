//! Azure IPAM's composition: the cloud from IMDS `azEnvironment` (or the ARM endpoint given),
//! the subscription and resource group (flags, else IMDS), the credential chain, the ARM
//! client with the configured rate limit, and the instances cache over it. Checks that can
//! fail before any request (a resource ID given as the identity's client ID) run first.

use std::sync::Arc;

use tracing::info;
use weft_cluster_ipam::operator_keys as keys;

use super::{
    api::{ArmClient, ArmError, ArmSettings},
    auth::{AuthError, Credential, CredentialOptions},
    imds::{self, Imds, ImdsError},
    instances::Instances,
};
use crate::{
    config::{AzureConfig, CloudConfig},
    metrics::Metrics,
};

/// The Azure provider the operator runs with.
pub type AzureProvider = Instances<ArmClient>;

/// Why Azure IPAM could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// IMDS could not be read.
    #[error(
        "reading the instance metadata (--{} {endpoint}); outside Azure set --{}, --{} and --{}",
        keys::AZURE_IMDS_ENDPOINT.key,
        keys::AZURE_SUBSCRIPTION_ID.key,
        keys::AZURE_RESOURCE_GROUP.key,
        keys::AZURE_ARM_ENDPOINT.key
    )]
    Imds {
        /// The IMDS base URL.
        endpoint: String,
        /// Why.
        #[source]
        source: ImdsError,
    },
    /// No credential could be built.
    #[error("building the Azure credential")]
    Credential(#[source] AuthError),
    /// The ARM client could not be built.
    #[error("building the ARM client")]
    Client(#[source] ArmError),
}

/// Build the provider.
///
/// # Errors
/// See [`SetupError`].
pub async fn provider(
    config: &AzureConfig,
    limits: &CloudConfig,
    metrics: &Metrics,
) -> Result<AzureProvider, SetupError> {
    let imds_error = |source| SetupError::Imds {
        endpoint: config.imds_endpoint.clone(),
        source,
    };
    let metadata = Imds::new(&config.imds_endpoint).map_err(imds_error)?;
    // Cilium always reads the cloud from IMDS; it also gives the token audience.
    let environment = metadata.az_environment().await.map_err(imds_error)?;
    let cloud = imds::cloud(environment.trim()).map_err(imds_error)?;
    let subscription = if config.subscription_id.is_empty() {
        metadata.subscription_id().await.map_err(imds_error)?
    } else {
        config.subscription_id.clone()
    };
    let resource_group = if config.resource_group.is_empty() {
        metadata.resource_group_name().await.map_err(imds_error)?
    } else {
        config.resource_group.clone()
    };
    let endpoint = if config.arm_endpoint.is_empty() {
        cloud.arm_endpoint.to_owned()
    } else {
        config.arm_endpoint.clone()
    };
    let mut options = CredentialOptions::for_cloud(&cloud, &config.imds_endpoint);
    options.user_assigned_identity_id =
        Some(config.user_assigned_identity_id.clone()).filter(|id| !id.is_empty());
    let credential = Credential::from_env(&options, |name| std::env::var(name).ok())
        .map_err(SetupError::Credential)?;
    info!(cloud = cloud.name, arm = %endpoint, subscription = %subscription,
        resource_group = %resource_group, credential = ?credential.kind(), "Azure IPAM");
    let mut settings = ArmSettings::new(
        &endpoint,
        subscription.trim(),
        resource_group.trim(),
        &cloud.scope(),
    );
    settings.qps = limits.api_qps;
    settings.burst = limits.api_burst;
    let client = ArmClient::new(settings, Arc::new(credential), metrics.azure.clone())
        .map_err(SetupError::Client)?;
    Ok(Instances::new(
        client,
        config.use_primary_address,
        resource_group.trim(),
    ))
}

//! Start-up of ENI IPAM (Cilium's §2): the region (`--aws-region`, `AWS_REGION`,
//! `AWS_DEFAULT_REGION`, else the instance identity document), the operator's VPC
//! (`--aws-vpc-id`, else IMDS; none: every VPC), the credential chain, the EC2 client on the
//! shared token bucket, and the provider over them. The instance-type limits and the first
//! resync come with the cloud manager's start.

use std::{sync::Arc, time::Duration};

use tracing::{info, warn};
use weft_aws_imds::{Imds, ImdsError};
use weft_cluster_ipam::operator_keys as keys;

use super::{
    api::{Ec2Api as _, Ec2Client, Ec2Error, Ec2Settings, Filter},
    creds::{ChainOptions, CredentialChain, CredentialsError},
    ec2::{Ec2Inventory, Scope},
    gc::{self, GcSettings},
    provider::{EniProvider, EniSettings},
};
use crate::{
    config::{CloudConfig, DEFAULT_CLUSTER_NAME, EniConfig},
    metrics::Metrics,
};

/// The ENI provider the operator runs with.
pub type AwsProvider = EniProvider<Ec2Inventory<Ec2Client>>;

/// How long one IMDS or credential request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why ENI IPAM could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// No region is configured and IMDS could not say it.
    #[error(
        "the AWS region: none of --{}, AWS_REGION or AWS_DEFAULT_REGION is set, and the instance \
         metadata service (--{} {endpoint}) did not answer",
        keys::AWS_REGION.key,
        keys::AWS_IMDS_ENDPOINT.key
    )]
    Region {
        /// The IMDS base URL.
        endpoint: String,
        /// Why IMDS failed.
        #[source]
        source: ImdsError,
    },
    /// No credential source could be built.
    #[error("building the AWS credentials")]
    Credentials(#[source] CredentialsError),
    /// The EC2 client could not be built.
    #[error("building the EC2 client")]
    Client(#[source] Ec2Error),
}

/// The first non-empty of `candidates`.
fn first(candidates: impl IntoIterator<Item = Option<String>>) -> Option<String> {
    candidates
        .into_iter()
        .flatten()
        .map(|v| v.trim().to_owned())
        .find(|v| !v.is_empty())
}

/// Build the provider; `env` looks an environment variable up.
///
/// # Errors
/// See [`SetupError`].
pub async fn provider(
    config: &EniConfig,
    limits: &CloudConfig,
    metrics: &Metrics,
    env: impl Fn(&str) -> Option<String>,
) -> Result<AwsProvider, SetupError> {
    let imds = Imds::new(&config.imds_endpoint).timeout(TIMEOUT);
    let region = match first([
        Some(config.region.clone()),
        env("AWS_REGION"),
        env("AWS_DEFAULT_REGION"),
    ]) {
        Some(region) => region,
        None => {
            imds.identity_document()
                .await
                .map_err(|source| SetupError::Region {
                    endpoint: config.imds_endpoint.clone(),
                    source,
                })?
                .region
        }
    };
    let vpc_id = if config.vpc_id.is_empty() {
        let from_imds = async { imds.vpc_id(&imds.mac().await?).await };
        match from_imds.await {
            Ok(vpc) => vpc,
            Err(error) => {
                warn!(%error, "the operator's VPC is unknown (set --{}); reading every VPC", keys::AWS_VPC_ID.key);
                String::new()
            }
        }
    } else {
        config.vpc_id.clone()
    };
    let credentials = CredentialChain::from_env(
        &ChainOptions {
            region: Some(region.clone()),
            imds_base_url: config.imds_endpoint.clone(),
            timeout: Some(TIMEOUT),
        },
        env,
    )
    .map_err(SetupError::Credentials)?;
    info!(%region, vpc = %vpc_id, credentials = ?credentials.kind(), "EC2 client set up");
    let mut settings = Ec2Settings::new(&region, Some(&config.ec2_api_endpoint));
    settings.qps = limits.api_qps;
    settings.burst = limits.api_burst;
    settings.max_results_per_call = config.max_results_per_call;
    let client = Ec2Client::new(settings, Arc::new(credentials), metrics.ec2.clone())
        .map_err(SetupError::Client)?;
    let gc = if config.gc_interval.is_zero() {
        GcSettings::default()
    } else {
        let cluster = cluster_name(config, &imds, &client).await;
        GcSettings {
            interval: config.gc_interval,
            tags: gc::gc_tags(&config.gc_tags, &cluster),
            subnet_ids: config.subnet_ids_filter.clone(),
        }
    };
    // Every ENI created carries the GC tags (they win over --eni-tags).
    let mut eni_tags = config.eni_tags.clone();
    eni_tags.extend(gc.tags.clone());
    Ok(EniProvider::new(
        Ec2Inventory {
            api: client,
            scope: Scope {
                vpc_id,
                subnet_ids: config.subnet_ids_filter.clone(),
                subnet_tags: config.subnet_tags_filter.clone(),
                instance_tags: config.instance_tags_filter.clone(),
            },
        },
        EniSettings {
            prefix_delegation: config.prefix_delegation,
            eni_tags,
            gc,
        },
    ))
}

/// The cluster's name for the GC tags: `--cluster-name` unless it is Cilium's `default`, else
/// the operator's instance's `aws:eks:cluster-name` tag, else `default`.
async fn cluster_name(config: &EniConfig, imds: &Imds, client: &Ec2Client) -> String {
    if config.cluster_name != DEFAULT_CLUSTER_NAME {
        return config.cluster_name.clone();
    }
    let eks = async {
        let instance = imds.instance_id().await.ok()?;
        let filters = [
            Filter::new("resource-type", ["instance"]),
            Filter::new("resource-id", [instance.as_str()]),
            Filter::new("key", [EKS_CLUSTER_TAG]),
        ];
        let tags = client.describe_tags(&filters).await.ok()?;
        tags.into_iter().map(|t| t.value).find(|v| !v.is_empty())
    };
    eks.await.unwrap_or_else(|| DEFAULT_CLUSTER_NAME.to_owned())
}

/// The tag EKS puts on its nodes' instances.
const EKS_CLUSTER_TAG: &str = "aws:eks:cluster-name";

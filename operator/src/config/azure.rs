//! The Azure and cloud-manager settings (`--ipam azure`): Cilium's operator flags, and two
//! weft adds so the operator can be pointed at any ARM implementation
//! (`azure-arm-endpoint`, `azure-imds-endpoint`) and one beyond Cilium
//! (`azure-release-excess-ips`).

use super::{ConfigError, Layers};
use crate::cli::Cli;

/// The default Instance Metadata Service address.
pub const DEFAULT_IMDS_ENDPOINT: &str = "http://169.254.169.254";

/// The smallest `limit-ipam-api-qps` accepted: one request per 1000 s.
pub const MIN_API_QPS: f64 = 0.001;

/// Settings of Azure IPAM.
#[derive(Debug, Clone, PartialEq)]
pub struct AzureConfig {
    /// `azure-subscription-id` (empty: from IMDS).
    pub subscription_id: String,
    /// `azure-resource-group`: the nodes' resource group (empty: from IMDS).
    pub resource_group: String,
    /// `azure-user-assigned-identity-id`: the client ID of a user-assigned managed identity.
    pub user_assigned_identity_id: String,
    /// `azure-use-primary-address`: hand out the NICs' primary addresses too.
    pub use_primary_address: bool,
    /// `azure-arm-endpoint` (weft; empty: the cloud's endpoint from IMDS `azEnvironment`).
    pub arm_endpoint: String,
    /// `azure-imds-endpoint` (weft).
    pub imds_endpoint: String,
    /// `azure-release-excess-ips` (weft; Cilium never releases on Azure).
    pub release_excess_ips: bool,
    /// `limit-ipam-api-qps`.
    pub api_qps: f64,
    /// `limit-ipam-api-burst`.
    pub api_burst: u32,
    /// `parallel-alloc-workers` (values below 1 mean 1).
    pub parallel_alloc_workers: usize,
}

impl AzureConfig {
    /// Resolve the Azure settings.
    ///
    /// # Errors
    /// A value that does not parse, or a rate limit that cannot hold a request.
    pub(super) fn resolve(l: &Layers<'_>, cli: &Cli) -> Result<Self, ConfigError> {
        let text = |key: &'static str, flag: Option<&str>| l.get(key, flag).unwrap_or_default();
        let api_qps: f64 =
            l.number("limit-ipam-api-qps", cli.limit_ipam_api_qps.as_deref(), 4.0)?;
        if !(api_qps.is_finite() && api_qps >= MIN_API_QPS) {
            return Err(ConfigError::Invalid {
                key: "limit-ipam-api-qps",
                value: api_qps.to_string(),
                expected: "a number of requests per second of at least 0.001 (one per 1000 s)",
            });
        }
        let api_burst: u32 = l.number(
            "limit-ipam-api-burst",
            cli.limit_ipam_api_burst.as_deref(),
            20,
        )?;
        if api_burst == 0 {
            return Err(ConfigError::Invalid {
                key: "limit-ipam-api-burst",
                value: "0".to_owned(),
                expected: "at least 1 (a burst of 0 lets no request through)",
            });
        }
        let workers: i64 = l.number(
            "parallel-alloc-workers",
            cli.parallel_alloc_workers.as_deref(),
            50,
        )?;
        Ok(Self {
            subscription_id: text(
                "azure-subscription-id",
                cli.azure_subscription_id.as_deref(),
            ),
            resource_group: text("azure-resource-group", cli.azure_resource_group.as_deref()),
            user_assigned_identity_id: text(
                "azure-user-assigned-identity-id",
                cli.azure_user_assigned_identity_id.as_deref(),
            ),
            use_primary_address: l.bool(
                "azure-use-primary-address",
                cli.azure_use_primary_address.as_deref(),
                false,
            )?,
            arm_endpoint: text("azure-arm-endpoint", cli.azure_arm_endpoint.as_deref()),
            imds_endpoint: l
                .get("azure-imds-endpoint", cli.azure_imds_endpoint.as_deref())
                .unwrap_or_else(|| DEFAULT_IMDS_ENDPOINT.to_owned()),
            release_excess_ips: l.bool(
                "azure-release-excess-ips",
                cli.azure_release_excess_ips.as_deref(),
                false,
            )?,
            api_qps,
            api_burst,
            parallel_alloc_workers: usize::try_from(workers.max(1)).unwrap_or(1),
        })
    }
}

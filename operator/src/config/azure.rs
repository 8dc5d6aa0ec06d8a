//! The Azure settings (`--ipam azure`): Cilium's operator flags, and two weft adds so the
//! operator can be pointed at any ARM implementation (`azure-arm-endpoint`,
//! `azure-imds-endpoint`). The settings every cloud shares are in [`super::CloudConfig`].

pub use weft_cluster_ipam::operator_keys::DEFAULT_IMDS_ENDPOINT;

/// Settings of Azure IPAM.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl Default for AzureConfig {
    fn default() -> Self {
        Self {
            subscription_id: String::new(),
            resource_group: String::new(),
            user_assigned_identity_id: String::new(),
            use_primary_address: false,
            arm_endpoint: String::new(),
            imds_endpoint: DEFAULT_IMDS_ENDPOINT.to_owned(),
        }
    }
}

/// Whether `id` is an identity's ARM resource ID (`/subscriptions/…/userAssignedIdentities/…`),
/// given where Cilium wants the identity's client ID.
#[must_use]
pub fn is_resource_id(id: &str) -> bool {
    let lower = id.trim().to_ascii_lowercase();
    lower.starts_with("/subscriptions/") || lower.contains("/userassignedidentities/")
}

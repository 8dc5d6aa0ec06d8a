//! ARM's error answers: a status, `{"error":{"code","message"}}`, and the headers some carry
//! (`WWW-Authenticate` on 401, `Retry-After` on 429). One constructor per error the emulator
//! gives, with Azure's code and message form. Nothing here routes or touches the model.

use serde_json::{Value, json};

/// The error code the emulator answers for a NIC (or scale set NIC configuration) that would
/// have more than [`IP_CONFIGS_PER_NIC`] ipConfigurations. Azure's limit is documented (256
/// private IP addresses per NIC, usage `SecondaryIPConfigurationsPerNetworkInterface`); this
/// code is the emulator's choice, not a verified Azure string.
pub const TOO_MANY_IP_CONFIGS: &str = "NetworkInterfaceIpConfigurationsLimitReached";

/// Largest number of ipConfigurations on one NIC (Cilium's `InterfaceAddressLimit`).
pub const IP_CONFIGS_PER_NIC: usize = 256;

/// An ARM error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArmError {
    /// HTTP status.
    pub status: u16,
    /// `error.code`.
    pub code: String,
    /// `error.message`.
    pub message: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
}

impl ArmError {
    /// Any error.
    #[must_use]
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_owned(),
            message: message.into(),
            headers: Vec::new(),
        }
    }

    /// With a header.
    #[must_use]
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// The body.
    #[must_use]
    pub fn body(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }

    /// 400 `MissingApiVersionParameter`.
    #[must_use]
    pub fn missing_api_version() -> Self {
        Self::new(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
    }

    /// 401 without an `Authorization` header.
    #[must_use]
    pub fn missing_token(authority: &str) -> Self {
        Self::new(
            401,
            "AuthenticationFailed",
            "Authentication failed. The 'Authorization' header is missing.",
        )
        .header(
            "WWW-Authenticate",
            format!(
                "Bearer authorization_uri=\"{authority}\", error=\"invalid_token\", \
                 error_description=\"The authentication failed because of missing \
                 'Authorization' header.\""
            ),
        )
    }

    /// 401 for a token the emulator did not issue (or revoked).
    #[must_use]
    pub fn invalid_token(authority: &str) -> Self {
        Self::new(
            401,
            "InvalidAuthenticationToken",
            "The access token is invalid.",
        )
        .header(
            "WWW-Authenticate",
            format!(
                "Bearer authorization_uri=\"{authority}\", error=\"invalid_token\", \
                 error_description=\"The access token is invalid.\""
            ),
        )
    }

    /// 401 for an expired token.
    #[must_use]
    pub fn expired_token(authority: &str, expired: u64, now: u64) -> Self {
        Self::new(
            401,
            "ExpiredAuthenticationToken",
            format!(
                "The access token expiry UTC time '{expired}' is earlier than current UTC time \
                 '{now}'."
            ),
        )
        .header(
            "WWW-Authenticate",
            format!(
                "Bearer authorization_uri=\"{authority}\", error=\"invalid_token\", \
                 error_description=\"The access token has expired.\""
            ),
        )
    }

    /// 401 for a token issued for another resource.
    #[must_use]
    pub fn wrong_audience(audience: &str, allowed: &[String]) -> Self {
        Self::new(
            401,
            "InvalidAuthenticationTokenAudience",
            format!(
                "The access token has been obtained for wrong audience or resource '{audience}'. \
                 It should exactly match with one of the allowed audiences '{}'.",
                allowed.join("','")
            ),
        )
    }

    /// 404 for a subscription other than the scenario's.
    #[must_use]
    pub fn subscription_not_found(subscription: &str) -> Self {
        Self::new(
            404,
            "SubscriptionNotFound",
            format!("The subscription '{subscription}' could not be found."),
        )
    }

    /// 404 for an unknown resource group.
    #[must_use]
    pub fn resource_group_not_found(group: &str) -> Self {
        Self::new(
            404,
            "ResourceGroupNotFound",
            format!("Resource group '{group}' could not be found."),
        )
    }

    /// 404 for a missing top-level resource (`Microsoft.Network/networkInterfaces/nic`).
    #[must_use]
    pub fn resource_not_found(kind_and_name: &str, group: &str) -> Self {
        Self::new(
            404,
            "ResourceNotFound",
            format!(
                "The Resource '{kind_and_name}' under resource group '{group}' was not found. \
                 For more details please go to https://aka.ms/ARMResourceNotFoundFix"
            ),
        )
    }

    /// 404 as the network provider answers for a missing child resource (a subnet).
    #[must_use]
    pub fn not_found(id: &str) -> Self {
        Self::new(404, "NotFound", format!("Resource {id} not found."))
    }

    /// 404 for a path nothing is served at.
    #[must_use]
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "InvalidResourceType",
            format!(
                "The resource type of '{path}' could not be found (not served by the emulator)."
            ),
        )
    }

    /// 400 for a body that is not the JSON expected.
    #[must_use]
    pub fn invalid_body(detail: &str) -> Self {
        Self::new(
            400,
            "InvalidRequestContent",
            format!("The request content was invalid and could not be deserialized: {detail}"),
        )
    }

    /// 400 for a reference to a resource that does not exist.
    #[must_use]
    pub fn invalid_reference(referenced: &str, by: &str) -> Self {
        Self::new(
            400,
            "InvalidResourceReference",
            format!(
                "Resource {referenced} referenced by resource {by} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
            ),
        )
    }

    /// 400 `SubnetIsFull`.
    #[must_use]
    pub fn subnet_full(subnet_id: &str, prefix: &str, wanted: usize) -> Self {
        Self::new(
            400,
            "SubnetIsFull",
            format!(
                "Subnet {subnet_id} with address prefix {prefix} does not have enough capacity \
                 for {wanted} IP addresses."
            ),
        )
    }

    /// 400 for more than 256 ipConfigurations on a NIC.
    #[must_use]
    pub fn too_many_ip_configs(nic_id: &str, count: usize) -> Self {
        Self::new(
            400,
            TOO_MANY_IP_CONFIGS,
            format!(
                "Network interface {nic_id} has {count} IP configurations, more than the \
                 maximum of {IP_CONFIGS_PER_NIC} allowed per network interface."
            ),
        )
    }

    /// 400 for ipConfigurations of one scale set NIC in different subnets.
    #[must_use]
    pub fn vmss_different_subnets(nic: &str, first: &str, other: &str) -> Self {
        Self::new(
            400,
            "VMScaleSetIpConfigurationsOnSameNicCannotUseDifferentSubnets",
            format!(
                "IP configurations on the same NIC '{nic}' of a virtual machine scale set cannot \
                 use different subnets: '{first}' and '{other}'."
            ),
        )
    }

    /// 400 for a static private address that is taken or outside the subnet.
    #[must_use]
    pub fn address_unavailable(address: &str, subnet_id: &str) -> Self {
        Self::new(
            400,
            "PrivateIPAddressNotAvailable",
            format!("Private static IP address {address} is not available in subnet {subnet_id}."),
        )
    }

    /// 400 for an exhausted public IP prefix.
    #[must_use]
    pub fn prefix_full(prefix_id: &str, vmss: bool) -> Self {
        let code = if vmss {
            "PublicIpPrefixOutOfIpAddressesForVMScaleSet"
        } else {
            "PublicIpPrefixOutOfIpAddresses"
        };
        Self::new(
            400,
            code,
            format!("Public IP prefix {prefix_id} has no available IP addresses."),
        )
    }

    /// 429 as ARM throttles.
    #[must_use]
    pub fn throttled(subscription: &str, retry_after_secs: u64) -> Self {
        Self::new(
            429,
            "SubscriptionRequestsThrottled",
            format!(
                "Number of requests for subscription '{subscription}' exceeded the limit. Please \
                 try again after '{retry_after_secs}' seconds. Refer to \
                 https://aka.ms/arm-throttling for additional information."
            ),
        )
        .header("Retry-After", retry_after_secs.to_string())
    }

    /// 500.
    #[must_use]
    pub fn internal() -> Self {
        Self::new(
            500,
            "InternalServerError",
            "Encountered internal server error. Diagnostic information: injected by the emulator.",
        )
    }

    /// 405.
    #[must_use]
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("The requested resource does not support http method '{method}'."),
        )
    }
}

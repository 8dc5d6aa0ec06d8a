//! The ARM client: the operations Cilium's Azure allocator calls (§3.2–3.5), the
//! [`AzureApi`] trait the instances cache and node code are generic over (the real
//! [`ArmClient`], or a mock), and [`ArmError`]. Every request waits on a client-side token
//! bucket, carries a bearer token from a [`TokenCredential`] and the `User-Agent`, is retried
//! on 408/429/5xx and connection failures (honouring `Retry-After`), follows `nextLink`, and a
//! PUT is carried to the end of its long-running operation. Calls are timed into
//! [`ApiMetrics`] under Cilium's operation names. Parsing the results into CiliumNode terms is
//! [`super::parse`]'s; caching them is the instances cache's.
//!
//! - [`transport`]: the hyper client (shared with IMDS and the token endpoints).
//! - `request`: one ARM exchange (rate limit, token, retries, metrics), GET and paging.
//! - `lro`: completing a long-running PUT.
//! - [`ratelimit`], [`retry`]: the token bucket and the retry delays (pure).
//! - `ops`, `publicip`: the operations.
//! - [`metrics`]: `azure_api_*` metrics.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    net::IpAddr,
    sync::Arc,
    time::Duration,
};

use http::StatusCode;

use super::{
    auth::{AuthError, TokenCredential},
    model,
    parse::SubnetMap,
    resource_id::ResourceIdError,
};

mod lro;
pub mod metrics;
mod ops;
mod publicip;
pub mod ratelimit;
mod request;
pub mod retry;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testserver;
pub mod transport;

pub use metrics::ApiMetrics;
pub use publicip::choose_prefix;
pub use transport::TransportError;

/// Where and how the client talks to ARM.
#[derive(Clone, Debug)]
pub struct ArmSettings {
    /// ARM endpoint, e.g. `https://management.azure.com` (no trailing slash needed).
    pub endpoint: String,
    /// The operator's subscription (every call uses it, as Cilium).
    pub subscription_id: String,
    /// The operator's resource group (every per-RG call uses it).
    pub resource_group: String,
    /// Token scope, e.g. `https://management.core.windows.net/.default`.
    pub scope: String,
    /// Sustained requests per second of the token bucket (`--limit-ipam-api-qps`, 4.0).
    pub qps: f64,
    /// Bucket size (`--limit-ipam-api-burst`, 20).
    pub burst: u32,
    /// `User-Agent` header.
    pub user_agent: String,
    /// Timeout of one HTTP exchange (`None`: none).
    pub timeout: Option<Duration>,
    /// Wait between LRO polls when ARM sends no `Retry-After`.
    pub poll_interval: Duration,
    /// Longest a long-running operation is polled.
    pub lro_timeout: Duration,
}

impl ArmSettings {
    /// Settings with Cilium's defaults (4 qps, burst 20, 60 s timeout, 5 s polls, 15 min LROs).
    #[must_use]
    pub fn new(endpoint: &str, subscription_id: &str, resource_group: &str, scope: &str) -> Self {
        Self {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            subscription_id: subscription_id.to_owned(),
            resource_group: resource_group.to_owned(),
            scope: scope.to_owned(),
            qps: 4.0,
            burst: 20,
            user_agent: concat!("weft-operator/", env!("CARGO_PKG_VERSION")).to_owned(),
            timeout: Some(Duration::from_mins(1)),
            poll_interval: Duration::from_secs(5),
            lro_timeout: Duration::from_mins(15),
        }
    }
}

/// The principal and what it may not do, from an `AuthorizationFailed` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationFailure {
    /// The action refused, e.g. `Microsoft.Network/networkInterfaces/write`.
    pub action: String,
    /// The scope it was refused on.
    pub scope: String,
}

/// An ARM operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    /// ARM answered with an error status.
    #[error("{operation}: HTTP {status}: {code}: {message}")]
    Http {
        /// Cilium's operation name, e.g. `Interfaces.Get`.
        operation: &'static str,
        /// HTTP status.
        status: u16,
        /// Azure's `error.code` (empty if none).
        code: String,
        /// Azure's `error.message` (or the start of the body).
        message: String,
    },
    /// No response (connection, timeout) after the retries.
    #[error("{operation}: request failed")]
    Transport {
        /// Operation.
        operation: &'static str,
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// The answer does not have the expected shape.
    #[error("{operation}: decoding the answer failed at {path}")]
    Decode {
        /// Operation.
        operation: &'static str,
        /// JSON path of the failure.
        path: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// No token.
    #[error("{operation}: getting an Azure token failed")]
    Auth {
        /// Operation.
        operation: &'static str,
        /// Why.
        #[source]
        source: Box<AuthError>,
    },
    /// A long-running operation ended `Failed` or `Canceled`.
    #[error("{operation}: the long-running operation ended {status}: {code}: {message}")]
    LroFailed {
        /// Operation.
        operation: &'static str,
        /// `Failed` or `Canceled`.
        status: String,
        /// Azure's `error.code`.
        code: String,
        /// Azure's `error.message`.
        message: String,
    },
    /// A long-running operation did not end in time.
    #[error("{operation}: the long-running operation did not end within {after:?}")]
    LroTimeout {
        /// Operation.
        operation: &'static str,
        /// How long it was polled.
        after: Duration,
    },
    /// The VMSS instance has no NIC configuration of that name.
    #[error("interface {interface} does not exist in VM {vm}")]
    InterfaceNotFound {
        /// The interface name.
        interface: String,
        /// The VM (VMSS instance index or VM name).
        vm: String,
    },
    /// A per-instance call got an instance ID that is not a VMSS VM.
    #[error("instance {instance_id:?} is not a virtual machine scale set instance")]
    NotVmssInstance {
        /// The instance ID.
        instance_id: String,
    },
    /// A standalone-VM call got an instance ID that is not a VM.
    #[error("instance {instance_id:?} is not a virtual machine")]
    NotVirtualMachine {
        /// The instance ID.
        instance_id: String,
    },
    /// A resource ID that cannot be used.
    #[error("{operation}: bad resource ID")]
    ResourceId {
        /// Operation.
        operation: &'static str,
        /// Why.
        #[source]
        source: ResourceIdError,
    },
    /// An address to release is not on the interface (nothing was removed).
    #[error("address {address} is not on interface {interface}; nothing released")]
    AddressNotOnInterface {
        /// The interface.
        interface: String,
        /// The address.
        address: IpAddr,
    },
    /// An address to release is the interface's primary (nothing was removed).
    #[error("address {address} is the primary address of interface {interface}; nothing released")]
    PrimaryAddress {
        /// The interface.
        interface: String,
        /// The address.
        address: IpAddr,
    },
    /// No public IP prefix matches the tags.
    #[error("public IP prefix with tags {tags:?} not found in resource group {resource_group}")]
    PrefixNotFound {
        /// The tags searched for.
        tags: BTreeMap<String, String>,
        /// The resource group searched.
        resource_group: String,
    },
    /// A resource lacks a field the operation needs.
    #[error("{resource}: {field} is missing")]
    MissingField {
        /// The resource (ID or name).
        resource: String,
        /// What is missing.
        field: String,
    },
}

impl ArmError {
    /// The HTTP status of an error answer.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether ARM answered 404 (the resource is authoritatively gone).
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NOT_FOUND.as_u16())
    }

    /// Azure's `error.code`, if ARM sent one.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Http { code, .. } | Self::LroFailed { code, .. } if !code.is_empty() => {
                Some(code)
            }
            _ => None,
        }
    }

    /// The refused action and scope of an `AuthorizationFailed` answer.
    #[must_use]
    pub fn authorization_failed(&self) -> Option<AuthorizationFailure> {
        let Self::Http { code, message, .. } = self else {
            return None;
        };
        if code != "AuthorizationFailed" {
            return None;
        }
        let quoted = |after: &str| {
            let start = message.find(after)? + after.len();
            let len = message[start..].find('\'')?;
            Some(message[start..start + len].to_owned())
        };
        Some(AuthorizationFailure {
            action: quoted("perform action '")?,
            scope: quoted("over scope '")?,
        })
    }
}

/// The Azure operations the allocator needs; [`ArmClient`] is the real one.
pub trait AzureApi: Send + Sync {
    /// Every NIC for a full resync: the NICs of each VMSS with instances (a VMSS answering
    /// 404 is skipped), then the resource group's NICs.
    fn list_all_network_interfaces(
        &self,
    ) -> impl Future<Output = Result<Vec<model::NetworkInterface>, ArmError>> + Send;

    /// The NICs of one VMSS instance (lowercased instance ID). Not a VMSS instance:
    /// [`ArmError::NotVmssInstance`]; gone: [`ArmError::is_not_found`].
    fn list_vm_network_interfaces(
        &self,
        instance_id: &str,
    ) -> impl Future<Output = Result<Vec<model::NetworkInterface>, ArmError>> + Send;

    /// The subnets of `ids` that could be read (failures are logged with the ID and skipped).
    fn get_subnets(&self, ids: &BTreeSet<String>) -> impl Future<Output = SubnetMap> + Send;

    /// Add `count` addresses in `subnet_id` to the standalone VM's NIC `interface_name`.
    fn assign_private_ips_vm(
        &self,
        subnet_id: &str,
        interface_name: &str,
        count: usize,
    ) -> impl Future<Output = Result<(), ArmError>> + Send;

    /// Add `count` addresses in `subnet_id` to NIC `interface_name` of VMSS instance `vm_id`.
    fn assign_private_ips_vmss(
        &self,
        vm_id: &str,
        vmss: &str,
        subnet_id: &str,
        interface_name: &str,
        count: usize,
    ) -> impl Future<Output = Result<(), ArmError>> + Send;

    /// Remove the ipConfigurations holding `ips` from a standalone VM's NIC (one GET + PUT;
    /// never the primary; an address not on the NIC fails the call, nothing removed).
    fn release_private_ips_vm(
        &self,
        interface_name: &str,
        ips: &[IpAddr],
    ) -> impl Future<Output = Result<(), ArmError>> + Send;

    /// [`AzureApi::release_private_ips_vm`] for NIC `interface_name` of VMSS instance `vm_id`.
    fn release_private_ips_vmss(
        &self,
        vm_id: &str,
        vmss: &str,
        interface_name: &str,
        ips: &[IpAddr],
    ) -> impl Future<Output = Result<(), ArmError>> + Send;

    /// A static public IP from a prefix tagged `tags` on the standalone VM's primary NIC
    /// (the one it has, if any); returns the address.
    fn assign_public_ip_vm(
        &self,
        instance_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<String, ArmError>> + Send;

    /// [`AzureApi::assign_public_ip_vm`] for a VMSS instance.
    fn assign_public_ip_vmss(
        &self,
        instance_id: &str,
        vmss: &str,
        tags: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<String, ArmError>> + Send;
}

/// The ARM client; cheap to clone.
#[derive(Clone, Debug)]
pub struct ArmClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: transport::HttpClient,
    settings: ArmSettings,
    credential: Arc<dyn TokenCredential>,
    limiter: ratelimit::RateLimiter,
    metrics: ApiMetrics,
}

impl ArmClient {
    /// A client with its own HTTP client.
    ///
    /// # Errors
    /// [`ArmError::Transport`] when the HTTP client cannot be built.
    pub fn new(
        settings: ArmSettings,
        credential: Arc<dyn TokenCredential>,
        metrics: ApiMetrics,
    ) -> Result<Self, ArmError> {
        let http = transport::client().map_err(|source| ArmError::Transport {
            operation: "client",
            source: Box::new(source),
        })?;
        Ok(Self::with_client(settings, credential, metrics, http))
    }

    /// A client over an existing HTTP client.
    #[must_use]
    pub fn with_client(
        settings: ArmSettings,
        credential: Arc<dyn TokenCredential>,
        metrics: ApiMetrics,
        http: transport::HttpClient,
    ) -> Self {
        let limiter = ratelimit::RateLimiter::new(settings.qps, settings.burst);
        Self {
            inner: Arc::new(Inner {
                http,
                settings,
                credential,
                limiter,
                metrics,
            }),
        }
    }

    /// The settings.
    #[must_use]
    pub fn settings(&self) -> &ArmSettings {
        &self.inner.settings
    }
}

impl AzureApi for ArmClient {
    async fn list_all_network_interfaces(&self) -> Result<Vec<model::NetworkInterface>, ArmError> {
        self.all_interfaces().await
    }

    async fn list_vm_network_interfaces(
        &self,
        instance_id: &str,
    ) -> Result<Vec<model::NetworkInterface>, ArmError> {
        self.vm_interfaces(instance_id).await
    }

    async fn get_subnets(&self, ids: &BTreeSet<String>) -> SubnetMap {
        self.subnets(ids).await
    }

    async fn assign_private_ips_vm(
        &self,
        subnet_id: &str,
        interface_name: &str,
        count: usize,
    ) -> Result<(), ArmError> {
        self.assign_vm(subnet_id, interface_name, count).await
    }

    async fn assign_private_ips_vmss(
        &self,
        vm_id: &str,
        vmss: &str,
        subnet_id: &str,
        interface_name: &str,
        count: usize,
    ) -> Result<(), ArmError> {
        self.assign_vmss(vm_id, vmss, subnet_id, interface_name, count)
            .await
    }

    async fn release_private_ips_vm(
        &self,
        interface_name: &str,
        ips: &[IpAddr],
    ) -> Result<(), ArmError> {
        self.release_vm(interface_name, ips).await
    }

    async fn release_private_ips_vmss(
        &self,
        vm_id: &str,
        vmss: &str,
        interface_name: &str,
        ips: &[IpAddr],
    ) -> Result<(), ArmError> {
        self.release_vmss(vm_id, vmss, interface_name, ips).await
    }

    async fn assign_public_ip_vm(
        &self,
        instance_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ArmError> {
        self.public_ip_vm(instance_id, tags).await
    }

    async fn assign_public_ip_vmss(
        &self,
        instance_id: &str,
        vmss: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ArmError> {
        self.public_ip_vmss(instance_id, vmss, tags).await
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn authorization_failed_is_parsed() {
        let err = ArmError::Http {
            operation: "Interfaces.CreateOrUpdate",
            status: 403,
            code: "AuthorizationFailed".into(),
            message: "The client 'c' with object id 'o' does not have authorization to perform action \
                      'Microsoft.Network/networkInterfaces/write' over scope \
                      '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n' \
                      or the scope is invalid. If access was recently granted, please refresh your credentials."
                .into(),
        };
        assert_eq!(
            err.authorization_failed(),
            Some(AuthorizationFailure {
                action: "Microsoft.Network/networkInterfaces/write".into(),
                scope: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n"
                    .into(),
            })
        );
        assert_eq!(err.status(), Some(403));
        assert!(!err.is_not_found());
        assert_eq!(err.code(), Some("AuthorizationFailed"));
        let other = ArmError::Http {
            operation: "Interfaces.Get",
            status: 404,
            code: "NotFound".into(),
            message: "gone".into(),
        };
        assert!(other.is_not_found());
        assert_eq!(other.authorization_failed(), None);
        assert_eq!(
            other.to_string(),
            "Interfaces.Get: HTTP 404: NotFound: gone"
        );
    }
}

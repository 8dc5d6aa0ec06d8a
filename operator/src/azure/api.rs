//! The ARM client: the operations Cilium's Azure allocator calls (§3.2–3.5), the
//! [`AzureApi`] trait the instances cache and node code are generic over (the real
//! [`ArmClient`], or a mock), and [`ArmError`]. Every request waits on a client-side token
//! bucket, carries a bearer token from a [`TokenCredential`] and the `User-Agent`, is retried
//! on 408/429/5xx and connection failures (honouring `Retry-After`), follows `nextLink`, and a
//! PUT is carried to the end of its long-running operation. Calls are timed into
//! [`ApiMetrics`] under Cilium's operation names. Parsing the results into CiliumNode terms is
//! [`super::parse`]'s; caching them is the instances cache's.
//!
//! - [`crate::cloud::transport`]: the hyper client (shared with IMDS and the token endpoints).
//! - `request`: one ARM exchange (rate limit, token, retries, metrics), GET and paging.
//! - `lro`: completing a long-running PUT.
//! - [`crate::cloud::ratelimit`], [`retry`]: the token bucket and the retry delays (pure).
//! - `ops`, `publicip`: the operations.
//! - [`metrics`]: `azure_api_*` metrics.
//! - `error`: [`ArmError`].

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    net::IpAddr,
    sync::Arc,
    time::Duration,
};

use super::{auth::TokenCredential, model, parse::SubnetMap};
use crate::cloud::{ratelimit, transport};

mod error;
mod lro;
pub mod metrics;
mod ops;
mod publicip;
mod request;
pub mod retry;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod testserver;

pub use error::{ArmError, AuthorizationFailure};
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

    /// One NIC of the resource group by name (`Interfaces.Get`): weft re-reads a standalone
    /// VM's NICs this way after a round, where Cilium waits for the next full resync.
    fn get_network_interface(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<model::NetworkInterface, ArmError>> + Send;

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

    async fn get_network_interface(&self, name: &str) -> Result<model::NetworkInterface, ArmError> {
        self.get(ops::NIC_GET, &self.nic_url(ops::NIC_GET, name))
            .await
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

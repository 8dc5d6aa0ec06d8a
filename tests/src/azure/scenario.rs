//! The emulated Azure estate a test or the `arm-emulator` program starts from: subscription,
//! the nodes' resource group, cloud, the identities that may get tokens, virtual networks and
//! subnets, standalone VMs and their NICs, scale sets and their instances, public IP prefixes,
//! how long-running PUTs answer, the list page size and an optional role. One serde struct for
//! both (YAML or JSON, camelCase keys); nothing here serves or mutates anything.

use std::{collections::BTreeMap, net::Ipv4Addr, path::Path};

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::roles::RoleDefinition;

/// Everything the emulator starts with.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Subscription id of every resource and of IMDS `subscriptionId`.
    #[serde(default = "default_subscription")]
    pub subscription_id: String,
    /// The nodes' resource group (VMs, scale sets, NICs, prefixes; IMDS `resourceGroupName`).
    #[serde(default = "default_resource_group")]
    pub resource_group: String,
    /// IMDS `azEnvironment` (`AzurePublicCloud`, `AzureUSGovernmentCloud`, `AzureChinaCloud`).
    #[serde(default = "default_environment")]
    pub az_environment: String,
    /// Region of every resource (`location`) and of async-operation URLs.
    #[serde(default = "default_location")]
    pub location: String,
    /// Tenant and the credentials that get tokens.
    #[serde(default)]
    pub identity: IdentitySpec,
    /// Virtual networks and their subnets.
    #[serde(default)]
    pub vnets: Vec<VnetSpec>,
    /// Standalone VMs (NICs under `Microsoft.Network/networkInterfaces`).
    #[serde(default)]
    pub vms: Vec<VmSpec>,
    /// Uniform scale sets (NICs under the scale set VM).
    #[serde(default)]
    pub scale_sets: Vec<ScaleSetSpec>,
    /// Public IP prefixes in the nodes' resource group.
    #[serde(default)]
    pub public_ip_prefixes: Vec<PrefixSpec>,
    /// How PUTs answer.
    #[serde(default)]
    pub lro: LroSpec,
    /// Items per list page before a `nextLink` (default 50).
    #[serde(default = "default_page_size")]
    pub page_size: usize,
    /// A role definition file (the `az role definition create` JSON) assigned to every identity
    /// at the nodes' resource group; none: every action is allowed.
    #[serde(default)]
    pub role_file: Option<String>,
    /// Role definitions given inline (as if read from files); combined with `roleFile`.
    #[serde(default)]
    pub roles: Vec<RoleDefinition>,
}

impl Default for Scenario {
    fn default() -> Self {
        serde_json::from_str("{}").expect("every field has a default")
    }
}

impl Scenario {
    /// Read a scenario file (YAML or JSON). A relative `roleFile` is taken relative to the
    /// scenario file.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        let mut scenario =
            Self::from_yaml(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(file) = &scenario.role_file
            && Path::new(file).is_relative()
            && let Some(dir) = path.parent()
        {
            scenario.role_file = Some(dir.join(file).to_string_lossy().into_owned());
        }
        Ok(scenario)
    }

    /// Parse a scenario from YAML (JSON is YAML too).
    ///
    /// # Errors
    /// Not a valid scenario.
    pub fn from_yaml(text: &str) -> Result<Self, String> {
        serde_norway::from_str(text).map_err(|e| e.to_string())
    }

    /// The role definitions in effect at start: `roleFile` (if any) then `roles`.
    ///
    /// # Errors
    /// The role file cannot be read or parsed.
    pub fn load_roles(&self) -> Result<Vec<RoleDefinition>, String> {
        let mut roles = Vec::new();
        if let Some(file) = &self.role_file {
            roles.push(RoleDefinition::from_file(Path::new(file))?);
        }
        roles.extend(self.roles.iter().cloned());
        Ok(roles)
    }
}

/// Tenant and credentials.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdentitySpec {
    /// The tenant AAD token requests name in their path.
    #[serde(default = "default_tenant")]
    pub tenant_id: String,
    /// App registrations that get tokens from AAD (`client_credentials`).
    #[serde(default = "default_principals")]
    pub service_principals: Vec<ServicePrincipalSpec>,
    /// User-assigned managed identities that get tokens from IMDS.
    #[serde(default = "default_managed_identities")]
    pub managed_identities: Vec<ManagedIdentitySpec>,
    /// Lifetime of issued tokens in seconds (default 3600; small values test refresh).
    #[serde(default = "default_token_lifetime")]
    pub token_lifetime_seconds: u64,
}

impl Default for IdentitySpec {
    fn default() -> Self {
        serde_json::from_str("{}").expect("every field has a default")
    }
}

/// An app registration (service principal).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServicePrincipalSpec {
    /// Application (client) id.
    pub client_id: String,
    /// Its client secret, if it has one.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The federated (workload identity) token accepted as `client_assertion`, if any.
    #[serde(default)]
    pub federated_token: Option<String>,
    /// Object id shown in AuthorizationFailed messages (default: derived from the client id).
    #[serde(default)]
    pub object_id: Option<String>,
}

/// A user-assigned managed identity.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedIdentitySpec {
    /// Its client id (what `client_id=` names on the IMDS token endpoint).
    pub client_id: String,
    /// Object (principal) id (default: derived from the client id).
    #[serde(default)]
    pub object_id: Option<String>,
}

/// A virtual network.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VnetSpec {
    /// Its name.
    pub name: String,
    /// Its resource group (default: the nodes').
    #[serde(default)]
    pub resource_group: Option<String>,
    /// Its subnets.
    pub subnets: Vec<SubnetSpec>,
}

/// A subnet.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubnetSpec {
    /// Its name.
    pub name: String,
    /// `properties.addressPrefix`.
    pub cidr: Ipv4Net,
}

/// A NIC of a standalone VM, or a NIC configuration of a scale set.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NicSpec {
    /// Its name.
    pub name: String,
    /// `vnet/subnet`, or a subnet name unique across the vnets.
    pub subnet: String,
    /// The VM's primary NIC (default: the first one).
    #[serde(default)]
    pub primary: Option<bool>,
    /// Names of application security groups (nodes' resource group) on `ipconfig1`.
    #[serde(default)]
    pub asgs: Vec<String>,
    /// Name of the network security group (nodes' resource group) on the NIC.
    #[serde(default)]
    pub nsg: Option<String>,
    /// Address of the primary ipConfiguration (default: the lowest free one).
    #[serde(default)]
    pub address: Option<Ipv4Addr>,
    /// Secondary ipConfigurations that already exist (`ipconfig2`, ...), default 0.
    #[serde(default)]
    pub secondary_ips: usize,
}

/// A standalone VM.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VmSpec {
    /// Its name.
    pub name: String,
    /// Its NICs.
    pub nics: Vec<NicSpec>,
}

/// A uniform scale set.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScaleSetSpec {
    /// Its name.
    pub name: String,
    /// Instances `0..capacity` when `instances` is not given.
    #[serde(default)]
    pub capacity: Option<u32>,
    /// The NIC configurations of the model (every instance's unless it overrides them).
    pub nics: Vec<NicSpec>,
    /// Instances by index.
    #[serde(default)]
    pub instances: Option<Vec<InstanceSpec>>,
}

/// A scale set instance.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceSpec {
    /// Its instance id (`virtualMachines/{index}`).
    pub index: u32,
    /// Its NIC configurations (default: the scale set's).
    #[serde(default)]
    pub nics: Option<Vec<NicSpec>>,
}

/// A public IP prefix.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixSpec {
    /// Its name.
    pub name: String,
    /// `properties.ipPrefix`.
    pub prefix: Ipv4Net,
    /// Its tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// `properties.provisioningState` (default `Succeeded`).
    #[serde(default = "default_succeeded")]
    pub provisioning_state: String,
    /// Public IPs already taken from it (lowest addresses first unless given).
    #[serde(default)]
    pub public_ips: Vec<PublicIpSpec>,
}

/// A public IP that exists at start.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PublicIpSpec {
    /// Its name.
    pub name: String,
    /// Its address (default: the prefix's lowest free one).
    #[serde(default)]
    pub address: Option<Ipv4Addr>,
}

/// How long-running PUTs answer.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LroSpec {
    /// `async` (default: NICs 200/201 and scale set VMs 202, with `Azure-AsyncOperation`) or
    /// `sync` (200 with `provisioningState: Succeeded`).
    #[serde(default)]
    pub mode: LroMode,
    /// Polls of the operation that answer `InProgress` before `Succeeded` (default 1).
    #[serde(default = "default_polls")]
    pub in_progress_polls: u32,
    /// `Retry-After` seconds sent with PUTs and `InProgress` polls (default 0).
    #[serde(default)]
    pub retry_after_seconds: u64,
}

impl Default for LroSpec {
    fn default() -> Self {
        Self {
            mode: LroMode::default(),
            in_progress_polls: default_polls(),
            retry_after_seconds: 0,
        }
    }
}

/// How PUTs complete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum LroMode {
    /// Answered at once, already `Succeeded`.
    Sync,
    /// Answered `Updating` with an operation to poll.
    #[default]
    Async,
}

fn default_subscription() -> String {
    "00000000-0000-0000-0000-000000000001".to_owned()
}
fn default_resource_group() -> String {
    "MC_weft_cluster_westeurope".to_owned()
}
fn default_environment() -> String {
    "AzurePublicCloud".to_owned()
}
fn default_location() -> String {
    "westeurope".to_owned()
}
fn default_tenant() -> String {
    "00000000-0000-0000-0000-0000000000aa".to_owned()
}
fn default_principals() -> Vec<ServicePrincipalSpec> {
    vec![ServicePrincipalSpec {
        client_id: "00000000-0000-0000-0000-0000000000c1".to_owned(),
        client_secret: Some("weft-emulator-secret".to_owned()),
        federated_token: Some("weft-emulator-federated-token".to_owned()),
        object_id: None,
    }]
}
fn default_managed_identities() -> Vec<ManagedIdentitySpec> {
    vec![ManagedIdentitySpec {
        client_id: "00000000-0000-0000-0000-0000000000d1".to_owned(),
        object_id: None,
    }]
}
fn default_token_lifetime() -> u64 {
    3600
}
fn default_page_size() -> usize {
    50
}
fn default_polls() -> u32 {
    1
}
fn default_succeeded() -> String {
    "Succeeded".to_owned()
}

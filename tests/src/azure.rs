//! An Azure Resource Manager + IMDS + AAD emulator for tests: a wire-level test double of the
//! documented HTTP behaviour of the calls Cilium's Azure IPAM makes, served over plain
//! HTTP/1.1 on one loopback port, so one base URL serves as the ARM endpoint, the IMDS
//! endpoint and the AAD authority host. It lives only in tests. [`ArmEmulator::start`] runs it
//! on its own thread and tokio runtime; the `arm-emulator` program serves it to other processes.
//!
//! **Modelled.** The 13 ARM operations of Cilium's Azure IPAM (scale set list, scale set and
//! scale set VM NIC lists, NIC list/get/PUT, subnet get, scale set VM get/PUT, VM get, public IP
//! prefix list, public IP get, scale set VM public IP list) plus polling of their async
//! operations; `api-version` required (any value); bearer tokens required (401 with
//! `WWW-Authenticate`); names matched case-insensitively, ids returned in their original case;
//! `nextLink` paging; subnets handing out their lowest free address (Azure reserves the network
//! address, the first three host addresses and the broadcast address) and listing every holder
//! in `properties.ipConfigurations`; at most 256 ipConfigurations per NIC; one subnet per scale
//! set NIC; `SubnetIsFull`; static public IPs from prefixes; async PUTs (`Azure-AsyncOperation`,
//! `InProgress` polls, `Retry-After`) or synchronous ones; custom-role RBAC with wildcards and
//! linked-access checks (`AuthorizationFailed`, `LinkedAuthorizationFailed`); IMDS instance
//! metadata and managed-identity tokens (`Metadata: true` required); AAD `client_credentials`
//! with a secret or a federated assertion; injected faults; a request log.
//!
//! **Not modelled.** Other ARM resources and verbs (DELETE, PATCH), ETag preconditions
//! (`If-Match`), VNet lists, IPv6, NIC-level limits other than 256, IMDS instance data beyond the
//! compute fields Cilium reads, real JWTs (tokens are opaque), per-identity role assignments
//! (every identity holds the same roles), and failed async operations.

mod arm;
mod error;
mod faults;
mod identity;
mod lro;
mod model;
mod nics;
mod roles;
mod route;
mod scenario;
mod server;
mod vmss;

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::Value;

pub use self::{
    error::{ArmError, IP_CONFIGS_PER_NIC, TOO_MANY_IP_CONFIGS},
    faults::{Fault, FaultAnswer, LoggedRequest, RequestLog},
    identity::derived_object_id,
    roles::{RoleDefinition, authorization_failed, linked_authorization_failed},
    route::Operation,
    scenario::{
        IdentitySpec, InstanceSpec, LroMode, LroSpec, ManagedIdentitySpec, NicSpec, PrefixSpec,
        PublicIpSpec, ScaleSetSpec, Scenario, ServicePrincipalSpec, SubnetSpec, VmSpec, VnetSpec,
    },
};
use self::{
    faults::{Faults, lock},
    identity::Identities,
    model::{Model, same},
    roles::Assignments,
    server::Shared,
};

/// Why an emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The scenario is inconsistent (unknown subnet, full subnet, duplicate names, bad role).
    #[error("invalid scenario: {0}")]
    Scenario(String),
    /// The server could not start (address, socket, runtime or thread).
    #[error("cannot start the server")]
    Server {
        /// Why.
        #[source]
        source: crate::emulator::StartError,
    },
}

/// Settings before starting.
#[derive(Debug)]
pub struct ArmEmulatorBuilder {
    scenario: Scenario,
    listen: SocketAddr,
    log_stderr: bool,
}

impl ArmEmulatorBuilder {
    /// Listen on `addr` (default `127.0.0.1:0`).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Print every request to stderr.
    #[must_use]
    pub fn log_requests(mut self) -> Self {
        self.log_stderr = true;
        self
    }

    /// Start; panics if it cannot.
    #[must_use]
    pub fn start(self) -> ArmEmulator {
        self.try_start()
            .unwrap_or_else(|e| panic!("arm emulator: {}", crate::report(&e)))
    }

    /// Start serving from a thread of its own.
    ///
    /// # Errors
    /// An inconsistent scenario, or the address, runtime or thread cannot be set up.
    pub fn try_start(self) -> Result<ArmEmulator, StartError> {
        let s = &self.scenario;
        let model = Model::new(s).map_err(|e| StartError::Scenario(e.message))?;
        let roles = s.load_roles().map_err(StartError::Scenario)?;
        let server = |source| StartError::Server { source };
        let listener = crate::emulator::bind(self.listen).map_err(server)?;
        let shared = Arc::new(Shared {
            roles: Mutex::new(Assignments {
                enforced: !roles.is_empty(),
                roles,
                scopes: vec![format!(
                    "/subscriptions/{}/resourceGroups/{}",
                    s.subscription_id, s.resource_group
                )],
            }),
            model: Mutex::new(model),
            ids: Mutex::new(Identities::new(&s.identity, &s.az_environment)),
            faults: Faults::default(),
            log: RequestLog::default(),
            environment: s.az_environment.clone(),
            log_stderr: self.log_stderr,
            addr: listener.addr(),
        });
        let server_shared = Arc::clone(&shared);
        let server = listener
            .serve("arm-emulator", move |req| {
                server::handle(Arc::clone(&server_shared), req)
            })
            .map_err(server)?;
        Ok(ArmEmulator {
            shared,
            scenario: self.scenario,
            server,
        })
    }
}

/// A running emulator; stops (and cuts every connection) on drop.
#[derive(Debug)]
pub struct ArmEmulator {
    shared: Arc<Shared>,
    scenario: Scenario,
    server: crate::emulator::Server,
}

impl ArmEmulator {
    /// Start serving `scenario` on a free loopback port; panics if it cannot.
    #[must_use]
    pub fn start(scenario: Scenario) -> Self {
        Self::builder(scenario).start()
    }

    /// Settings before starting.
    #[must_use]
    pub fn builder(scenario: Scenario) -> ArmEmulatorBuilder {
        ArmEmulatorBuilder {
            scenario,
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            log_stderr: false,
        }
    }

    /// `http://<address>:<port>`: the ARM endpoint, the IMDS endpoint and the AAD authority
    /// host all at once (loopback of the family when it listens on every address).
    #[must_use]
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The address it listens on.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The scenario it started from.
    #[must_use]
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// `/subscriptions/S/resourceGroups/RG` of the nodes.
    #[must_use]
    pub fn resource_group_id(&self) -> String {
        let m = lock(&self.shared.model);
        format!(
            "/subscriptions/{}/resourceGroups/{}",
            m.subscription, m.group
        )
    }

    // ---- tokens ----

    /// The tenant AAD token requests must name.
    #[must_use]
    pub fn tenant_id(&self) -> String {
        lock(&self.shared.ids).tenant().to_owned()
    }

    /// A valid ARM token for the first service principal (or managed identity).
    #[must_use]
    pub fn token(&self) -> String {
        let id = &self.scenario.identity;
        let client = id
            .service_principals
            .first()
            .map(|s| s.client_id.clone())
            .or_else(|| id.managed_identities.first().map(|m| m.client_id.clone()))
            .expect("the scenario has an identity");
        self.token_for(&client)
    }

    /// A valid ARM token for the identity with this client id.
    #[must_use]
    pub fn token_for(&self, client_id: &str) -> String {
        lock(&self.shared.ids).issue_for(client_id).0
    }

    /// Lifetime of tokens issued from now on.
    pub fn set_token_lifetime(&self, lifetime: Duration) {
        lock(&self.shared.ids).set_lifetime(lifetime);
    }

    /// Invalidate every token issued so far.
    pub fn revoke_tokens(&self) {
        lock(&self.shared.ids).revoke_all();
    }

    // ---- RBAC ----

    /// Assign `role` (replacing any) to every identity at the nodes' resource group; `None`:
    /// no RBAC (everything allowed).
    pub fn set_role(&self, role: Option<RoleDefinition>) {
        self.set_roles(role.into_iter().collect());
    }

    /// Assign these roles (their actions add up); empty: no RBAC.
    pub fn set_roles(&self, roles: Vec<RoleDefinition>) {
        let mut a = lock(&self.shared.roles);
        a.enforced = !roles.is_empty();
        a.roles = roles;
    }

    /// Scopes the roles are assigned at (default: the nodes' resource group).
    pub fn set_role_scopes(&self, scopes: Vec<String>) {
        lock(&self.shared.roles).scopes = scopes;
    }

    // ---- faults and the log ----

    /// Inject a fault.
    pub fn inject(&self, fault: Fault) {
        self.shared.faults.inject(fault);
    }

    /// Remove every fault.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// The request log and counters.
    #[must_use]
    pub fn log(&self) -> &RequestLog {
        &self.shared.log
    }

    /// Every request so far.
    #[must_use]
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.log.entries()
    }

    /// Requests of `operation` so far.
    #[must_use]
    pub fn count(&self, operation: Operation) -> u64 {
        self.shared.log.count(operation)
    }

    // ---- inspection ----

    /// The ARM id of the standalone NIC `nic` (in the nodes' resource group).
    #[must_use]
    pub fn vm_nic_id(&self, nic: &str) -> String {
        lock(&self.shared.model).network_id("networkInterfaces", nic)
    }

    /// The ARM id of scale set `vmss` instance `index`'s NIC `nic`.
    #[must_use]
    pub fn vmss_nic_id(&self, vmss: &str, index: u32, nic: &str) -> String {
        let m = lock(&self.shared.model);
        format!(
            "{}/virtualMachines/{index}/networkInterfaces/{nic}",
            m.compute_id("virtualMachineScaleSets", vmss)
        )
    }

    /// A NIC's JSON as ARM would answer it (by id, any case).
    #[must_use]
    pub fn nic(&self, id: &str) -> Option<Value> {
        let m = lock(&self.shared.model);
        m.nic_index(id).map(|i| m.nics[i].clone())
    }

    /// The private addresses of a NIC's ipConfigurations, in order.
    #[must_use]
    pub fn nic_addresses(&self, id: &str) -> Vec<Ipv4Addr> {
        self.nic(id).map(|n| addresses(&n)).unwrap_or_default()
    }

    /// The private addresses of every NIC of an instance (a VM or scale set VM ARM id, any
    /// case, as Cilium's instance ids are lowercase).
    #[must_use]
    pub fn instance_addresses(&self, instance_id: &str) -> Vec<Ipv4Addr> {
        let m = lock(&self.shared.model);
        m.nics
            .iter()
            .filter(|n| {
                n["properties"]["virtualMachine"]["id"]
                    .as_str()
                    .is_some_and(|v| same(v, instance_id))
            })
            .flat_map(addresses)
            .collect()
    }

    /// A subnet's canonical ARM id (`vnet/subnet` or a unique subnet name).
    #[must_use]
    pub fn subnet_id(&self, subnet: &str) -> String {
        let m = lock(&self.shared.model);
        let i = m
            .subnet_ref(subnet)
            .unwrap_or_else(|e| panic!("{}", e.message));
        m.subnets[i].id.clone()
    }

    /// `2^host - 5 - len(ipConfigurations)` of a subnet.
    #[must_use]
    pub fn subnet_free(&self, subnet: &str) -> u64 {
        let m = lock(&self.shared.model);
        let i = m
            .subnet_ref(subnet)
            .unwrap_or_else(|e| panic!("{}", e.message));
        m.subnets[i].free()
    }

    /// How many ipConfigurations a subnet lists.
    #[must_use]
    pub fn subnet_ip_configurations(&self, subnet: &str) -> usize {
        let m = lock(&self.shared.model);
        let i = m
            .subnet_ref(subnet)
            .unwrap_or_else(|e| panic!("{}", e.message));
        m.subnets[i].holders.len()
    }

    /// Every public IP: (id, address, the ipConfiguration it is attached to).
    #[must_use]
    pub fn public_ips(&self) -> Vec<(String, Ipv4Addr, Option<String>)> {
        lock(&self.shared.model)
            .public_ips
            .iter()
            .map(|p| (p.id.clone(), p.address, p.ip_config.clone()))
            .collect()
    }

    /// Async operations not finished yet.
    #[must_use]
    pub fn pending_operations(&self) -> usize {
        lock(&self.shared.model)
            .ops
            .iter()
            .filter(|o| !o.done)
            .count()
    }

    // ---- mutations ----

    /// Add a standalone VM with its NICs.
    pub fn add_vm(&self, vm: &VmSpec) {
        lock(&self.shared.model)
            .add_vm(&vm.name, &vm.nics)
            .unwrap_or_else(|e| panic!("add_vm {}: {}", vm.name, e.message));
    }

    /// Delete a standalone VM and its NICs; whether it existed.
    #[expect(
        clippy::must_use_candidate,
        reason = "deleting rarely needs the answer"
    )]
    pub fn delete_vm(&self, name: &str) -> bool {
        lock(&self.shared.model).delete_vm(name)
    }

    /// Add scale set instance `index` (NICs from the scale set model unless given).
    pub fn add_vmss_instance(&self, vmss: &str, index: u32, nics: Option<&[NicSpec]>) {
        lock(&self.shared.model)
            .add_instance(vmss, index, nics)
            .unwrap_or_else(|e| panic!("add_vmss_instance {vmss}/{index}: {}", e.message));
    }

    /// Delete scale set instance `index`; whether it existed.
    #[expect(
        clippy::must_use_candidate,
        reason = "deleting rarely needs the answer"
    )]
    pub fn delete_vmss_instance(&self, vmss: &str, index: u32) -> bool {
        lock(&self.shared.model).delete_instance(vmss, &index.to_string())
    }

    /// Give a NIC exactly `total` ipConfigurations (adding `weft-fill-N` configs in its primary
    /// subnet, or dropping the last ones), already `Succeeded`.
    pub fn set_ip_config_count(&self, nic_id: &str, total: usize) {
        let mut m = lock(&self.shared.model);
        set_ip_config_count(&mut m, nic_id, total)
            .unwrap_or_else(|e| panic!("set_ip_config_count {nic_id}: {}", e.message));
    }

    /// Fill a subnet with addresses held by no NIC of the scenario until `leave_free` are left.
    pub fn fill_subnet(&self, subnet: &str, leave_free: u64) {
        let mut m = lock(&self.shared.model);
        let i = m
            .subnet_ref(subnet)
            .unwrap_or_else(|e| panic!("{}", e.message));
        let filler = m.network_id("networkInterfaces", "weft-emulator-filler");
        let mut n = m.subnets[i].holders.len();
        while m.subnets[i].free() > leave_free {
            let holder = format!("{filler}/ipConfigurations/{}-{n}", m.subnets[i].name);
            m.allocate(i, &holder)
                .unwrap_or_else(|e| panic!("fill_subnet: {}", e.message));
            n += 1;
        }
    }

    /// Fill a subnet completely (its free count becomes 0).
    pub fn exhaust_subnet(&self, subnet: &str) {
        self.fill_subnet(subnet, 0);
    }

    /// Give back every address [`ArmEmulator::fill_subnet`] took from a subnet.
    pub fn release_subnet_fillers(&self, subnet: &str) {
        let mut m = lock(&self.shared.model);
        let i = m
            .subnet_ref(subnet)
            .unwrap_or_else(|e| panic!("{}", e.message));
        m.subnets[i]
            .holders
            .retain(|k, _| !k.contains("/weft-emulator-filler/"));
    }

    /// Items per list page from now on.
    pub fn set_page_size(&self, size: usize) {
        lock(&self.shared.model).page_size = size.max(1);
    }

    /// How PUTs answer from now on.
    pub fn set_lro(&self, lro: LroSpec) {
        lock(&self.shared.model).lro = lro;
    }

    /// Finish every pending async operation now.
    pub fn complete_operations(&self) {
        lro::complete_all(&mut lock(&self.shared.model));
    }
}

fn addresses(nic: &Value) -> Vec<Ipv4Addr> {
    nic["properties"]["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["properties"]["privateIPAddress"].as_str()?.parse().ok())
        .collect()
}

fn set_ip_config_count(m: &mut Model, nic_id: &str, total: usize) -> Result<(), ArmError> {
    let i = m
        .nic_index(nic_id)
        .ok_or_else(|| ArmError::not_found(nic_id))?;
    let nic = m.nics[i].clone();
    let vm_id = nic["properties"]["virtualMachine"]["id"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let grow = |configs: &mut Vec<Value>, subnet: &Value| {
        configs.truncate(total.max(1));
        let mut k = configs.len();
        while configs.len() < total {
            configs.push(
                serde_json::json!({"name": format!("weft-fill-{k}"), "properties": {
                "primary": false, "privateIPAddressVersion": "IPv4", "subnet": subnet}}),
            );
            k += 1;
        }
    };
    let vmss_marker = "/virtualmachinescalesets/";
    if let Some(at) = vm_id.to_ascii_lowercase().find(vmss_marker) {
        let rest: Vec<&str> = vm_id[at + vmss_marker.len()..].split('/').collect();
        let (set, index) = (rest[0], rest.get(2).copied().unwrap_or(""));
        let (si, ii) = m
            .instance(set, index)
            .ok_or_else(|| ArmError::not_found(&vm_id))?;
        let mut props = m.scale_sets[si].instances[ii].properties.clone();
        let name = nic["name"].as_str().unwrap_or("");
        let configs = props
            .get_mut("networkProfileConfiguration")
            .and_then(|n| n["networkInterfaceConfigurations"].as_array_mut())
            .and_then(|a| {
                a.iter_mut()
                    .find(|c| c["name"].as_str().is_some_and(|n| same(n, name)))
            })
            .and_then(|c| c["properties"]["ipConfigurations"].as_array_mut())
            .ok_or_else(|| ArmError::not_found(nic_id))?;
        let subnet = configs[0]["properties"]["subnet"].clone();
        grow(configs, &subnet);
        vmss::apply_model(m, si, ii, props, "Succeeded", &mut Vec::new())
    } else {
        let mut body = nic.clone();
        let configs = body["properties"]["ipConfigurations"]
            .as_array_mut()
            .ok_or_else(|| ArmError::not_found(nic_id))?;
        let subnet = configs[0]["properties"]["subnet"].clone();
        grow(configs, &subnet);
        let name = nic["name"].as_str().unwrap_or("").to_owned();
        nics::put_nic(m, &name, body, "Succeeded", &mut Vec::new()).map(|_| ())
    }
}

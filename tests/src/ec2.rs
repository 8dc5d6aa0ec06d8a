//! An EC2 + STS + IMDS emulator for tests: a wire-level test double of the documented HTTP
//! behaviour of the calls weft-operator's `--ipam eni` makes (the AWS Query protocol, API
//! version 2016-11-15), served over plain HTTP/1.1 on one loopback port, so one base URL serves
//! as the EC2 endpoint, the STS endpoint and the IMDS endpoint. It lives only in tests and is
//! independent of the operator's EC2 client (boto3 judges its XML in its own tests).
//! [`Ec2Emulator::start`] runs it on its own thread and tokio runtime; the `ec2-emulator`
//! program serves it to other processes.
//!
//! **Modelled, faithful where moto is not** (§12.4/§12.6 of the ENI spec): the 18 EC2 actions
//! of Cilium's ENI IPAM plus CreateTags; form bodies with flattened lists; `<xxxSet><item>`
//! answers with `<requestId>`; AWS error bodies with EC2's codes and statuses; per-instance-type
//! limits from a scenario catalogue (`AttachmentLimitExceeded`, `PrivateIpAddressLimitExceeded`
//! counting the primary and each prefix as a slot); device-index conflicts ("interface attached
//! at device"); attach only to a running instance in the ENI's AZ; subnet accounting with AWS's
//! 5 reserved addresses, never a duplicate address, `InsufficientFreeAddressesInSubnet`; aligned
//! /28 prefixes from wholly free space with `InsufficientCidrBlocks` (create) and
//! `InvalidParameterValue` "There aren't sufficient free Ipv4 addresses or prefixes" (assign);
//! IPv6 /80 prefixes from a subnet's /64; DescribeNetworkInterfaces filters (unknown filter
//! names refused), `NetworkInterfaceId.N`, `MaxResults` + `NextToken` paging and
//! `OperationNotPermitted` for unpaged listings past a scenario threshold; DeleteNetworkInterface
//! refusing an attached ENI; UnassignPrivateIpAddresses refusing the primary;
//! delete-on-termination honoured when an instance is terminated; `ClientToken` idempotency;
//! GetSecurityGroupsForVpc and DescribeSecurityGroups; Elastic IPs; SigV4 `Authorization`
//! required and its scope checked (region, service, access key), the HMAC verified
//! (`SignatureDoesNotMatch`) for keys whose secret the emulator knows (`secretKeys`, and every
//! key STS or IMDS issued) and not for others;
//! IAM policy documents enforced (`UnauthorizedOperation`, 403); injected faults, a request-rate
//! limit and a request log; IMDSv2 with the token rule; STS `AssumeRoleWithWebIdentity` and
//! instance-role credentials from IMDS, whose keys EC2 then accepts.
//!
//! **Not modelled.** Other actions (DetachNetworkInterface and RunInstances exist only as
//! handle methods), multiple network cards, IPv6 addresses (only /80 prefixes), prefix
//! delegation refused on non-Nitro types, security-group rules, DryRun, session-token checks,
//! signature expiry (`X-Amz-Date` is not compared with the clock), and per-resource policy
//! conditions (`Resource` and `Condition` are ignored).

mod auth;
mod describe;
mod error;
mod faults;
mod imds;
mod model;
mod query;
mod render;
mod scenario;
mod server;
mod sigv4;
mod sts;
mod write;
mod xml;

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::Value;

pub use self::{
    error::Ec2Error,
    faults::{Fault, FaultAnswer, LoggedRequest, RequestLog},
    model::{Association, Attachment, Eni},
    scenario::{
        EXAMPLE_INSTANCE, EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET, EXAMPLE_SG, EXAMPLE_VPC,
        ElasticIpSpec, EniSpec, ImdsSpec, InstanceSpec, InstanceTypeSpec, RateLimitSpec,
        RouteTableSpec, Scenario, ScenarioError, SecurityGroupSpec, SubnetSpec, Tags, VpcSpec,
        WebIdentitySpec,
    },
    server::{ACTIONS, VERSION},
};
use self::{
    faults::{Faults, RateLimit, lock},
    imds::Imds,
    model::{Model, enis::NewEni},
    server::Shared,
    sts::Keys,
};

/// Why an emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The scenario is inconsistent or its policy file unreadable.
    #[error("invalid scenario")]
    Scenario {
        /// Why.
        #[source]
        source: ScenarioError,
    },
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
pub struct Ec2EmulatorBuilder {
    scenario: Scenario,
    listen: SocketAddr,
    log_stderr: bool,
}

impl Ec2EmulatorBuilder {
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
    pub fn start(self) -> Ec2Emulator {
        self.try_start()
            .unwrap_or_else(|e| panic!("ec2 emulator: {}", crate::report(&e)))
    }

    /// Start serving from a thread of its own.
    ///
    /// # Errors
    /// An inconsistent scenario, or the address, runtime or thread cannot be set up.
    pub fn try_start(self) -> Result<Ec2Emulator, StartError> {
        let s = &self.scenario;
        let scenario = |source| StartError::Scenario { source };
        let model = Model::new(s).map_err(scenario)?;
        let policies = s.load_policies().map_err(scenario)?;
        let rate = RateLimit::default();
        rate.set(s.rate_limit.map(|r| (r.per_second, r.burst)));
        let server = |source| StartError::Server { source };
        let listener = crate::emulator::bind(self.listen).map_err(server)?;
        let shared = Arc::new(Shared {
            model: Mutex::new(model),
            imds: Imds::new(
                s.imds.instance.clone(),
                s.imds.require_token,
                s.imds.role.clone(),
            ),
            keys: Keys::new(
                s.access_keys.clone(),
                s.secret_keys.clone().into_iter().collect(),
            ),
            web_identity: s.web_identity.clone(),
            policies: Mutex::new(policies),
            faults: Faults::default(),
            rate,
            log: RequestLog::default(),
            log_stderr: self.log_stderr,
        });
        let server_shared = Arc::clone(&shared);
        let server = listener
            .serve("ec2-emulator", move |req| {
                server::handle(Arc::clone(&server_shared), req)
            })
            .map_err(server)?;
        Ok(Ec2Emulator {
            shared,
            scenario: self.scenario,
            server,
        })
    }
}

/// A running emulator; stops (and cuts every connection) on drop.
#[derive(Debug)]
pub struct Ec2Emulator {
    shared: Arc<Shared>,
    scenario: Scenario,
    server: crate::emulator::Server,
}

/// An `Authorization` header for `access_key` in `region`, SigV4-shaped with a dummy signature
/// (accepted for keys whose secret the emulator does not know) — for tests that speak the wire
/// by hand.
#[must_use]
pub fn authorization(access_key: &str, region: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential={access_key}/20260101/{region}/ec2/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=00"
    )
}

impl Ec2Emulator {
    /// Start serving `scenario` on a free loopback port; panics if it cannot.
    #[must_use]
    pub fn start(scenario: Scenario) -> Self {
        Self::builder(scenario).start()
    }

    /// Settings before starting.
    #[must_use]
    pub fn builder(scenario: Scenario) -> Ec2EmulatorBuilder {
        Ec2EmulatorBuilder {
            scenario,
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            log_stderr: false,
        }
    }

    /// `http://<address>:<port>`: the EC2 endpoint (`--ec2-api-endpoint`), the STS endpoint and
    /// the IMDS endpoint (`--aws-imds-endpoint`) at once.
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

    /// The region requests must be signed for.
    #[must_use]
    pub fn region(&self) -> String {
        lock(&self.shared.model).region.clone()
    }

    // ---- faults, limits, policy, credentials and the log ----

    /// Inject a fault.
    pub fn inject(&self, fault: Fault) {
        self.shared.faults.inject(fault);
    }

    /// Faults with a use left (one injected `times(n)` counts until its last use was taken
    /// by a request).
    #[must_use]
    pub fn armed_faults(&self) -> usize {
        self.shared.faults.armed()
    }

    /// Remove every fault.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// Throttle above `per_second` requests per second with a bucket of `burst`; `None`: no
    /// limit.
    pub fn set_rate_limit(&self, limit: Option<(f64, u32)>) {
        self.shared.rate.set(limit);
    }

    /// Enforce these policy documents from now on (every one must allow); empty: none.
    pub fn set_policies(&self, documents: Vec<Value>) {
        *lock(&self.shared.policies) = documents;
    }

    /// Refuse unpaged listings longer than `limit` from now on; `None`: never.
    pub fn set_unpaged_limit(&self, limit: Option<usize>) {
        lock(&self.shared.model).unpaged_limit = limit;
    }

    /// Require IMDSv2 tokens from now on (or not).
    pub fn set_imds_require_token(&self, require: bool) {
        *lock(&self.shared.imds.require_token) = require;
    }

    /// Describe `instance` in IMDS from now on.
    pub fn set_imds_instance(&self, instance: &str) {
        *lock(&self.shared.imds.instance) = Some(instance.to_owned());
    }

    /// Answer IMDSv2 token requests with `status` (403, 404, 405: clients fall back to IMDSv1);
    /// `None`: hand out tokens again.
    pub fn refuse_imds_tokens(&self, status: Option<u16>) {
        *lock(&self.shared.imds.refuse_tokens) = status;
    }

    /// Invalidate every IMDS token handed out.
    pub fn revoke_imds_tokens(&self) {
        self.shared.imds.revoke_tokens();
    }

    /// Lifetime of credentials STS and IMDS hand out from now on.
    pub fn set_credential_lifetime(&self, lifetime: Duration) {
        *lock(&self.shared.keys.lifetime) = Some(lifetime);
    }

    /// Stop accepting every key STS or IMDS handed out.
    pub fn revoke_issued_credentials(&self) {
        self.shared.keys.revoke_issued();
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

    /// Requests of `action` so far (`IMDS`/`IMDSToken` for IMDS).
    #[must_use]
    pub fn count(&self, action: &str) -> u64 {
        self.shared.log.count(action)
    }

    // ---- inspection ----

    /// An ENI as it is now.
    #[must_use]
    pub fn eni(&self, id: &str) -> Option<Eni> {
        lock(&self.shared.model).enis.get(id).cloned()
    }

    /// Every ENI, by id.
    #[must_use]
    pub fn enis(&self) -> Vec<Eni> {
        lock(&self.shared.model).enis.values().cloned().collect()
    }

    /// The ENIs attached to `instance`, by device index.
    #[must_use]
    pub fn instance_enis(&self, instance: &str) -> Vec<Eni> {
        lock(&self.shared.model)
            .instance_enis(instance)
            .into_iter()
            .cloned()
            .collect()
    }

    /// `availableIpAddressCount` of a subnet (panics on an unknown one).
    #[must_use]
    pub fn subnet_free(&self, subnet: &str) -> u64 {
        lock(&self.shared.model)
            .subnet(subnet)
            .unwrap_or_else(|e| panic!("{}", e.message))
            .free()
    }

    /// Whether an instance exists.
    #[must_use]
    pub fn has_instance(&self, id: &str) -> bool {
        lock(&self.shared.model).instances.contains_key(id)
    }

    // ---- mutations ----

    /// Add an instance with its primary ENI.
    ///
    /// # Errors
    /// Unknown type or subnet, a duplicate id, a full subnet.
    pub fn add_instance(&self, spec: &InstanceSpec) -> Result<(), Ec2Error> {
        lock(&self.shared.model).add_instance(spec)
    }

    /// Terminate an instance: its delete-on-termination ENIs are deleted, the others detached.
    ///
    /// # Errors
    /// Unknown instance.
    pub fn terminate_instance(&self, id: &str) -> Result<(), Ec2Error> {
        lock(&self.shared.model).terminate(id)
    }

    /// Stop or start an instance (a stopped one refuses attachments).
    ///
    /// # Errors
    /// Unknown instance.
    pub fn set_running(&self, id: &str, running: bool) -> Result<(), Ec2Error> {
        let mut m = lock(&self.shared.model);
        m.instances
            .get_mut(id)
            .ok_or_else(|| Ec2Error::instance_not_found(id))?
            .running = running;
        Ok(())
    }

    /// Detach an ENI (what DetachNetworkInterface would do; leaks it for GC tests).
    ///
    /// # Errors
    /// Unknown ENI.
    pub fn detach_eni(&self, id: &str) -> Result<(), Ec2Error> {
        lock(&self.shared.model).detach(id)
    }

    /// Create a detached ENI in `subnet` with `tags` (as another tool would); its id.
    ///
    /// # Errors
    /// Unknown subnet, a full subnet.
    pub fn create_detached_eni(&self, subnet: &str, tags: Tags) -> Result<String, Ec2Error> {
        lock(&self.shared.model).create_eni(&NewEni {
            subnet: subnet.to_owned(),
            tags,
            ..NewEni::default()
        })
    }

    /// Hold a subnet's free addresses (held by no ENI) until `leave_free` are left.
    pub fn fill_subnet(&self, subnet: &str, leave_free: u64) {
        let mut m = lock(&self.shared.model);
        let s = m
            .subnets
            .get_mut(subnet)
            .unwrap_or_else(|| panic!("no subnet {subnet}"));
        let extra = s.free().saturating_sub(leave_free);
        s.take(u32::try_from(extra).unwrap_or(u32::MAX), FILLER)
            .unwrap_or_else(|| panic!("fill_subnet {subnet}: cannot hold {extra}"));
    }

    /// Give back every address [`Ec2Emulator::fill_subnet`] held in a subnet.
    pub fn release_subnet_fillers(&self, subnet: &str) {
        let mut m = lock(&self.shared.model);
        let s = m
            .subnets
            .get_mut(subnet)
            .unwrap_or_else(|| panic!("no subnet {subnet}"));
        let held: Vec<Ipv4Addr> = s
            .held
            .iter()
            .filter(|(_, h)| *h == FILLER)
            .map(|(n, _)| Ipv4Addr::from(*n))
            .collect();
        s.release(&held);
    }

    /// Hold one address of a subnet (held by no ENI): breaks the /28 it falls in.
    pub fn hold_address(&self, subnet: &str, ip: Ipv4Addr) {
        let mut m = lock(&self.shared.model);
        let s = m
            .subnets
            .get_mut(subnet)
            .unwrap_or_else(|| panic!("no subnet {subnet}"));
        assert!(s.hold(ip, FILLER), "{ip} is not free in {subnet}");
    }
}

/// The holder of addresses a test put aside.
const FILLER: &str = "weft-emulator-filler";

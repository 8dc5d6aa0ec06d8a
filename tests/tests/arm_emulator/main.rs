//! The ARM + IMDS + AAD emulator (`weft_tests::azure`), driven over HTTP with a plain hyper
//! client the way Cilium's Azure IPAM drives Azure: tokens from AAD and IMDS and the 401s
//! without them (`auth.rs`), reads, paging, case-insensitive names and 404s (`reads.rs`),
//! NIC and scale set VM PUTs with their addressing, limits and async operations (`writes.rs`),
//! static public IPs (`public_ips.rs`), injected faults (`faults.rs`), RBAC with the role files
//! of `deploy/azure/` (`roles.rs`), and the `arm-emulator` program (`program.rs`). No root.

mod auth;
mod faults;
mod program;
mod public_ips;
mod reads;
mod roles;
mod writes;

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{HeaderMap, Request};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use weft_tests::azure::{ArmEmulator, Scenario};

/// The scenario most tests use: one VMSS with 2 instances, one standalone VM, one prefix.
pub(crate) const SCENARIO: &str = r"
subscriptionId: 11111111-2222-3333-4444-555555555555
resourceGroup: MC_weft_cluster_westeurope
vnets:
  - name: aks-vnet
    subnets:
      - {name: aks-subnet, cidr: 10.240.0.0/22}
      - {name: pods, cidr: 10.241.0.0/28}
vms:
  - name: standalone-0
    nics:
      - {name: standalone-0-nic, subnet: aks-vnet/aks-subnet, asgs: [asg-nodes], nsg: nsg-nodes}
scaleSets:
  - name: aks-nodepool1-12345678-vmss
    nics:
      - {name: aks-nodepool1-12345678-vmss, subnet: aks-subnet, asgs: [asg-nodes]}
    instances: [{index: 0}, {index: 1}]
publicIpPrefixes:
  - name: weft-prefix
    prefix: 20.0.0.0/30
    tags: {weft: egress}
    publicIps: [{name: taken-ip}]
";

/// `/subscriptions/S/resourceGroups/RG/providers` of [`SCENARIO`].
pub(crate) const S: &str = "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/MC_weft_cluster_westeurope/providers";
/// The scale set of [`SCENARIO`].
pub(crate) const VMSS: &str = "aks-nodepool1-12345678-vmss";

/// [`SCENARIO`] parsed.
pub(crate) fn scenario() -> Scenario {
    Scenario::from_yaml(SCENARIO).unwrap_or_else(|e| panic!("scenario: {e}"))
}

/// [`SCENARIO`] with `edit` applied, started.
pub(crate) fn start_with(edit: impl FnOnce(&mut Scenario)) -> ArmEmulator {
    let mut s = scenario();
    edit(&mut s);
    ArmEmulator::start(s)
}

/// An answer.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Resp {
    /// The body as JSON (panics with the body if it is not).
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}), status {}: {:?}", self.status, self.text()))
    }

    /// The body as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// `error.code` of an ARM error body.
    pub(crate) fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// Panic unless the status is `status`.
    #[track_caller]
    pub(crate) fn expect(self, status: u16) -> Self {
        assert_eq!(self.status, status, "unexpected answer: {}", self.text());
        self
    }
}

/// A plain HTTP/1.1 client of the emulator, with a bearer token unless anonymous.
#[derive(Debug)]
pub(crate) struct Client {
    runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
    base: String,
    pub(crate) token: Option<String>,
}

impl Client {
    /// With a token of the scenario's first service principal.
    pub(crate) fn new(emulator: &ArmEmulator) -> Self {
        let mut c = Self::anonymous(emulator);
        c.token = Some(emulator.token());
        c
    }

    /// Without a token.
    pub(crate) fn anonymous(emulator: &ArmEmulator) -> Self {
        Self::to(emulator.addr())
    }

    /// Without a token, to `addr`.
    pub(crate) fn to(addr: SocketAddr) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        Self {
            runtime,
            addr,
            base: format!("http://{addr}"),
            token: None,
        }
    }

    /// Send a request to `target` (a path with its query, or an absolute URL on the emulator).
    pub(crate) fn send(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
    ) -> Resp {
        let path = target.strip_prefix(&self.base).unwrap_or(target).to_owned();
        let mut req = Request::builder()
            .method(method)
            .uri(&path)
            .header("host", self.addr.to_string());
        if let Some(token) = &self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(body.unwrap_or_default()))
            .expect("a valid request");
        self.runtime.block_on(async {
            let stream = tokio::net::TcpStream::connect(self.addr)
                .await
                .unwrap_or_else(|e| panic!("connect {}: {e}", self.addr));
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("HTTP handshake");
            tokio::spawn(conn);
            let resp = tokio::time::timeout(Duration::from_secs(30), sender.send_request(req))
                .await
                .unwrap_or_else(|_| panic!("{method} {path}: no answer in 30 s"))
                .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
            let (parts, body) = resp.into_parts();
            let body = body.collect().await.expect("the body").to_bytes();
            Resp {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
            }
        })
    }

    /// GET.
    pub(crate) fn get(&self, target: &str) -> Resp {
        self.send("GET", target, &[], None)
    }

    /// PUT a JSON body.
    pub(crate) fn put(&self, target: &str, body: &Value) -> Resp {
        let bytes = Bytes::from(serde_json::to_vec(body).expect("JSON"));
        self.send(
            "PUT",
            target,
            &[("content-type", "application/json")],
            Some(bytes),
        )
    }

    /// Every item of a paged list, following `nextLink`; the number of pages too.
    pub(crate) fn list(&self, target: &str) -> (Vec<Value>, usize) {
        let mut items = Vec::new();
        let mut next = Some(target.to_owned());
        let mut pages = 0;
        while let Some(url) = next {
            let page = self.get(&url).expect(200).json();
            pages += 1;
            assert!(pages < 1000, "nextLink never ends");
            items.extend(page["value"].as_array().cloned().unwrap_or_default());
            next = page["nextLink"].as_str().map(str::to_owned);
        }
        (items, pages)
    }

    /// Poll a PUT's `Azure-AsyncOperation` until it is `Succeeded`; the number of polls.
    pub(crate) fn wait(&self, put: &Resp) -> usize {
        let url = put
            .header("azure-asyncoperation")
            .unwrap_or_else(|| panic!("no Azure-AsyncOperation on {}", put.status));
        for polls in 1..=20 {
            let status = self.get(&url).expect(200).json();
            match status["status"].as_str() {
                Some("Succeeded") => return polls,
                Some("InProgress") => {}
                other => panic!("operation status {other:?}: {status}"),
            }
        }
        panic!("operation still InProgress after 20 polls");
    }
}

/// `…?api-version=` with Cilium's api-version for `path`'s kind.
pub(crate) fn v(path: &str) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}api-version=2025-07-01")
}

/// An ipConfiguration as Cilium appends it to a NIC (VM path).
pub(crate) fn cilium_nic_config(name: &str, subnet_id: &str, asgs: &Value) -> Value {
    serde_json::json!({"name": name, "properties": {"applicationSecurityGroups": asgs,
        "privateIPAllocationMethod": "Dynamic", "subnet": {"id": subnet_id}}})
}

/// An ipConfiguration as Cilium appends it to a scale set VM NIC configuration.
pub(crate) fn cilium_vmss_config(name: &str, subnet_id: &str, asgs: &Value) -> Value {
    serde_json::json!({"name": name, "properties": {"applicationSecurityGroups": asgs,
        "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet_id}}})
}

/// The ipConfigurations' private addresses of a NIC JSON.
pub(crate) fn addresses(nic: &Value) -> Vec<String> {
    nic["properties"]["ipConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c["properties"]["privateIPAddress"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

//! The EC2 + STS + IMDS emulator (`weft_tests::ec2`), driven over HTTP with a plain hyper
//! client speaking the Query protocol: answer and error shapes, signing scope and versions
//! (`wire.rs`), instance-type limits, device indexes and instance state (`limits.rs`), subnet
//! accounting, reserved addresses and prefixes (`addresses.rs`), listings with filters and
//! paging (`listing.rs`), ENI life cycle, idempotency, security groups and Elastic IPs
//! (`lifecycle.rs`), faults, rate limit, request log and policy (`faults.rs`), IMDS and STS
//! (`imds.rs`), the `ec2-emulator` program (`program.rs`), and boto3 as an independent client
//! judging the XML (`boto3.rs`). No root.

mod addresses;
mod boto3;
mod faults;
mod imds;
mod lifecycle;
mod limits;
mod listing;
mod program;
mod wire;

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{HeaderMap, Request};
use hyper_util::rt::TokioIo;
use weft_tests::ec2::{Ec2Emulator, Scenario, authorization};

/// An answer.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Resp {
    /// The body as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The text of every `<name>…</name>` element, in document order.
    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        values(&self.text(), name)
    }

    /// The text of the first `<name>…</name>` element (panics with the body if none).
    #[track_caller]
    pub(crate) fn one(&self, name: &str) -> String {
        self.all(name)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no <{name}> in {}", self.text()))
    }

    /// `Error/Code` of an error body ("" if none).
    pub(crate) fn code(&self) -> String {
        self.all("Code").into_iter().next().unwrap_or_default()
    }

    /// Panic unless the status is `status`.
    #[track_caller]
    pub(crate) fn expect(self, status: u16) -> Self {
        assert_eq!(self.status, status, "unexpected answer: {}", self.text());
        self
    }

    /// Panic unless this is an error with `status` and `code`.
    #[track_caller]
    pub(crate) fn expect_error(self, status: u16, code: &str) -> Self {
        assert_eq!(
            (self.status, self.code().as_str()),
            (status, code),
            "unexpected answer: {}",
            self.text()
        );
        self
    }
}

/// The text of every `<name>…</name>` (leaf) element of `xml`.
pub(crate) fn values(xml: &str, name: &str) -> Vec<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = &rest[start + open.len()..];
        let Some(end) = rest.find(&close) else { break };
        out.push(rest[..end].to_owned());
        rest = &rest[end + close.len()..];
    }
    out
}

/// A plain HTTP/1.1 client of the emulator, signing (by shape) with `access_key` in `region`.
#[derive(Debug)]
pub(crate) struct Client {
    runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
    pub(crate) access_key: String,
    pub(crate) region: String,
}

impl Client {
    /// For `emulator`, key `AKIDWEFTTEST`, the emulator's region.
    pub(crate) fn new(emulator: &Ec2Emulator) -> Self {
        let mut c = Self::to(emulator.addr());
        c.region = emulator.region();
        c
    }

    /// To `addr`, region us-east-1.
    pub(crate) fn to(addr: SocketAddr) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        Self {
            runtime,
            addr,
            access_key: "AKIDWEFTTEST".to_owned(),
            region: "us-east-1".to_owned(),
        }
    }

    /// Send a request.
    pub(crate) fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Resp {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string());
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let req = req.body(Full::new(body)).expect("a valid request");
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

    /// POST a form body with these headers.
    pub(crate) fn form(&self, params: &[(&str, &str)], headers: &[(&str, String)]) -> Resp {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        let mut all = vec![(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8".to_owned(),
        )];
        all.extend(headers.iter().cloned());
        self.send("POST", "/", &all, Bytes::from(body))
    }

    /// A signed EC2 call: `Action=action&Version=2016-11-15&…`.
    pub(crate) fn call(&self, action: &str, params: &[(&str, &str)]) -> Resp {
        let mut all = vec![("Action", action), ("Version", "2016-11-15")];
        all.extend_from_slice(params);
        let auth = authorization(&self.access_key, &self.region);
        self.form(
            &all,
            &[
                ("authorization", auth),
                ("x-amz-date", "20260101T000000Z".to_owned()),
            ],
        )
    }

    /// A GET (IMDS).
    pub(crate) fn get(&self, path: &str, headers: &[(&str, String)]) -> Resp {
        self.send("GET", path, headers, Bytes::new())
    }
}

/// [`Scenario::example`] started, with a client.
pub(crate) fn start() -> (Ec2Emulator, Client) {
    start_with(Scenario::example())
}

/// `scenario` started, with a client.
pub(crate) fn start_with(scenario: Scenario) -> (Ec2Emulator, Client) {
    let emulator = Ec2Emulator::start(scenario);
    let client = Client::new(&emulator);
    (emulator, client)
}

/// Create an ENI in `subnet` with `extra` parameters; its id.
#[track_caller]
pub(crate) fn create_eni(c: &Client, subnet: &str, extra: &[(&str, &str)]) -> String {
    let mut params = vec![("SubnetId", subnet)];
    params.extend_from_slice(extra);
    c.call("CreateNetworkInterface", &params)
        .expect(200)
        .one("networkInterfaceId")
}

/// Attach `eni` to `instance` at `index`; the answer.
pub(crate) fn attach(c: &Client, eni: &str, instance: &str, index: u32) -> Resp {
    let index = index.to_string();
    c.call(
        "AttachNetworkInterface",
        &[
            ("NetworkInterfaceId", eni),
            ("InstanceId", instance),
            ("DeviceIndex", &index),
            ("NetworkCardIndex", "0"),
        ],
    )
}

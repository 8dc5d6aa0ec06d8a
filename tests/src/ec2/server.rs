//! The HTTP side: the handler the shared scaffold ([`crate::emulator`]) serves on one listener
//! for EC2, STS and IMDS. `/latest/…` goes to IMDS; everything else is a Query request (form
//! body, or query string) routed by `Action`: `AssumeRoleWithWebIdentity` to STS (unsigned, as
//! the SDKs send it), every other action signed (scope checked, signature verified when the
//! key's secret is known), rate-limited, given its
//! injected fault, checked against the policy, and served from the model ([`super::describe`],
//! [`super::write`]). Every request is logged (and printed to stderr when asked).

use std::{
    collections::BTreeMap,
    convert::Infallible,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::{Instant, SystemTime},
};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::{Request, Response, body::Incoming, header};
use serde_json::Value;

use super::{
    auth, describe,
    error::Ec2Error,
    faults::{FaultAnswer, Faults, LoggedRequest, RateLimit, RequestLog, lock},
    imds::{self, Imds},
    model::Model,
    query::Params,
    scenario::WebIdentitySpec,
    sigv4::{self, Signed},
    sts::{self, Keys},
    write,
};
use crate::emulator::Peer;

/// Largest request body read.
const MAX_BODY: usize = 1024 * 1024;

/// The EC2 API version every request must name.
pub const VERSION: &str = "2016-11-15";

/// The EC2 actions served, in the order of §3.2 of the ENI spec, then CreateTags.
pub const ACTIONS: &[&str] = &[
    "DescribeVpcs",
    "DescribeSubnets",
    "DescribeRouteTables",
    "GetSecurityGroupsForVpc",
    "DescribeSecurityGroups",
    "DescribeNetworkInterfaces",
    "DescribeInstances",
    "DescribeInstanceTypes",
    "DescribeTags",
    "CreateNetworkInterface",
    "AttachNetworkInterface",
    "ModifyNetworkInterfaceAttribute",
    "DeleteNetworkInterface",
    "AssignPrivateIpAddresses",
    "UnassignPrivateIpAddresses",
    "AssignIpv6Addresses",
    "DescribeAddresses",
    "AssociateAddress",
    "CreateTags",
];

/// State the server and the handle share.
#[derive(Debug)]
pub struct Shared {
    /// The estate.
    pub model: Mutex<Model>,
    /// IMDS.
    pub imds: Imds,
    /// Accepted and issued credentials.
    pub keys: Keys,
    /// STS web identities.
    pub web_identity: Option<WebIdentitySpec>,
    /// Policy documents enforced (empty: everything allowed).
    pub policies: Mutex<Vec<Value>>,
    /// Injected faults.
    pub faults: Faults,
    /// The request-rate limit.
    pub rate: RateLimit,
    /// What was asked.
    pub log: RequestLog,
    /// Print every request to stderr.
    pub log_stderr: bool,
}

/// An answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
    code: Option<String>,
}

impl Reply {
    fn xml(body: String) -> Self {
        Self {
            status: 200,
            content_type: "text/xml;charset=UTF-8",
            headers: Vec::new(),
            body,
            code: None,
        }
    }

    fn error(e: &Ec2Error, rid: &str) -> Self {
        Self {
            status: e.status,
            code: Some(e.code.clone()),
            ..Self::xml(e.body(rid))
        }
    }
}

fn request_id() -> String {
    let n = fastrand::u128(..);
    let hex = format!("{n:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..]
    )
}

/// Answer one request (the scaffold, [`crate::emulator`], serves the connections).
pub(super) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at = Instant::now();
    let time = SystemTime::now();
    let (parts, body) = req.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let rid = request_id();
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let mut access_key = None;
    let (action, params, reply) = if path.starts_with("/latest/") {
        let caller = parts.extensions.get::<Peer>().map(|p| p.0.ip());
        let (action, reply) = imds(&shared, &method, &path, &header, caller);
        (
            action.to_owned(),
            BTreeMap::from([("path".to_owned(), path.clone())]),
            reply,
        )
    } else {
        let mut params = Params::parse(parts.uri.query().unwrap_or("").as_bytes());
        params.0.extend(Params::parse(&body).0);
        let action = params.get("Action").unwrap_or("").to_owned();
        let signed = Signed {
            method: &method,
            path: &path,
            query: parts.uri.query().unwrap_or(""),
            headers: &parts.headers,
            body: &body,
        };
        let mut reply = query(&shared, &action, &params, &signed, &rid, &mut access_key).await;
        reply.headers.push(("x-amzn-RequestId", rid.clone()));
        let mut logged = params.0;
        logged.remove("Action");
        logged.remove("Version");
        (action, logged, reply)
    };
    let entry = LoggedRequest {
        action,
        params,
        access_key,
        status: reply.status,
        code: reply.code.clone(),
        at,
        time,
    };
    if shared.log_stderr {
        eprintln!(
            "ec2-emulator: {method} {path} {} -> {}{}",
            entry.action,
            entry.status,
            entry
                .code
                .as_deref()
                .map(|c| format!(" {c}"))
                .unwrap_or_default()
        );
    }
    shared.log.record(entry);
    let mut builder = Response::builder()
        .status(reply.status)
        .header(header::CONTENT_TYPE, reply.content_type);
    for (k, v) in &reply.headers {
        builder = builder.header(*k, v.as_str());
    }
    Ok(builder
        .body(Full::new(Bytes::from(reply.body)))
        .expect("valid response parts"))
}

async fn query(
    shared: &Shared,
    action: &str,
    p: &Params,
    signed: &Signed<'_>,
    rid: &str,
    access_key: &mut Option<String>,
) -> Reply {
    if action == "AssumeRoleWithWebIdentity" {
        let account = lock(&shared.model).account.clone();
        return match sts::assume_role_with_web_identity(
            &shared.keys,
            shared.web_identity.as_ref(),
            &account,
            p,
            rid,
        ) {
            Ok(body) => Reply::xml(body),
            Err(e) => Reply {
                body: sts::error_body(&e, rid),
                ..Reply::error(&e, rid)
            },
        };
    }
    let authorization = signed
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let credential = match auth::parse(authorization) {
        Ok(c) => c,
        Err(e) => return Reply::error(&e, rid),
    };
    *access_key = Some(credential.access_key.clone());
    let region = lock(&shared.model).region.clone();
    if let Err(e) = credential.check(&region, |k| shared.keys.accepted(k)) {
        return Reply::error(&e, rid);
    }
    if let Some(secret) = shared.keys.secret(&credential.access_key)
        && let Err(e) = sigv4::verify(&credential, &secret, signed)
    {
        return Reply::error(&e, rid);
    }
    if !shared.rate.admit() {
        return Reply::error(&Ec2Error::throttled(), rid);
    }
    let mut fault = shared.faults.take(action);
    if let Some(FaultAnswer::Latency(d)) = fault {
        tokio::time::sleep(d).await;
        fault = None;
    }
    if let Some(answer) = fault {
        return fault_reply(answer, rid);
    }
    match p.get("Version") {
        Some(VERSION) => {}
        None => return Reply::error(&Ec2Error::missing("Version"), rid),
        Some(v) => {
            return Reply::error(
                &Ec2Error::client(
                    "InvalidParameterValue",
                    format!("Invalid API version {v}; this endpoint serves {VERSION}"),
                ),
                rid,
            );
        }
    }
    if !ACTIONS.contains(&action) {
        return Reply::error(&Ec2Error::invalid_action(action), rid);
    }
    if !auth::allowed(&lock(&shared.policies), &format!("ec2:{action}")) {
        let account = lock(&shared.model).account.clone();
        return Reply::error(&Ec2Error::unauthorized(&account, action), rid);
    }
    let result = dispatch(&mut lock(&shared.model), action, p, rid);
    match result {
        Ok(body) => Reply::xml(body),
        Err(e) => Reply::error(&e, rid),
    }
}

/// An IMDS request: its log name and answer.
fn imds(
    shared: &Shared,
    method: &str,
    path: &str,
    header: &dyn Fn(&str) -> Option<String>,
    caller: Option<IpAddr>,
) -> (&'static str, Reply) {
    let r = if path == "/latest/api/token" {
        shared
            .imds
            .token(method, header(imds::TTL_HEADER).as_deref())
    } else {
        let m = lock(&shared.model);
        shared.imds.get(
            &m,
            method,
            path,
            header(imds::TOKEN_HEADER).as_deref(),
            caller,
            || shared.keys.issue(),
        )
    };
    let action = if path == "/latest/api/token" {
        "IMDSToken"
    } else {
        "IMDS"
    };
    let reply = Reply {
        status: r.status,
        content_type: r.content_type,
        headers: r.headers,
        body: r.body,
        code: None,
    };
    (action, reply)
}

/// The answer to an injected fault.
fn fault_reply(answer: FaultAnswer, rid: &str) -> Reply {
    let e = match answer {
        FaultAnswer::Throttle => Ec2Error::throttled(),
        FaultAnswer::Internal => Ec2Error::internal(),
        FaultAnswer::Unavailable => Ec2Error::unavailable(),
        FaultAnswer::Error(e) => e,
        FaultAnswer::NotXml(status) => {
            return Reply {
                status,
                content_type: "text/html; charset=utf-8",
                headers: Vec::new(),
                body: "<!doctype html>\n<html><title>Internal Server Error</title><h1>Internal Server Error</h1></html>".to_owned(),
                code: None,
            };
        }
        FaultAnswer::Latency(_) => unreachable!("latency is served, not answered"),
    };
    Reply::error(&e, rid)
}

/// Serve an EC2 action from the model.
fn dispatch(m: &mut Model, action: &str, p: &Params, rid: &str) -> Result<String, Ec2Error> {
    match action {
        "DescribeVpcs" => describe::vpcs(m, p, rid),
        "DescribeSubnets" => describe::subnets(m, p, rid),
        "DescribeRouteTables" => describe::route_tables(m, p, rid),
        "GetSecurityGroupsForVpc" => describe::security_groups_for_vpc(m, p, rid),
        "DescribeSecurityGroups" => describe::security_groups(m, p, rid),
        "DescribeNetworkInterfaces" => describe::network_interfaces(m, p, rid),
        "DescribeInstances" => describe::instances(m, p, rid),
        "DescribeInstanceTypes" => describe::instance_types(m, p, rid),
        "DescribeTags" => describe::tags(m, p, rid),
        "DescribeAddresses" => describe::addresses(m, p, rid),
        "CreateNetworkInterface" => write::create_network_interface(m, p, rid),
        "AttachNetworkInterface" => write::attach_network_interface(m, p, rid),
        "ModifyNetworkInterfaceAttribute" => write::modify_network_interface_attribute(m, p, rid),
        "DeleteNetworkInterface" => write::delete_network_interface(m, p, rid),
        "AssignPrivateIpAddresses" => write::assign_private_ip_addresses(m, p, rid),
        "UnassignPrivateIpAddresses" => write::unassign_private_ip_addresses(m, p, rid),
        "AssignIpv6Addresses" => write::assign_ipv6_addresses(m, p, rid),
        "AssociateAddress" => write::associate_address(m, p, rid),
        "CreateTags" => write::create_tags(m, p, rid),
        _ => Err(Ec2Error::invalid_action(action)),
    }
}

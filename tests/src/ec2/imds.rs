//! IMDS as the operator reads it (§3.5 of the ENI spec), served on the emulator's own port for
//! the instance the scenario names: the IMDSv2 token (`PUT /latest/api/token` with a TTL header
//! of 1–21600 seconds), tokens checked on GETs (a bad or expired one 401; none 401 when the
//! scenario requires v2, else served as IMDSv1), `/latest/meta-data/…` (instance id and type,
//! MAC, local IPv4, placement, the per-MAC interface keys, the instance role's credentials) and
//! `/latest/dynamic/instance-identity/document`, read from the model as it is now, for the
//! instance whose primary address asks (else the one set). Never changes the model.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use serde_json::json;

use super::{
    faults::lock,
    model::{Eni, Model},
    sts::Issued,
    xml::iso8601,
};

/// The IMDS token header.
pub const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";
/// The token TTL header.
pub const TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";

/// An IMDS answer: status, content type, body, extra headers.
#[derive(Debug)]
pub struct ImdsReply {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Body.
    pub body: String,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
}

fn reply(status: u16, body: impl Into<String>) -> ImdsReply {
    ImdsReply {
        status,
        content_type: "text/plain",
        body: body.into(),
        headers: Vec::new(),
    }
}

/// IMDS settings and the tokens handed out.
#[derive(Debug, Default)]
pub struct Imds {
    /// The instance described (default: the first).
    pub instance: Mutex<Option<String>>,
    /// A GET without a token answers 401.
    pub require_token: Mutex<bool>,
    /// The instance role.
    pub role: Option<String>,
    /// Answer token PUTs with this status instead (an IMDS that refuses IMDSv2).
    pub refuse_tokens: Mutex<Option<u16>>,
    tokens: Mutex<HashMap<String, Instant>>,
}

impl Imds {
    /// From the scenario's settings.
    #[must_use]
    pub fn new(instance: Option<String>, require_token: bool, role: Option<String>) -> Self {
        Self {
            instance: Mutex::new(instance),
            require_token: Mutex::new(require_token),
            role,
            refuse_tokens: Mutex::default(),
            tokens: Mutex::default(),
        }
    }

    /// `PUT /latest/api/token`.
    pub fn token(&self, method: &str, ttl: Option<&str>) -> ImdsReply {
        if method != "PUT" {
            return reply(405, "Method Not Allowed");
        }
        if let Some(status) = *lock(&self.refuse_tokens) {
            return reply(status, "Forbidden");
        }
        let Some(ttl) = ttl
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|t| (1..=21_600).contains(t))
        else {
            return reply(400, "Bad Request");
        };
        let token = format!("weft-imds-{:032x}", fastrand::u128(..));
        lock(&self.tokens).insert(token.clone(), Instant::now() + Duration::from_secs(ttl));
        let mut r = reply(200, token);
        r.headers
            .push(("X-aws-ec2-metadata-token-ttl-seconds", ttl.to_string()));
        r
    }

    /// Forget every token (IMDS restarted).
    pub fn revoke_tokens(&self) {
        lock(&self.tokens).clear();
    }

    /// A GET under `/latest/`; `issue` hands out role credentials.
    pub fn get(
        &self,
        m: &Model,
        method: &str,
        path: &str,
        token: Option<&str>,
        caller: Option<IpAddr>,
        issue: impl FnOnce() -> Issued,
    ) -> ImdsReply {
        if method != "GET" {
            return reply(405, "Method Not Allowed");
        }
        match token {
            Some(t) => {
                let valid = lock(&self.tokens)
                    .get(t)
                    .is_some_and(|until| Instant::now() < *until);
                if !valid {
                    return reply(401, "Unauthorized");
                }
            }
            None if *lock(&self.require_token) => return reply(401, "Unauthorized"),
            None => {}
        }
        // The instance whose primary address asks, as on a real instance; else the one set.
        let asking = caller.and_then(|ip| {
            (m.instances.keys()).find(|id| {
                (m.instance_enis(id).first())
                    .and_then(|e| e.ips.first())
                    .is_some_and(|primary| IpAddr::V4(*primary) == ip)
            })
        });
        let id = (asking.cloned())
            .or_else(|| lock(&self.instance).clone())
            .or_else(|| m.instances.keys().next().cloned());
        let Some(instance) = id.and_then(|id| m.instances.get(&id)) else {
            return reply(404, "Not Found");
        };
        let enis = m.instance_enis(&instance.id);
        let primary = enis.first();
        let local_ip = primary
            .and_then(|e| e.ips.first())
            .map(ToString::to_string)
            .unwrap_or_default();
        let meta = path.strip_prefix("/latest/meta-data/");
        let value: Option<String> = match (path, meta) {
            ("/latest/dynamic/instance-identity/document", _) => {
                let mut r = reply(
                    200,
                    serde_json::to_string_pretty(&json!({
                        "accountId": m.account, "architecture": "x86_64",
                        "availabilityZone": instance.az, "imageId": "ami-0abcdef1234567890",
                        "instanceId": instance.id, "instanceType": instance.type_name,
                        "pendingTime": iso8601(SystemTime::now()), "privateIp": local_ip,
                        "region": m.region, "version": "2017-09-30"}))
                    .expect("JSON values serialize"),
                );
                r.content_type = "application/json";
                return r;
            }
            (_, Some("")) => Some(
                "instance-id\ninstance-type\nlocal-ipv4\nmac\nnetwork/\nplacement/\niam/"
                    .to_owned(),
            ),
            (_, Some("instance-id")) => Some(instance.id.clone()),
            (_, Some("instance-type")) => Some(instance.type_name.clone()),
            (_, Some("local-ipv4")) => Some(local_ip),
            (_, Some("mac")) => primary.map(|e| e.mac.clone()),
            (_, Some("placement/availability-zone")) => Some(instance.az.clone()),
            (_, Some("placement/region")) => Some(m.region.clone()),
            (_, Some("network/interfaces/macs/")) => Some(
                enis.iter()
                    .map(|e| format!("{}/", e.mac))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            (_, Some("iam/security-credentials/")) => self.role.clone(),
            (_, Some(rest)) if rest.starts_with("iam/security-credentials/") => {
                let name = &rest["iam/security-credentials/".len()..];
                if self.role.as_deref() != Some(name) {
                    return reply(404, "Not Found");
                }
                let c = issue();
                let mut r = reply(
                    200,
                    serde_json::to_string_pretty(&json!({
                        "Code": "Success", "LastUpdated": iso8601(SystemTime::now()),
                        "Type": "AWS-HMAC", "AccessKeyId": c.access_key,
                        "SecretAccessKey": c.secret, "Token": c.session_token,
                        "Expiration": iso8601(c.expiration)}))
                    .expect("JSON values serialize"),
                );
                r.content_type = "application/json";
                return r;
            }
            (_, Some(rest)) if rest.starts_with("network/interfaces/macs/") => {
                let rest = &rest["network/interfaces/macs/".len()..];
                let (mac, key) = rest.split_once('/').unwrap_or((rest, ""));
                enis.iter()
                    .find(|e| e.mac == mac)
                    .and_then(|e| interface_key(m, e, key))
            }
            _ => None,
        };
        value.map_or_else(|| reply(404, "Not Found"), |v| reply(200, v))
    }
}

/// One key under `network/interfaces/macs/<mac>/` for ENI `e` (`""` lists them).
fn interface_key(m: &Model, e: &Eni, key: &str) -> Option<String> {
    let subnet = m.subnets.get(&e.subnet);
    let vpc = m.vpcs.iter().find(|v| v.id == e.vpc);
    match key {
        "" => Some("device-number\ninterface-id\nlocal-ipv4s\nmac\nowner-id\nsecurity-group-ids\nsubnet-id\nsubnet-ipv4-cidr-block\nvpc-id\nvpc-ipv4-cidr-block\nvpc-ipv4-cidr-blocks".to_owned()),
        "device-number" => e.attachment.as_ref().map(|a| a.device_index.to_string()),
        "interface-id" => Some(e.id.clone()),
        "local-ipv4s" => Some(e.ips.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")),
        "mac" => Some(e.mac.clone()),
        "owner-id" => Some(m.account.clone()),
        "security-group-ids" => Some(e.groups.join("\n")),
        "subnet-id" => Some(e.subnet.clone()),
        "subnet-ipv4-cidr-block" => subnet.map(|s| s.cidr.to_string()),
        "vpc-id" => Some(e.vpc.clone()),
        "vpc-ipv4-cidr-block" => vpc.map(|v| v.cidr.to_string()),
        "vpc-ipv4-cidr-blocks" => vpc.map(|v| {
            std::iter::once(v.cidr).chain(v.extra_cidrs.iter().copied()).map(|c| c.to_string()).collect::<Vec<_>>().join("\n")
        }),
        _ => None,
    }
}

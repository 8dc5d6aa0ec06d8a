//! Who may call: the tenant, the service principals (client secret or federated token) and
//! the managed identities of the scenario; the tokens issued to them (random opaque strings with
//! an expiry and an audience); the AAD token endpoint (`POST /{tenant}/oauth2/v2.0/token`,
//! `client_credentials`) and the IMDS identity and instance endpoints with their error bodies;
//! and the bearer check every ARM request passes (401 `AuthenticationFailed`,
//! `InvalidAuthenticationToken`, `ExpiredAuthenticationToken`,
//! `InvalidAuthenticationTokenAudience`). Knows nothing of the ARM model.

use std::{
    collections::HashMap,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use super::{error::ArmError, route::form, scenario::IdentitySpec, server::Reply};

/// A caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Client (application) id.
    pub client_id: String,
    /// Object id.
    pub object_id: String,
}

#[derive(Clone, Debug)]
struct Token {
    principal: Principal,
    audience: String,
    expires: u64,
}

/// Credentials and issued tokens.
#[derive(Debug)]
pub struct Identities {
    spec: IdentitySpec,
    environment: String,
    lifetime: Duration,
    tokens: HashMap<String, Token>,
}

/// Seconds since the epoch now.
#[must_use]
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A deterministic object id for a client id that has none configured.
#[must_use]
pub fn derived_object_id(client_id: &str) -> String {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in client_id.bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    let hex = format!("{h:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl Identities {
    /// From the scenario's identity section and cloud name.
    #[must_use]
    pub fn new(spec: &IdentitySpec, environment: &str) -> Self {
        Self {
            lifetime: Duration::from_secs(spec.token_lifetime_seconds),
            spec: spec.clone(),
            environment: environment.to_owned(),
            tokens: HashMap::new(),
        }
    }

    /// The tenant id.
    #[must_use]
    pub fn tenant(&self) -> &str {
        &self.spec.tenant_id
    }

    /// The `authorization_uri` ARM names in `WWW-Authenticate`.
    #[must_use]
    pub fn authority(&self) -> String {
        let host = match self.environment.as_str() {
            "AzureUSGovernmentCloud" => "https://login.microsoftonline.us",
            "AzureChinaCloud" => "https://login.chinacloudapi.cn",
            _ => "https://login.windows.net",
        };
        format!("{host}/{}", self.spec.tenant_id)
    }

    /// The audiences ARM accepts in this cloud.
    #[must_use]
    pub fn audiences(&self) -> Vec<String> {
        let (core, arm) = match self.environment.as_str() {
            "AzureUSGovernmentCloud" => (
                "https://management.core.usgovcloudapi.net",
                "https://management.usgovcloudapi.net",
            ),
            "AzureChinaCloud" => (
                "https://management.core.chinacloudapi.cn",
                "https://management.chinacloudapi.cn",
            ),
            _ => (
                "https://management.core.windows.net",
                "https://management.azure.com",
            ),
        };
        vec![
            format!("{core}/"),
            core.to_owned(),
            format!("{arm}/"),
            arm.to_owned(),
        ]
    }

    /// Set the lifetime of tokens issued from now on.
    pub fn set_lifetime(&mut self, lifetime: Duration) {
        self.lifetime = lifetime;
    }

    /// Forget every token issued (callers get 401 until they fetch new ones).
    pub fn revoke_all(&mut self) {
        self.tokens.clear();
    }

    fn principal(&self, client_id: &str) -> Option<Principal> {
        let sp = self
            .spec
            .service_principals
            .iter()
            .find(|s| s.client_id.eq_ignore_ascii_case(client_id))
            .map(|s| (s.client_id.clone(), s.object_id.clone()));
        let mi = self
            .spec
            .managed_identities
            .iter()
            .find(|m| m.client_id.eq_ignore_ascii_case(client_id))
            .map(|m| (m.client_id.clone(), m.object_id.clone()));
        sp.or(mi).map(|(client_id, object_id)| Principal {
            object_id: object_id.unwrap_or_else(|| derived_object_id(&client_id)),
            client_id,
        })
    }

    /// Issue a token for `client_id` (any configured identity) for the ARM audience; the token,
    /// its expiry (seconds since the epoch) and lifetime in seconds.
    ///
    /// # Panics
    /// `client_id` is not a configured identity.
    pub fn issue_for(&mut self, client_id: &str) -> (String, u64, u64) {
        let principal = self
            .principal(client_id)
            .unwrap_or_else(|| panic!("no identity with client id {client_id}"));
        let audience = self.audiences()[0].clone();
        self.issue(principal, &audience)
    }

    fn issue(&mut self, principal: Principal, audience: &str) -> (String, u64, u64) {
        let token = format!(
            "weft-arm.{:016x}{:016x}",
            fastrand::u64(..),
            fastrand::u64(..)
        );
        let lifetime = self.lifetime.as_secs();
        let expires = now() + lifetime;
        self.tokens.insert(
            token.clone(),
            Token {
                principal,
                audience: audience.to_owned(),
                expires,
            },
        );
        (token, expires, lifetime)
    }

    /// Check an ARM request's `Authorization` header; the caller.
    ///
    /// # Errors
    /// 401 as ARM answers a missing, unknown, expired or wrong-audience token.
    pub fn check(&self, authorization: Option<&str>) -> Result<Principal, ArmError> {
        let authority = self.authority();
        let Some(header) = authorization else {
            return Err(ArmError::missing_token(&authority));
        };
        let bearer = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "));
        let Some(token) = bearer.and_then(|t| self.tokens.get(t.trim())) else {
            return Err(ArmError::invalid_token(&authority));
        };
        let now = now();
        if token.expires <= now {
            return Err(ArmError::expired_token(&authority, token.expires, now));
        }
        let audiences = self.audiences();
        if !audiences.iter().any(|a| a == &token.audience) {
            return Err(ArmError::wrong_audience(&token.audience, &audiences));
        }
        Ok(token.principal.clone())
    }

    /// `GET /metadata/identity/oauth2/token`.
    pub fn imds_token(&mut self, metadata: bool, query: &HashMap<String, String>) -> Reply {
        let bad = |description: &str| {
            Reply::json(
                400,
                &json!({"error": "invalid_request", "error_description": description}),
            )
        };
        if !metadata {
            return bad("Required metadata header not specified");
        }
        if !query.contains_key("api-version") {
            return bad("Required query variable 'api-version' is missing");
        }
        let Some(resource) = query.get("resource") else {
            return bad("Required query variable 'resource' is missing");
        };
        let wanted = query
            .get("client_id")
            .or_else(|| query.get("clientid"))
            .cloned();
        let client_id = match (wanted, self.spec.managed_identities.as_slice()) {
            (Some(id), mis) if mis.iter().any(|m| m.client_id.eq_ignore_ascii_case(&id)) => id,
            (None, [only]) => only.client_id.clone(),
            (Some(_), _) | (None, []) => return bad("Identity not found"),
            (None, _) => {
                return bad(
                    "Multiple user assigned identities exist, please specify the clientId / \
                     resourceId of the identity in the token request",
                );
            }
        };
        let principal = self.principal(&client_id).expect("a managed identity");
        let (token, expires, lifetime) = self.issue(principal.clone(), resource);
        Reply::json(
            200,
            &json!({"access_token": token, "client_id": principal.client_id,
                "expires_in": lifetime.to_string(), "expires_on": expires.to_string(),
                "ext_expires_in": lifetime.to_string(), "not_before": now().to_string(),
                "resource": resource, "token_type": "Bearer"}),
        )
    }

    /// `POST /{tenant}/oauth2/v2.0/token` with a form body.
    #[expect(
        clippy::too_many_lines,
        reason = "one check per AAD error, in AAD's order, reads best as one list"
    )]
    pub fn aad_token(&mut self, tenant: &str, body: &str) -> Reply {
        let f = form(body);
        let fail = |status: u16, error: &str, code: u32, description: String| {
            Reply::json(
                status,
                &json!({"error": error, "error_description": description, "error_codes": [code],
                    "timestamp": super::lro::rfc3339(now()), "trace_id": derived_object_id(body),
                    "correlation_id": derived_object_id(tenant),
                    "error_uri": format!("https://login.microsoftonline.com/error?code={code}")}),
            )
        };
        if !tenant.eq_ignore_ascii_case(&self.spec.tenant_id) {
            return fail(
                400,
                "invalid_request",
                90002,
                format!(
                    "AADSTS90002: Tenant '{tenant}' not found. Check to make sure you have the correct \
                 tenant ID and are signing into the correct cloud."
                ),
            );
        }
        let grant = f.get("grant_type").map_or("", String::as_str);
        if grant != "client_credentials" {
            return fail(
                400,
                "unsupported_grant_type",
                70003,
                format!("AADSTS70003: The app requested an unsupported grant type '{grant}'."),
            );
        }
        let Some(client_id) = f.get("client_id") else {
            return fail(
                400,
                "invalid_request",
                900_144,
                "AADSTS900144: The request body must \
                contain the following parameter: 'client_id'."
                    .to_owned(),
            );
        };
        let Some(scope) = f.get("scope") else {
            return fail(
                400,
                "invalid_request",
                90014,
                "AADSTS90014: The required field 'scope' \
                is missing from the credential."
                    .to_owned(),
            );
        };
        let Some(sp) = self
            .spec
            .service_principals
            .iter()
            .find(|s| s.client_id.eq_ignore_ascii_case(client_id))
            .cloned()
        else {
            return fail(
                400,
                "unauthorized_client",
                700_016,
                format!(
                    "AADSTS700016: Application with identifier '{client_id}' was not found in the \
                 directory '{tenant}'."
                ),
            );
        };
        let ok = match (f.get("client_secret"), f.get("client_assertion")) {
            (Some(secret), _) => {
                if sp.client_secret.as_deref() != Some(secret.as_str()) {
                    return fail(
                        401,
                        "invalid_client",
                        7_000_215,
                        format!(
                            "AADSTS7000215: Invalid client secret provided. Ensure the secret being \
                         sent in the request is the client secret value, not the client secret \
                         ID, for a secret added to app '{}'.",
                            sp.client_id
                        ),
                    );
                }
                true
            }
            (None, Some(assertion)) => {
                let kind = f.get("client_assertion_type").map_or("", String::as_str);
                if kind != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
                    return fail(
                        400,
                        "invalid_request",
                        50027,
                        format!("AADSTS50027: Invalid client_assertion_type '{kind}'."),
                    );
                }
                if sp.federated_token.as_deref() != Some(assertion.as_str()) {
                    return fail(
                        401,
                        "invalid_client",
                        70021,
                        "AADSTS70021: No matching \
                        federated identity record found for presented assertion."
                            .to_owned(),
                    );
                }
                true
            }
            (None, None) => false,
        };
        if !ok {
            return fail(
                401,
                "invalid_client",
                7_000_218,
                "AADSTS7000218: The request body must \
                contain the following parameter: 'client_assertion' or 'client_secret'."
                    .to_owned(),
            );
        }
        let audience = scope
            .split(' ')
            .next()
            .unwrap_or("")
            .strip_suffix("/.default")
            .unwrap_or(scope)
            .to_owned();
        let principal = self.principal(&sp.client_id).expect("a service principal");
        let (token, _, lifetime) = self.issue(principal, &audience);
        Reply::json(
            200,
            &json!({"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime,
                "access_token": token}),
        )
    }
}

/// `GET /metadata/instance[/...]`: the compute document or one of its leaves.
#[must_use]
pub fn imds_instance(
    metadata: bool,
    query: &HashMap<String, String>,
    path: &str,
    compute: &Value,
) -> Reply {
    if !metadata {
        return Reply::json(
            400,
            &json!({"error": "Bad request. Required metadata header not specified"}),
        );
    }
    if !query.contains_key("api-version") {
        return Reply::json(
            400,
            &json!({"error": "Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds",
                "newest-versions": ["2023-07-01", "2021-12-13", "2021-11-15"]}),
        );
    }
    let doc = json!({"compute": compute, "network": {"interface": []}});
    let mut node = &doc;
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        let Some(next) = node
            .as_object()
            .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(seg)))
        else {
            return Reply::json(404, &json!({"error": "Not found"}));
        };
        node = next.1;
    }
    let text = query.get("format").is_some_and(|f| f == "text");
    match (node, text) {
        (Value::String(s), true) => Reply::text(200, s),
        (Value::Object(_) | Value::Array(_), true) => Reply::json(
            400,
            &json!({"error": "Bad request. format=text is only supported for leaf nodes"}),
        ),
        (other, _) => Reply::json(200, other),
    }
}

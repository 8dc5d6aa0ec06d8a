//! Who is calling: the SigV4 `Authorization` header
//! (`AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request,
//! SignedHeaders=…, Signature=…`) parsed and its scope checked (the scenario's region, service
//! `ec2`, an accepted access key), and the IAM policy documents the scenario enforces
//! (`Statement[].{Effect, Action, NotAction}`, `*`/`?` wildcards, case-insensitive, an explicit
//! Deny wins, nothing allowed by default). The HMAC itself is verified in [`super::sigv4`],
//! only for keys whose secret the emulator knows. Knows nothing of HTTP or the model.

use serde_json::Value;

use super::{error::Ec2Error, query::wildcard};

/// A parsed `Authorization` header's credential scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    /// The access key id.
    pub access_key: String,
    /// `YYYYMMDD`.
    pub date: String,
    /// The region signed for.
    pub region: String,
    /// The service signed for.
    pub service: String,
    /// `SignedHeaders`, lowercase.
    pub signed_headers: Vec<String>,
    /// `Signature` (hex).
    pub signature: String,
}

/// Parse an `Authorization` header.
///
/// # Errors
/// `MissingAuthenticationToken` when absent, `IncompleteSignature` when not SigV4-shaped.
pub fn parse(header: Option<&str>) -> Result<Credential, Ec2Error> {
    let header = header.ok_or_else(Ec2Error::missing_authentication)?;
    let incomplete = || {
        Ec2Error::new(
            400,
            "IncompleteSignature",
            format!(
                "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters. Authorization={header}"
            ),
        )
    };
    let rest = header
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(incomplete)?;
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=').ok_or_else(incomplete)?;
        match k {
            "Credential" => credential = Some(v),
            "SignedHeaders" => signed = Some(v),
            "Signature" => signature = Some(v),
            _ => {}
        }
    }
    let (Some(credential), Some(signed), Some(signature)) = (credential, signed, signature) else {
        return Err(incomplete());
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [key, date, region, service, "aws4_request"] = scope[..] else {
        return Err(incomplete());
    };
    Ok(Credential {
        access_key: key.to_owned(),
        date: date.to_owned(),
        region: region.to_owned(),
        service: service.to_owned(),
        signed_headers: signed.split(';').map(str::to_ascii_lowercase).collect(),
        signature: signature.to_owned(),
    })
}

impl Credential {
    /// Check the scope: `region`, service `ec2`, and a key `accepted` accepts.
    ///
    /// # Errors
    /// `AuthFailure` naming what is wrong.
    pub fn check(&self, region: &str, accepted: impl Fn(&str) -> bool) -> Result<(), Ec2Error> {
        if self.service != "ec2" {
            return Err(Ec2Error::auth_failure(format!(
                "Credential should be scoped to correct service: 'ec2', not '{}'.",
                self.service
            )));
        }
        if self.region != region {
            return Err(Ec2Error::auth_failure(format!(
                "Credential should be scoped to a valid region, not '{}'.",
                self.region
            )));
        }
        if !accepted(&self.access_key) {
            return Err(Ec2Error::auth_failure(
                "AWS was not able to validate the provided access credentials",
            ));
        }
        Ok(())
    }
}

/// Whether every policy document allows `action` (`ec2:<Action>`). No documents: allowed.
#[must_use]
pub fn allowed(policies: &[Value], action: &str) -> bool {
    policies.iter().all(|doc| document_allows(doc, action))
}

fn as_list(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Null => Vec::new(),
        v => vec![v],
    }
}

fn matches_any(patterns: &Value, action: &str) -> bool {
    let action = action.to_ascii_lowercase();
    as_list(patterns)
        .into_iter()
        .filter_map(Value::as_str)
        .any(|p| wildcard(&p.to_ascii_lowercase(), &action))
}

fn document_allows(doc: &Value, action: &str) -> bool {
    let mut allow = false;
    for statement in as_list(&doc["Statement"]) {
        let hit = if statement.get("NotAction").is_some() {
            !matches_any(&statement["NotAction"], action)
        } else {
            matches_any(&statement["Action"], action)
        };
        if !hit {
            continue;
        }
        match statement["Effect"].as_str() {
            Some("Deny") => return false,
            Some("Allow") => allow = true,
            _ => {}
        }
    }
    allow
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sigv4_headers_parse_and_scopes_are_checked() {
        let c = parse(Some(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261203/us-east-1/ec2/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=abcd",
        ))
        .expect("parses");
        assert_eq!(
            (c.access_key.as_str(), c.region.as_str()),
            ("AKIDEXAMPLE", "us-east-1")
        );
        assert!(c.check("us-east-1", |_| true).is_ok());
        assert_eq!(
            c.check("eu-west-1", |_| true).expect_err("region").code,
            "AuthFailure"
        );
        assert_eq!(parse(None).expect_err("missing").status, 401);
        assert_eq!(
            parse(Some("Bearer x")).expect_err("shape").code,
            "IncompleteSignature"
        );
    }

    #[test]
    fn policies_allow_with_wildcards_and_deny_wins() {
        let p = json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["ec2:Describe*", "ec2:CreateNetworkInterface"], "Resource": "*"},
            {"Effect": "Deny", "Action": "ec2:DescribeTags", "Resource": "*"}]});
        let ps = [p];
        assert!(allowed(&ps, "ec2:DescribeSubnets"));
        assert!(allowed(&ps, "ec2:createnetworkinterface"));
        assert!(!allowed(&ps, "ec2:DescribeTags"));
        assert!(!allowed(&ps, "ec2:DeleteNetworkInterface"));
        assert!(allowed(&[], "ec2:Anything"));
        let single = [json!({"Statement": {"Effect": "Allow", "Action": "ec2:*"}})];
        assert!(allowed(&single, "ec2:AttachNetworkInterface"));
    }
}

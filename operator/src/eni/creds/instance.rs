//! The instance role through IMDS: the role's name from
//! `/latest/meta-data/iam/security-credentials/` (the first line), then its credentials
//! document from `…/security-credentials/<role>` (`Code` must be `Success` when present).

use super::{Credentials, CredentialsError, SourceKind, credential_document};
use weft_aws_imds::Imds;

const PATH: &str = "/latest/meta-data/iam/security-credentials/";

#[derive(serde::Deserialize)]
struct Status {
    #[serde(rename = "Code")]
    code: Option<String>,
}

pub(super) async fn fetch(imds: &Imds) -> Result<Credentials, CredentialsError> {
    let imds_err = |source| CredentialsError::Imds {
        source: Box::new(source),
    };
    let invalid = |path: &str, what: String| CredentialsError::Invalid {
        kind: SourceKind::InstanceRole,
        endpoint: format!("{}{path}", imds.base_url()),
        what,
    };
    let roles = imds.get(PATH).await.map_err(imds_err)?;
    let role = roles
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or_else(|| invalid(PATH, "no IAM role is attached to the instance".to_owned()))?
        .to_owned();
    let path = format!("{PATH}{role}");
    let body = imds.get(&path).await.map_err(imds_err)?;
    if let Ok(Status { code: Some(code) }) = serde_json::from_str::<Status>(&body)
        && code != "Success"
    {
        return Err(invalid(&path, format!("Code is {code:?}")));
    }
    credential_document(body.as_bytes()).map_err(|what| invalid(&path, what))
}

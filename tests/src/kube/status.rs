//! The errors the emulated API server answers with, and their wire form: a `metav1.Status`
//! object with the `code`, `reason`, `message` and `details` the real kube-apiserver puts there
//! (`k8s.io/apimachinery/pkg/api/errors`). Handlers return [`ApiError`]; the server turns it into
//! a response. Nothing here knows about the store or HTTP routing.

use serde_json::{Value, json};

/// Why a request failed, as the API server says it (each variant is one `StatusReason`).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 404 NotFound: no such object (or no such path).
    #[error("{}", not_found_message(.resource, .name))]
    NotFound {
        /// `plural` or `plural.group`, or empty for an unknown path.
        resource: String,
        /// The object's name (empty for an unknown path).
        name: String,
    },
    /// 409 AlreadyExists: a create for a name that is taken.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// `plural` or `plural.group`.
        resource: String,
        /// The object's name.
        name: String,
    },
    /// 409 Conflict: a stale `resourceVersion` (or an injected conflict).
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    Conflict {
        /// `plural` or `plural.group`.
        resource: String,
        /// The object's name.
        name: String,
        /// The reason, e.g. "the object has been modified; …".
        detail: String,
    },
    /// 422 Invalid: the object or the patch result is not acceptable.
    #[error("{resource} \"{name}\" is invalid: {detail}")]
    Invalid {
        /// `plural` or `plural.group`.
        resource: String,
        /// The object's name.
        name: String,
        /// Which field and why.
        detail: String,
    },
    /// 400 BadRequest: the request itself is malformed (body, selector, query).
    #[error("{message}")]
    BadRequest {
        /// What is wrong.
        message: String,
    },
    /// 410 Expired (Gone): a watch or continue token older than the retained history.
    #[error("{message}")]
    Expired {
        /// e.g. "too old resource version: 5 (10)".
        message: String,
    },
    /// 405 MethodNotAllowed: the verb is not served on this path.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotSupported,
    /// 415 UnsupportedMediaType: a patch type the emulator does not implement.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json (got {content_type:?})"
    )]
    UnsupportedMediaType {
        /// The `Content-Type` sent.
        content_type: String,
    },
    /// 401 Unauthorized: missing or wrong bearer token.
    #[error("Unauthorized")]
    Unauthorized,
    /// 403 Forbidden: an injected RBAC denial (the emulator has no RBAC of its own).
    #[error("{message}")]
    Forbidden {
        /// kube-apiserver's text, naming the user, verb and resource.
        message: String,
    },
    /// 500 InternalError: an injected fault.
    #[error("an error on the server (\"{detail}\") has prevented the request from succeeding")]
    Internal {
        /// What failed.
        detail: String,
    },
    /// 504 Timeout: a `resourceVersion` newer than the store has.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The version asked for.
        requested: u64,
        /// The store's newest version.
        current: u64,
    },
}

fn not_found_message(resource: &str, name: &str) -> String {
    if name.is_empty() {
        "the server could not find the requested resource".to_owned()
    } else {
        format!("{resource} \"{name}\" not found")
    }
}

impl ApiError {
    /// The HTTP status code.
    #[must_use]
    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound { .. } => 404,
            Self::AlreadyExists { .. } | Self::Conflict { .. } => 409,
            Self::Invalid { .. } => 422,
            Self::BadRequest { .. } => 400,
            Self::Expired { .. } => 410,
            Self::MethodNotSupported => 405,
            Self::UnsupportedMediaType { .. } => 415,
            Self::Unauthorized => 401,
            Self::Forbidden { .. } => 403,
            Self::Internal { .. } => 500,
            Self::TooLargeResourceVersion { .. } => 504,
        }
    }

    /// The `StatusReason`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } => "Conflict",
            Self::Invalid { .. } => "Invalid",
            Self::BadRequest { .. } => "BadRequest",
            Self::Expired { .. } => "Expired",
            Self::MethodNotSupported => "MethodNotAllowed",
            Self::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden { .. } => "Forbidden",
            Self::Internal { .. } => "InternalError",
            Self::TooLargeResourceVersion { .. } => "Timeout",
        }
    }

    /// The `metav1.Status` object sent as the response body (or inside a watch ERROR event).
    #[must_use]
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            Self::NotFound { resource, name }
            | Self::AlreadyExists { resource, name }
            | Self::Conflict { resource, name, .. }
            | Self::Invalid { resource, name, .. }
                if !name.is_empty() =>
            {
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                Some(json!({"name": name, "group": group, "kind": kind}))
            }
            Self::Internal { detail } => Some(json!({"causes": [{"message": detail}]})),
            Self::TooLargeResourceVersion { .. } => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
            _ => None,
        };
        if let Some(details) = details {
            status["details"] = details;
        }
        status
    }
}

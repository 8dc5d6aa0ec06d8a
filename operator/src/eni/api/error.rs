//! [`Ec2Error`]: what an EC2 call's failure says — the HTTP status, AWS's `Code`, `Message`
//! and request ID kept whole (several decisions match message substrings, §9), or the
//! transport, signing, credential or decoding failure — and the predicates the callers
//! decide on (throttled, retriable, prefix capacity, device-index conflict, ...).

use http::StatusCode;

use super::{TransportError, sign::SignError};
use crate::eni::creds::CredentialsError;

/// AWS error codes that mean "slow down" (the SDKs' standard retryer's throttle set).
pub const THROTTLE_CODES: [&str; 10] = [
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "EC2ThrottledException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "TooManyRequestsException",
];

/// AWS error codes of a request that timed out on the server side (retried).
pub const TIMEOUT_CODES: [&str; 2] = ["RequestTimeout", "RequestTimeoutException"];

/// HTTP statuses retried whatever the body says.
pub const RETRIABLE_STATUSES: [u16; 4] = [500, 502, 503, 504];

/// An EC2 (or STS) call that failed.
#[derive(Debug, thiserror::Error)]
pub enum Ec2Error {
    /// AWS answered with an error document (`<Response><Errors><Error>…`).
    #[error("{action}: HTTP {status}: {code}: {message} (request {request_id})")]
    Api {
        /// The action, e.g. `AssignPrivateIpAddresses`.
        action: &'static str,
        /// HTTP status.
        status: u16,
        /// AWS's `Code`.
        code: String,
        /// AWS's `Message`, whole.
        message: String,
        /// AWS's `RequestID` (empty if none).
        request_id: String,
    },
    /// An error status whose body is not an AWS error document (an HTML 500, a proxy).
    #[error("{action}: HTTP {status} without an AWS error document: {body}")]
    Http {
        /// The action.
        action: &'static str,
        /// HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// No response (connection, timeout, body too large) after the retries.
    #[error("{action}: request failed")]
    Transport {
        /// The action.
        action: &'static str,
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// No credentials to sign with.
    #[error("{action}: no AWS credentials")]
    Credentials {
        /// The action.
        action: &'static str,
        /// Why.
        #[source]
        source: Box<CredentialsError>,
    },
    /// The request could not be signed.
    #[error("{action}: signing the request failed")]
    Sign {
        /// The action.
        action: &'static str,
        /// Why.
        #[source]
        source: Box<SignError>,
    },
    /// A success answer that is not well-formed XML (truncated, garbage).
    #[error("{action}: the answer is not well-formed XML")]
    Xml {
        /// The action.
        action: &'static str,
        /// Why.
        #[source]
        source: roxmltree::Error,
    },
    /// A success answer without an element the client needs, or with an unusable value.
    #[error("{action}: the answer has no usable {what}")]
    Missing {
        /// The action.
        action: &'static str,
        /// The element's path, e.g. `networkInterfaceSet/item/networkInterfaceId`.
        what: String,
    },
}

impl Ec2Error {
    /// The action that failed.
    #[must_use]
    pub fn action(&self) -> &'static str {
        match self {
            Self::Api { action, .. }
            | Self::Http { action, .. }
            | Self::Transport { action, .. }
            | Self::Credentials { action, .. }
            | Self::Sign { action, .. }
            | Self::Xml { action, .. }
            | Self::Missing { action, .. } => action,
        }
    }

    /// The HTTP status of an error answer.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } | Self::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// AWS's error `Code`.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// AWS's error `Message`.
    #[must_use]
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Api { message, .. } => Some(message),
            _ => None,
        }
    }

    /// The metric's `response_code` of this failure: the HTTP status line (`400 Bad
    /// Request`) for an error answer, else `Failed` (Cilium's `deriveStatus`).
    #[must_use]
    pub fn response_code(&self) -> String {
        match self.status().and_then(|s| StatusCode::from_u16(s).ok()) {
            Some(status) => status_line(status),
            None => "Failed".to_owned(),
        }
    }

    fn code_is(&self, codes: &[&str]) -> bool {
        self.code().is_some_and(|c| codes.contains(&c))
    }

    fn message_has(&self, needle: &str) -> bool {
        self.message().is_some_and(|m| m.contains(needle))
    }

    /// A throttling answer ([`THROTTLE_CODES`]).
    #[must_use]
    pub fn is_throttle(&self) -> bool {
        self.code_is(&THROTTLE_CODES)
    }

    /// Whether sending again may succeed: throttling, a server-side timeout, 500/502/503/504,
    /// or a connection failure.
    #[must_use]
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Transport { source, .. } => source.is_retriable(),
            _ => {
                self.is_throttle()
                    || self.code_is(&TIMEOUT_CODES)
                    || self
                        .status()
                        .is_some_and(|s| RETRIABLE_STATUSES.contains(&s))
            }
        }
    }

    /// The subnet has no room for a /28 (§9: `InsufficientCidrBlocks`, or
    /// `InvalidParameterValue` + "There aren't sufficient free Ipv4 addresses or prefixes").
    #[must_use]
    pub fn is_prefix_capacity(&self) -> bool {
        self.code_is(&["InsufficientCidrBlocks"])
            || (self.code_is(&["InvalidParameterValue"])
                && self.message_has("There aren't sufficient free Ipv4 addresses or prefixes"))
    }

    /// The device index is taken (`InvalidParameterValue` + "interface attached at device").
    #[must_use]
    pub fn is_index_conflict(&self) -> bool {
        self.code_is(&["InvalidParameterValue"]) && self.message_has("interface attached at device")
    }

    /// The instance is not running (the message contains `is not 'running'`).
    #[must_use]
    pub fn is_not_running(&self) -> bool {
        self.message_has("is not 'running'")
    }

    /// An unpaginated listing was refused as too large (`OperationNotPermitted`).
    #[must_use]
    pub fn is_operation_not_permitted(&self) -> bool {
        self.code_is(&["OperationNotPermitted"])
    }

    /// The credentials may not call this action (`UnauthorizedOperation`).
    #[must_use]
    pub fn is_unauthorized(&self) -> bool {
        self.code_is(&["UnauthorizedOperation"])
    }

    /// The resource does not exist (a code ending in `.NotFound`, e.g.
    /// `InvalidNetworkInterfaceID.NotFound`).
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.code().is_some_and(|c| c.ends_with(".NotFound"))
    }

    /// A 5xx answer whose body is not an AWS error document (an endpoint that does not
    /// implement the action, e.g. moto's HTML 500).
    #[must_use]
    pub fn is_unimplemented(&self) -> bool {
        matches!(self, Self::Http { status, .. } if *status >= 500)
    }
}

/// `400 Bad Request` (Go's `Response.Status`).
#[must_use]
pub fn status_line(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str, message: &str) -> Ec2Error {
        Ec2Error::Api {
            action: "AssignPrivateIpAddresses",
            status,
            code: code.into(),
            message: message.into(),
            request_id: "r-1".into(),
        }
    }

    #[test]
    fn predicates() {
        let pd_msg = "There aren't sufficient free Ipv4 addresses or prefixes in the subnet";
        let idx_msg = "Instance 'i-1' already has an interface attached at device index '1'.";
        let cases: [(Ec2Error, [bool; 7]); 10] = [
            // throttle, retriable, prefix, index, not running, not permitted, unauthorized
            (
                api(503, "RequestLimitExceeded", "slow"),
                [true, true, false, false, false, false, false],
            ),
            (
                api(400, "Throttling", "x"),
                [true, true, false, false, false, false, false],
            ),
            (
                api(400, "RequestTimeout", "x"),
                [false, true, false, false, false, false, false],
            ),
            (
                api(500, "InternalError", "x"),
                [false, true, false, false, false, false, false],
            ),
            (
                api(400, "InsufficientCidrBlocks", "x"),
                [false, false, true, false, false, false, false],
            ),
            (
                api(400, "InvalidParameterValue", pd_msg),
                [false, false, true, false, false, false, false],
            ),
            (
                api(400, "InvalidParameterValue", idx_msg),
                [false, false, false, true, false, false, false],
            ),
            (
                api(
                    400,
                    "IncorrectInstanceState",
                    "The instance 'i-1' is not 'running'.",
                ),
                [false, false, false, false, true, false, false],
            ),
            (
                api(400, "OperationNotPermitted", "too many"),
                [false, false, false, false, false, true, false],
            ),
            (
                api(403, "UnauthorizedOperation", "no"),
                [false, false, false, false, false, false, true],
            ),
        ];
        for (err, want) in cases {
            let got = [
                err.is_throttle(),
                err.is_retriable(),
                err.is_prefix_capacity(),
                err.is_index_conflict(),
                err.is_not_running(),
                err.is_operation_not_permitted(),
                err.is_unauthorized(),
            ];
            assert_eq!(got, want, "{err}");
        }
        let html = Ec2Error::Http {
            action: "GetSecurityGroupsForVpc",
            status: 500,
            body: "<html>".into(),
        };
        assert!(html.is_retriable() && html.is_unimplemented());
        assert!(!api(500, "InternalError", "x").is_unimplemented());
        assert!(api(400, "InvalidNetworkInterfaceID.NotFound", "x").is_not_found());
        assert!(!api(400, "InvalidParameterValue", "x").is_not_found());
        let missing = Ec2Error::Missing {
            action: "DescribeVpcs",
            what: "vpcSet/item/vpcId".into(),
        };
        assert!(!missing.is_retriable());
        assert_eq!(missing.response_code(), "Failed");
        assert_eq!(api(400, "X", "y").response_code(), "400 Bad Request");
        assert_eq!(html.response_code(), "500 Internal Server Error");
        assert_eq!(
            api(400, "InvalidParameterValue", idx_msg).to_string(),
            format!(
                "AssignPrivateIpAddresses: HTTP 400: InvalidParameterValue: {idx_msg} (request r-1)"
            )
        );
    }
}

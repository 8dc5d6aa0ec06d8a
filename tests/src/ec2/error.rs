//! EC2's error answers: an HTTP status and the Query protocol's error body
//! `<Response><Errors><Error><Code>…</Code><Message>…</Message></Error></Errors><RequestID>…</RequestID></Response>`.
//! One constructor per error the emulator gives, with EC2's code and message form (the clients
//! match several messages by substring, so the words that matter are EC2's). Nothing here
//! routes or touches the model.

use super::xml::escape;

/// An EC2 error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ec2Error {
    /// HTTP status.
    pub status: u16,
    /// `Error/Code`.
    pub code: String,
    /// `Error/Message`.
    pub message: String,
}

impl Ec2Error {
    /// Any error.
    #[must_use]
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// A 400 with `code`.
    #[must_use]
    pub fn client(code: &str, message: impl Into<String>) -> Self {
        Self::new(400, code, message)
    }

    /// The XML body for request `request_id`.
    #[must_use]
    pub fn body(&self, request_id: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
            escape(&self.code),
            escape(&self.message),
            escape(request_id)
        )
    }

    /// 400 `InvalidParameterValue`.
    #[must_use]
    pub fn invalid_value(message: impl Into<String>) -> Self {
        Self::client("InvalidParameterValue", message)
    }

    /// 400 `MissingParameter` for `name`.
    #[must_use]
    pub fn missing(name: &str) -> Self {
        Self::client(
            "MissingParameter",
            format!("The request must contain the parameter {name}"),
        )
    }

    /// 400 `InvalidParameterValue` for a value that does not parse.
    #[must_use]
    pub fn bad_value(name: &str, value: &str) -> Self {
        Self::invalid_value(format!("Value ({value}) for parameter {name} is invalid."))
    }

    /// 400 `InvalidParameterCombination`.
    #[must_use]
    pub fn combination(message: impl Into<String>) -> Self {
        Self::client("InvalidParameterCombination", message)
    }

    /// 400 `<Kind>.NotFound` (`InvalidNetworkInterfaceID`, `InvalidSubnetID`, …).
    #[must_use]
    pub fn not_found(kind: &str, what: &str, id: &str) -> Self {
        Self::client(
            &format!("{kind}.NotFound"),
            format!("The {what} ID '{id}' does not exist"),
        )
    }

    /// 400 `InvalidNetworkInterfaceID.NotFound`.
    #[must_use]
    pub fn eni_not_found(id: &str) -> Self {
        Self::not_found("InvalidNetworkInterfaceID", "networkInterface", id)
    }

    /// 400 `InvalidInstanceID.NotFound`.
    #[must_use]
    pub fn instance_not_found(id: &str) -> Self {
        Self::not_found("InvalidInstanceID", "instance", id)
    }

    /// 400 `InvalidSubnetID.NotFound`.
    #[must_use]
    pub fn subnet_not_found(id: &str) -> Self {
        Self::not_found("InvalidSubnetID", "subnet", id)
    }

    /// 400 `InvalidGroup.NotFound`.
    #[must_use]
    pub fn group_not_found(id: &str) -> Self {
        Self::client(
            "InvalidGroup.NotFound",
            format!("The security group '{id}' does not exist"),
        )
    }

    /// 400 `InvalidVpcID.NotFound`.
    #[must_use]
    pub fn vpc_not_found(id: &str) -> Self {
        Self::not_found("InvalidVpcID", "vpc", id)
    }

    /// 400 `InvalidAction`: an action EC2 (or this emulator) does not have.
    #[must_use]
    pub fn invalid_action(action: &str) -> Self {
        Self::client(
            "InvalidAction",
            format!("The action {action} is not valid for this web service."),
        )
    }

    /// 400 `InvalidParameterValue` for an unknown filter name.
    #[must_use]
    pub fn unknown_filter(name: &str) -> Self {
        Self::invalid_value(format!("The filter '{name}' is invalid"))
    }

    /// 400 `InvalidNextToken`.
    #[must_use]
    pub fn bad_next_token(token: &str) -> Self {
        Self::client(
            "InvalidNextToken",
            format!("The specified token '{token}' is invalid"),
        )
    }

    /// 400 `InsufficientFreeAddressesInSubnet`.
    #[must_use]
    pub fn subnet_full(subnet: &str) -> Self {
        Self::client(
            "InsufficientFreeAddressesInSubnet",
            format!(
                "The specified subnet {subnet} does not have enough free addresses to satisfy the request."
            ),
        )
    }

    /// 400 `InsufficientCidrBlocks` (CreateNetworkInterface with `Ipv4PrefixCount`).
    #[must_use]
    pub fn no_cidr_blocks(subnet: &str) -> Self {
        Self::client(
            "InsufficientCidrBlocks",
            format!(
                "There are not enough free cidr blocks in the specified subnet {subnet} to satisfy the request."
            ),
        )
    }

    /// 400 `InvalidParameterValue` "There aren't sufficient free Ipv4 addresses or prefixes"
    /// (AssignPrivateIpAddresses with `Ipv4PrefixCount`).
    #[must_use]
    pub fn no_free_prefixes() -> Self {
        Self::invalid_value("There aren't sufficient free Ipv4 addresses or prefixes")
    }

    /// 400 `PrivateIpAddressLimitExceeded`.
    #[must_use]
    pub fn ip_limit(eni: &str, limit: u32) -> Self {
        Self::client(
            "PrivateIpAddressLimitExceeded",
            format!(
                "Number of private addresses will exceed limit for network interface {eni} (limit {limit}, primary address and prefixes included)."
            ),
        )
    }

    /// 400 `AttachmentLimitExceeded`.
    #[must_use]
    pub fn attachment_limit(count: u32, instance_type: &str) -> Self {
        Self::client(
            "AttachmentLimitExceeded",
            format!("Interface count {count} exceeds the limit for {instance_type}"),
        )
    }

    /// 400 `InvalidParameterValue` "… already has an interface attached at device index …".
    #[must_use]
    pub fn index_taken(instance: &str, index: u32) -> Self {
        Self::invalid_value(format!(
            "Instance '{instance}' already has an interface attached at device index '{index}'."
        ))
    }

    /// 400 `IncorrectInstanceState` "… is not 'running'".
    #[must_use]
    pub fn not_running(instance: &str) -> Self {
        Self::client(
            "IncorrectInstanceState",
            format!("Instance '{instance}' is not 'running'."),
        )
    }

    /// 403 `UnauthorizedOperation` (the policy does not allow the action).
    #[must_use]
    pub fn unauthorized(account: &str, action: &str) -> Self {
        Self::new(
            403,
            "UnauthorizedOperation",
            format!(
                "You are not authorized to perform this operation. User: arn:aws:iam::{account}:user/weft is not authorized to perform: ec2:{action} because no identity-based policy allows the ec2:{action} action"
            ),
        )
    }

    /// 503 `RequestLimitExceeded`.
    #[must_use]
    pub fn throttled() -> Self {
        Self::new(503, "RequestLimitExceeded", "Request limit exceeded.")
    }

    /// 500 `InternalError`.
    #[must_use]
    pub fn internal() -> Self {
        Self::new(
            500,
            "InternalError",
            "An internal error has occurred (injected by the emulator).",
        )
    }

    /// 503 `Unavailable`.
    #[must_use]
    pub fn unavailable() -> Self {
        Self::new(
            503,
            "Unavailable",
            "The server is overloaded and can't handle the request (injected by the emulator).",
        )
    }

    /// 400 `OperationNotPermitted`: an unpaged listing larger than the scenario allows.
    #[must_use]
    pub fn too_large(action: &str, items: usize) -> Self {
        Self::client(
            "OperationNotPermitted",
            format!(
                "The {action} operation would return {items} items, more than allowed without pagination; specify MaxResults."
            ),
        )
    }

    /// 401 `AuthFailure`.
    #[must_use]
    pub fn auth_failure(message: impl Into<String>) -> Self {
        Self::new(401, "AuthFailure", message)
    }

    /// 401 `MissingAuthenticationToken`.
    #[must_use]
    pub fn missing_authentication() -> Self {
        Self::new(
            401,
            "MissingAuthenticationToken",
            "Request is missing Authentication Token",
        )
    }
}

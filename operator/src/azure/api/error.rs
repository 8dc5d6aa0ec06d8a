//! [`ArmError`]: what an ARM operation's failure says (operation, HTTP status, Azure's
//! `error.code`/`error.message`, the cause), and what callers ask of it (not found, the action
//! and scope of an `AuthorizationFailed`).

use std::{collections::BTreeMap, net::IpAddr, time::Duration};

use http::StatusCode;

use super::TransportError;
use crate::azure::{auth::AuthError, resource_id::ResourceIdError};

/// The principal and what it may not do, from an `AuthorizationFailed` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationFailure {
    /// The action refused, e.g. `Microsoft.Network/networkInterfaces/write`.
    pub action: String,
    /// The scope it was refused on.
    pub scope: String,
}

/// An ARM operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    /// ARM answered with an error status.
    #[error("{operation}: HTTP {status}: {code}: {message}")]
    Http {
        /// Cilium's operation name, e.g. `Interfaces.Get`.
        operation: &'static str,
        /// HTTP status.
        status: u16,
        /// Azure's `error.code` (empty if none).
        code: String,
        /// Azure's `error.message` (or the start of the body).
        message: String,
    },
    /// No response (connection, timeout) after the retries.
    #[error("{operation}: request failed")]
    Transport {
        /// Operation.
        operation: &'static str,
        /// Why.
        #[source]
        source: Box<TransportError>,
    },
    /// The answer does not have the expected shape.
    #[error("{operation}: decoding the answer failed at {path}")]
    Decode {
        /// Operation.
        operation: &'static str,
        /// JSON path of the failure.
        path: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// No token.
    #[error("{operation}: getting an Azure token failed")]
    Auth {
        /// Operation.
        operation: &'static str,
        /// Why.
        #[source]
        source: Box<AuthError>,
    },
    /// A long-running operation ended `Failed` or `Canceled`.
    #[error("{operation}: the long-running operation ended {status}: {code}: {message}")]
    LroFailed {
        /// Operation.
        operation: &'static str,
        /// `Failed` or `Canceled`.
        status: String,
        /// Azure's `error.code`.
        code: String,
        /// Azure's `error.message`.
        message: String,
    },
    /// A long-running operation did not end in time.
    #[error("{operation}: the long-running operation did not end within {after:?}")]
    LroTimeout {
        /// Operation.
        operation: &'static str,
        /// How long it was polled.
        after: Duration,
    },
    /// The VMSS instance has no NIC configuration of that name.
    #[error("interface {interface} does not exist in VM {vm}")]
    InterfaceNotFound {
        /// The interface name.
        interface: String,
        /// The VM (VMSS instance index or VM name).
        vm: String,
    },
    /// A per-instance call got an instance ID that is not a VMSS VM.
    #[error("instance {instance_id:?} is not a virtual machine scale set instance")]
    NotVmssInstance {
        /// The instance ID.
        instance_id: String,
    },
    /// A standalone-VM call got an instance ID that is not a VM.
    #[error("instance {instance_id:?} is not a virtual machine")]
    NotVirtualMachine {
        /// The instance ID.
        instance_id: String,
    },
    /// A resource ID that cannot be used.
    #[error("{operation}: bad resource ID")]
    ResourceId {
        /// Operation.
        operation: &'static str,
        /// Why.
        #[source]
        source: ResourceIdError,
    },
    /// An address to release is not on the interface (nothing was removed).
    #[error("address {address} is not on interface {interface}; nothing released")]
    AddressNotOnInterface {
        /// The interface.
        interface: String,
        /// The address.
        address: IpAddr,
    },
    /// An address to release is the interface's primary (nothing was removed).
    #[error("address {address} is the primary address of interface {interface}; nothing released")]
    PrimaryAddress {
        /// The interface.
        interface: String,
        /// The address.
        address: IpAddr,
    },
    /// No public IP prefix matches the tags.
    #[error("public IP prefix with tags {tags:?} not found in resource group {resource_group}")]
    PrefixNotFound {
        /// The tags searched for.
        tags: BTreeMap<String, String>,
        /// The resource group searched.
        resource_group: String,
    },
    /// A resource lacks a field the operation needs.
    #[error("{resource}: {field} is missing")]
    MissingField {
        /// The resource (ID or name).
        resource: String,
        /// What is missing.
        field: String,
    },
}

impl ArmError {
    /// The HTTP status of an error answer.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether ARM answered 404 (the resource is authoritatively gone).
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NOT_FOUND.as_u16())
    }

    /// Azure's `error.code`, if ARM sent one.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Http { code, .. } | Self::LroFailed { code, .. } if !code.is_empty() => {
                Some(code)
            }
            _ => None,
        }
    }

    /// The refused action and scope of an `AuthorizationFailed` answer.
    #[must_use]
    pub fn authorization_failed(&self) -> Option<AuthorizationFailure> {
        let Self::Http { code, message, .. } = self else {
            return None;
        };
        let quoted = |after: &str| {
            let start = message.find(after)? + after.len();
            let len = message[start..].find('\'')?;
            Some(message[start..start + len].to_owned())
        };
        match code.as_str() {
            "AuthorizationFailed" => Some(AuthorizationFailure {
                action: quoted("perform action '")?,
                scope: quoted("over scope '")?,
            }),
            // Allowed the write, refused a `join` on a resource the body references.
            "LinkedAuthorizationFailed" => Some(AuthorizationFailure {
                action: quoted("does not have permission to perform action '")?,
                scope: quoted("on the linked scope(s) '")?,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_failed_is_parsed() {
        let err = ArmError::Http {
            operation: "Interfaces.CreateOrUpdate",
            status: 403,
            code: "AuthorizationFailed".into(),
            message: "The client 'c' with object id 'o' does not have authorization to perform action \
                      'Microsoft.Network/networkInterfaces/write' over scope \
                      '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n' \
                      or the scope is invalid. If access was recently granted, please refresh your credentials."
                .into(),
        };
        assert_eq!(
            err.authorization_failed(),
            Some(AuthorizationFailure {
                action: "Microsoft.Network/networkInterfaces/write".into(),
                scope: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n"
                    .into(),
            })
        );
        assert_eq!(err.status(), Some(403));
        assert!(!err.is_not_found());
        let linked = ArmError::Http {
            operation: "VirtualMachineScaleSetVMs.Update",
            status: 403,
            code: "LinkedAuthorizationFailed".into(),
            message: "The client 'c' with object id 'o' has permission to perform action \
                      'Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write' on scope 'x'; \
                      however, it does not have permission to perform action \
                      'Microsoft.Network/virtualNetworks/subnets/join/action' on the linked \
                      scope(s) '/subscriptions/s/.../subnets/a' or the linked scope(s) are invalid."
                .into(),
        };
        assert_eq!(
            linked.authorization_failed(),
            Some(AuthorizationFailure {
                action: "Microsoft.Network/virtualNetworks/subnets/join/action".into(),
                scope: "/subscriptions/s/.../subnets/a".into(),
            })
        );
        assert_eq!(err.code(), Some("AuthorizationFailed"));
        let other = ArmError::Http {
            operation: "Interfaces.Get",
            status: 404,
            code: "NotFound".into(),
            message: "gone".into(),
        };
        assert!(other.is_not_found());
        assert_eq!(other.authorization_failed(), None);
        assert_eq!(
            other.to_string(),
            "Interfaces.Get: HTTP 404: NotFound: gone"
        );
    }
}

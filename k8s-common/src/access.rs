//! Why the API server turned a request away, in words that name the fix: a 401 says which
//! credential was rejected (the service-account token file, or the kubeconfig and its user) and
//! a 403 which verb on which resource the account lacks and the RBAC rule that grants it.
//! [`Credential`] is recorded by [`crate::client::connect`] for the process; [`Refusal`] is the
//! error both programs put in their own error chains. Pure but for that one record.

use std::{
    fmt,
    path::PathBuf,
    sync::{PoisonError, RwLock},
};

use http::{Method, Uri};

/// Where the client's credential comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// A kubeconfig file, and the user of its current context.
    Kubeconfig {
        /// The file (`--kubeconfig`, `KUBECONFIG` or `~/.kube/config`).
        path: PathBuf,
        /// The user the current context names.
        user: Option<String>,
    },
    /// The pod's service-account token (in-cluster).
    ServiceAccount {
        /// The token file.
        token_file: String,
    },
}

impl fmt::Display for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kubeconfig {
                path,
                user: Some(user),
            } => write!(f, "user {user:?} of kubeconfig {}", path.display()),
            Self::Kubeconfig { path, user: None } => write!(f, "kubeconfig {}", path.display()),
            Self::ServiceAccount { token_file } => {
                write!(f, "the service-account token {token_file}")
            }
        }
    }
}

impl Credential {
    /// What to do when the API server rejects it (401).
    #[must_use]
    pub fn fix(&self) -> &'static str {
        match self {
            Self::Kubeconfig { .. } => {
                "renew the user's token or certificate in that kubeconfig, or pass --kubeconfig \
                 with one that works (kubectl --kubeconfig FILE auth whoami tells)"
            }
            Self::ServiceAccount { .. } => {
                "check that the pod's ServiceAccount exists and its token is mounted and not \
                 expired (recreate the pod to get a fresh one)"
            }
        }
    }
}

static CREDENTIAL: RwLock<Option<Credential>> = RwLock::new(None);

/// Record the credential this process's client uses (called by [`crate::client::connect`]).
pub fn set_credential(credential: Credential) {
    *CREDENTIAL.write().unwrap_or_else(PoisonError::into_inner) = Some(credential);
}

/// The credential recorded by the last connect, if any.
#[must_use]
pub fn credential() -> Option<Credential> {
    CREDENTIAL
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// The API server turned a request away.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// 401: the credential is not accepted at all (no permission would help).
    #[error(
        "the API server rejected the credential ({credential}) with 401 Unauthorized: {fix}",
        credential = credential.as_ref().map_or_else(|| "kube's inferred configuration".to_owned(), ToString::to_string),
        fix = credential.as_ref().map_or("check KUBECONFIG or the pod's service-account token", Credential::fix)
    )]
    Unauthorized {
        /// Which credential, when known.
        credential: Option<Credential>,
    },
    /// 403: the account is known but may not do this.
    #[error(
        "the API server refused to {verb} {resource} (403 Forbidden){whom}: grant `{verb}` on \
         `{resource}` in API group {group:?} to its ServiceAccount (ClusterRole rule \
         apiGroups: [{group:?}], resources: [{resource:?}], verbs: [{verb:?}]){hint}",
        whom = credential.as_ref().map(|c| format!(" to {c}")).unwrap_or_default()
    )]
    Forbidden {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`.
        verb: String,
        /// The resource (`leases`, `ciliumnodes/status`, …).
        resource: String,
        /// Its API group (`""` for the core group).
        group: String,
        /// Which credential, when known.
        credential: Option<Credential>,
        /// Where the program's RBAC is (` (deploy/operator/rbac.yaml has …)`), or empty.
        hint: &'static str,
    },
}

impl Refusal {
    /// The refusal a 401 or 403 answer to `verb` on `resource` (in `group`) means, with the
    /// recorded credential; `None` for any other status.
    #[must_use]
    pub fn of_status(
        code: u16,
        verb: &str,
        resource: &str,
        group: &str,
        hint: &'static str,
    ) -> Option<Self> {
        match code {
            401 => Some(Self::Unauthorized {
                credential: credential(),
            }),
            403 => Some(Self::Forbidden {
                verb: verb.to_owned(),
                resource: resource.to_owned(),
                group: group.to_owned(),
                credential: credential(),
                hint,
            }),
            _ => None,
        }
    }
}

/// The API group of one of the resources weft talks to, by its plural (`ciliumnodes/status`
/// → `cilium.io`, `leases` → `coordination.k8s.io`, `nodes` → the core group `""`).
#[must_use]
pub fn group_of(resource: &str) -> &'static str {
    let plural = resource.split('/').next().unwrap_or(resource);
    match plural {
        p if p.starts_with("cilium") => "cilium.io",
        "leases" => "coordination.k8s.io",
        "customresourcedefinitions" => "apiextensions.k8s.io",
        _ => "",
    }
}

/// What a request asks for, read off its method and path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// The RBAC verb.
    pub verb: &'static str,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource, with its subresource (`ciliumnodes/status`).
    pub resource: String,
}

impl Target {
    /// The target of a request; `None` for paths that name no resource (`/version`, `/apis`).
    #[must_use]
    pub fn of(method: &Method, uri: &Uri) -> Option<Self> {
        let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let rest = match rest {
            ["namespaces", _, resource, tail @ ..] => {
                let mut r = vec![*resource];
                r.extend(tail);
                r
            }
            other => other.to_vec(),
        };
        let resource = match rest.as_slice() {
            [resource] | [resource, _] => (*resource).to_owned(),
            [resource, _, sub, ..] => format!("{resource}/{sub}"),
            [] => return None,
        };
        let (verb, _) = crate::instrument::classify(method, uri);
        Some(Self {
            verb,
            group: group.to_owned(),
            resource,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_group_resource_and_verb() {
        let of = |m: Method, u: &str| Target::of(&m, &u.parse().expect("uri"));
        assert_eq!(
            of(
                Method::GET,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x"
            ),
            Some(Target {
                verb: "get",
                group: "coordination.k8s.io".into(),
                resource: "leases".into()
            })
        );
        assert_eq!(
            of(Method::PUT, "/apis/cilium.io/v2/ciliumnodes/n/status"),
            Some(Target {
                verb: "update",
                group: "cilium.io".into(),
                resource: "ciliumnodes/status".into()
            })
        );
        assert_eq!(
            of(Method::GET, "/api/v1/nodes?watch=true"),
            Some(Target {
                verb: "watch",
                group: String::new(),
                resource: "nodes".into()
            })
        );
        assert_eq!(of(Method::GET, "/version"), None);
    }

    #[test]
    fn refusals_name_the_credential_and_the_fix() {
        let sa = Credential::ServiceAccount {
            token_file: "/var/run/secrets/kubernetes.io/serviceaccount/token".into(),
        };
        let e = Refusal::Unauthorized {
            credential: Some(sa.clone()),
        };
        assert!(
            e.to_string().starts_with(
                "the API server rejected the credential (the service-account token \
                 /var/run/secrets/kubernetes.io/serviceaccount/token) with 401 Unauthorized: check"
            ),
            "{e}"
        );
        let e = Refusal::Forbidden {
            verb: "list".into(),
            resource: "ciliumnodes".into(),
            group: "cilium.io".into(),
            credential: Some(sa),
            hint: "",
        };
        assert!(
            e.to_string().contains(
                "refused to list ciliumnodes (403 Forbidden) to the service-account token"
            ) && e.to_string().contains(
                "apiGroups: [\"cilium.io\"], resources: [\"ciliumnodes\"], verbs: [\"list\"]"
            ),
            "{e}"
        );
    }
}

//! Kubernetes label selectors, compiled and matched as `metav1.LabelSelectorAsSelector` does:
//! `matchLabels` AND `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`), keys and
//! values validated at compile time. Also the DNS-1123 subdomain check other rules reuse.
//! Pure functions over plain maps; what a missing (`None`) selector means is the caller's call.

use std::collections::{BTreeMap, BTreeSet};

use crate::crd::meta::LabelSelector;

const MAX_NAME_LEN: usize = 63;
const MAX_SUBDOMAIN_LEN: usize = 253;

/// Why a selector does not compile.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelsError {
    /// The operator is not `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[error("{operator:?} is not a valid label selector operator")]
    InvalidOperator {
        /// The operator as written.
        operator: String,
    },
    /// `In` / `NotIn` without values.
    #[error("key {key:?}: for 'in', 'notin' operators, values set can't be empty")]
    EmptyValues {
        /// Label key of the requirement.
        key: String,
    },
    /// `Exists` / `DoesNotExist` with values.
    #[error("key {key:?}: values set must be empty for exists and does not exist")]
    UnexpectedValues {
        /// Label key of the requirement.
        key: String,
    },
    /// The key is not a qualified name (`[prefix/]name`).
    #[error("invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// The key as written.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A value is not a valid label value.
    #[error("invalid label value {value:?} for key {key:?}: {reason}")]
    InvalidValue {
        /// Label key of the requirement.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    fn new(key: &str, operator: Operator, values: &[String]) -> Result<Self, LabelsError> {
        validate_key(key).map_err(|reason| LabelsError::InvalidKey {
            key: key.into(),
            reason,
        })?;
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err(LabelsError::EmptyValues { key: key.into() });
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err(LabelsError::UnexpectedValues { key: key.into() });
            }
            _ => {}
        }
        for value in values {
            validate_value(value).map_err(|reason| LabelsError::InvalidValue {
                key: key.into(),
                value: value.clone(),
                reason,
            })?;
        }
        Ok(Self {
            key: key.into(),
            operator,
            values: values.iter().cloned().collect(),
        })
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A compiled selector: every requirement must hold. Built by [`compile`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Whether `labels` satisfy every requirement (always true for an empty selector).
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirement, i.e. matches everything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Compiles `selector`; an empty one matches everything. Fails like Kubernetes'
/// `LabelSelectorAsSelector`: unknown operator, `In`/`NotIn` without values,
/// `Exists`/`DoesNotExist` with values, invalid keys or values.
///
/// # Errors
/// [`LabelsError`] naming the first offending requirement.
pub fn compile(selector: &LabelSelector) -> Result<Selector, LabelsError> {
    let mut requirements = Vec::new();
    for (key, value) in &selector.match_labels {
        requirements.push(Requirement::new(
            key,
            Operator::In,
            std::slice::from_ref(value),
        )?);
    }
    for expression in &selector.match_expressions {
        let operator = match expression.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                return Err(LabelsError::InvalidOperator {
                    operator: other.into(),
                });
            }
        };
        requirements.push(Requirement::new(
            &expression.key,
            operator,
            &expression.values,
        )?);
    }
    Ok(Selector { requirements })
}

/// Kubernetes `IsDNS1123Subdomain`: at most 253 characters of dot-separated lowercase
/// alphanumeric labels, each starting and ending with an alphanumeric (inner `-` allowed).
#[must_use]
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SUBDOMAIN_LEN
        && s.split('.').all(|label| {
            let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            let bytes = label.as_bytes();
            bytes.first().copied().is_some_and(edge)
                && bytes.last().copied().is_some_and(edge)
                && bytes.iter().all(|&c| edge(c) || c == b'-')
        })
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the shape of label names and values.
fn is_label_token(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Kubernetes `IsQualifiedName`, as label keys are checked.
fn validate_key(key: &str) -> Result<(), &'static str> {
    let name = match key.split('/').collect::<Vec<_>>().as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err("prefix part must be non-empty");
            }
            if !is_dns1123_subdomain(prefix) {
                return Err("prefix part must be a lowercase RFC 1123 subdomain");
            }
            *name
        }
        _ => return Err("a qualified name must have at most one '/'"),
    };
    if name.is_empty() {
        Err("name part must be non-empty")
    } else if name.len() > MAX_NAME_LEN {
        Err("name part must be no more than 63 characters")
    } else if !is_label_token(name) {
        Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', \
             and must start and end with an alphanumeric character",
        )
    } else {
        Ok(())
    }
}

/// Kubernetes `IsValidLabelValue`.
fn validate_value(value: &str) -> Result<(), &'static str> {
    if value.len() > MAX_NAME_LEN {
        Err("must be no more than 63 characters")
    } else if !value.is_empty() && !is_label_token(value) {
        Err(
            "a valid label must be an empty string or consist of alphanumeric characters, \
             '-', '_' or '.', and must start and end with an alphanumeric character",
        )
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests;

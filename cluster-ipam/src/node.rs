//! The one tolerant typed read of a CiliumNode, for every operator mode. A [`NodeRead`] takes
//! the object as the API server (or a store) sent it and decodes each part the caller asks for
//! into its `weft_k8s::crd` wire type (or any other serde type where the wire is stricter than
//! Cilium, such as a negative `pre-allocate`), part by part: a part of the wrong form is
//! reported as a [`FieldError`] naming its full path and reads as empty, and every other part
//! is kept. [`NodeView`] is what the block allocators need (cluster-pool, multi-pool); a cloud
//! mode reads its own parts (`spec.azure`, `spec.eni`, `status.ipam`, …) through
//! [`NodeRead::part`] the same way. Pure: it never writes and knows no client.

use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;
use weft_k8s::{
    crd::{
        ipam::{IpamPoolAllocation, IpamPoolRequest},
        meta::ObjectMeta,
        node::CiliumNode,
    },
    resource::{FieldError, decode},
};

use crate::multipool::{Allocated, Requested};

/// The annotation that makes the operator leave a CiliumNode alone (value compared
/// case-insensitively, as Cilium does).
pub const IGNORE_ANNOTATION: &str = "ipam.cilium.io/ignore";

/// A CiliumNode object being read part by part; collects the parts of the wrong form.
#[derive(Debug)]
pub struct NodeRead<'a> {
    doc: &'a Value,
    meta: ObjectMeta,
    errors: Vec<FieldError>,
}

impl<'a> NodeRead<'a> {
    /// Starts reading `doc`. `metadata` is read at once (a bad one is reported, and reads as
    /// empty).
    #[must_use]
    pub fn new(doc: &'a Value) -> Self {
        let mut read = Self {
            doc,
            meta: ObjectMeta::default(),
            errors: Vec::new(),
        };
        read.meta = read.part(&["metadata"]);
        read
    }

    /// `metadata.name` (empty when absent).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Whether the object is annotated `ipam.cilium.io/ignore: "true"` (any case).
    #[must_use]
    pub fn ignored(&self) -> bool {
        self.meta
            .annotations
            .get(IGNORE_ANNOTATION)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// The raw value at `path` (`Value::Null` when any step is absent).
    #[must_use]
    pub fn raw(&self, path: &[&str]) -> &'a Value {
        path.iter()
            .try_fold(self.doc, |v, key| v.get(key))
            .unwrap_or(&Value::Null)
    }

    /// The part at `path` as `T`; absent or `null` reads as `T::default()`, and so does a part
    /// of the wrong form, which is recorded with its full path.
    pub fn part<T: DeserializeOwned + Default>(&mut self, path: &[&str]) -> T {
        self.try_part(path).unwrap_or_default()
    }

    /// The part at `path` as `T` (`None`: absent, `null`, or of the wrong form, which is
    /// recorded with its full path).
    pub fn try_part<T: DeserializeOwned>(&mut self, path: &[&str]) -> Option<T> {
        let value = self.raw(path);
        if value.is_null() {
            return None;
        }
        match decode::<T>(value) {
            Ok(part) => Some(part),
            Err(error) => {
                self.errors.push(under(path, error));
                None
            }
        }
    }

    /// Records a part whose form decodes but whose content is refused.
    pub fn refuse(&mut self, path: &str, problem: &str) {
        self.errors.push(FieldError {
            path: path.to_owned(),
            source: serde::de::Error::custom(problem),
        });
    }

    /// The parts of the wrong form, in the order they were read.
    #[must_use]
    pub fn finish(self) -> Vec<FieldError> {
        self.errors
    }
}

/// `error` (found in the part at `path`) with its path from the object's root.
fn under(path: &[&str], error: FieldError) -> FieldError {
    let root = path.join(".");
    let path = match error.path.as_str() {
        "." | "" => root,
        rest if rest.starts_with('[') => format!("{root}{rest}"),
        rest => format!("{root}.{rest}"),
    };
    FieldError {
        path,
        source: error.source,
    }
}

/// What the block allocators' node manager reads of one CiliumNode.
#[derive(Debug, Default)]
pub struct NodeView {
    /// `metadata.name`.
    pub name: String,
    /// Annotated `ipam.cilium.io/ignore: "true"`.
    pub ignored: bool,
    /// `spec.ipam.podCIDRs` as written (the allocator reports a CIDR that does not parse with
    /// Cilium's text).
    pub pod_cidrs: Vec<String>,
    /// `spec.ipam.pools.requested`.
    pub requested: Vec<Requested>,
    /// `spec.ipam.pools.allocated`, each entry's CIDRs as written.
    pub allocated: Vec<Allocated>,
    /// `status.ipam.operator-status.error`.
    pub operator_error: String,
    /// Entries of `status.ipam.used`.
    pub used: usize,
    /// The `spec` fields the allocators need that have the wrong form (each with its path).
    pub invalid: Vec<FieldError>,
}

/// A `pool` name of a `spec.ipam.pools` entry (checked before the entry is decoded, so that a
/// missing name is reported at `….pool`).
#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    pool: Option<String>,
}

/// The entries of the list at `path` whose `pool` is named, as `T`; the others are refused.
fn named_entries<T: DeserializeOwned>(read: &mut NodeRead<'_>, path: &[&str]) -> Vec<T> {
    let entries: Vec<Value> = read.part(path);
    let field = path.join(".");
    let mut parts = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let named = decode::<Named>(entry).ok().and_then(|n| n.pool);
        if named.is_none_or(|p| p.is_empty()) {
            read.refuse(
                &format!("{field}[{i}].pool"),
                "missing; name the CiliumPodIPPool",
            );
            continue;
        }
        match decode::<T>(entry) {
            Ok(part) => parts.push(part),
            Err(error) => read.errors.push(under(&[&format!("{field}[{i}]")], error)),
        }
    }
    parts
}

impl NodeView {
    /// Reads a CiliumNode object (as the API server sent it).
    #[must_use]
    pub fn from_json(doc: &Value) -> Self {
        let mut read = NodeRead::new(doc);
        let pod_cidrs = read.part(&["spec", "ipam", "podCIDRs"]);
        let requested =
            named_entries::<IpamPoolRequest>(&mut read, &["spec", "ipam", "pools", "requested"])
                .into_iter()
                .map(|r| Requested {
                    pool: r.pool,
                    ipv4_addrs: u64::from(r.needed.ipv4_addrs),
                    ipv6_addrs: u64::from(r.needed.ipv6_addrs),
                })
                .collect();
        let allocated =
            named_entries::<IpamPoolAllocation>(&mut read, &["spec", "ipam", "pools", "allocated"])
                .into_iter()
                .map(|a| Allocated {
                    pool: a.pool,
                    cidrs: a.cidrs.iter().map(ToString::to_string).collect(),
                    allow_first_ip: a.allow_first_ip,
                    allow_last_ip: a.allow_last_ip,
                })
                .collect();
        let name = read.name().to_owned();
        let ignored = read.ignored();
        let invalid = read.finish();
        // The status is the operator's own (and the agent's) to write: a part of the wrong
        // form reads as empty and is replaced by the next write, without failing the node.
        let mut status = NodeRead::new(doc);
        let operator_error = status.part(&["status", "ipam", "operator-status", "error"]);
        let used = status
            .part::<serde_json::Map<String, Value>>(&["status", "ipam", "used"])
            .len();
        Self {
            name,
            ignored,
            pod_cidrs,
            requested,
            allocated,
            operator_error,
            used,
            invalid,
        }
    }

    /// Reads a typed CiliumNode (a store's document) the same way.
    #[must_use]
    pub fn from_node(node: &CiliumNode) -> Self {
        Self::from_json(&serde_json::to_value(node).unwrap_or_default())
    }

    /// The error text for `operator-status` when fields have the wrong form: each
    /// `path: problem`, joined by `; `.
    #[must_use]
    pub fn invalid_text(&self) -> Option<String> {
        (!self.invalid.is_empty()).then(|| {
            let texts: Vec<String> = (self.invalid.iter())
                .map(|e| format!("{}: {}", e.path, e.source))
                .collect();
            texts.join("; ")
        })
    }
}

#[cfg(test)]
mod tests;

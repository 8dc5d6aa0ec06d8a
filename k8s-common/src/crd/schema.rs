//! JSON Schema stand-ins for the wire fields whose Rust type says something else than the
//! CustomResourceDefinition should: `metadata` (the API server owns its schema), opaque
//! `serde_json::Value` parts (kept whole, any fields allowed) and CIDR strings (`format: cidr`,
//! as upstream's CRDs declare them). Used through `#[schemars(schema_with = "…")]` on the crd
//! types; turning the derived schemas into a CRD (inlining, structural rewrites) is the CRD
//! generator's job (`weft-tests`), not this module's. No kube, no IO.

use schemars::{Schema, SchemaGenerator, json_schema};

/// `metadata` of a custom resource: just `type: object`. Kubernetes rejects any other schema
/// under `metadata` (it validates object metadata itself).
pub(crate) fn object_meta(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

/// An object kept opaque (`serde_json::Value`): any fields, all preserved by the API server.
pub(crate) fn opaque_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A list of CIDR strings (`10.0.0.0/24`, `fd00::/96`), as Cilium's `format: cidr` lists.
pub(crate) fn cidr_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"type": "string", "format": "cidr"}
    })
}

//! Turns a schemars root schema of a crd type into a Kubernetes structural `openAPIV3Schema`:
//! every `$ref` inlined, no `$schema`/`$defs`/`definitions`, one `type` per node, `Option`'s
//! `null` branch dropped (weft never writes `null`; absent means unset), documented unit enums
//! (`oneOf` of `const`s) folded into `enum`, a flattened `Extra` (`additionalProperties: true`
//! next to `properties`) turned into `x-kubernetes-preserve-unknown-fields: true`, serde
//! defaults dropped (the API server must not default what Cilium does not), and integer formats
//! other than Kubernetes' `int32`/`int64` dropped (`uint8`… are schemars-isms; the bounds stay),
//! and the root's `metadata` reduced to `type: object` (the only form Kubernetes accepts).
//! Anything else without a structural form is an error naming its path; nothing here guesses.

use serde_json::{Map, Value};

/// Why a schema has no structural form.
#[derive(Debug, thiserror::Error)]
pub enum StructuralError {
    /// A construct Kubernetes structural schemas cannot express (`anyOf`, `allOf`, `not`, a
    /// boolean schema, …).
    #[error("{path}: {what} has no structural form")]
    Unsupported {
        /// Where, as `.spec.ipam.pools.allocated[].cidrs[]`.
        path: String,
        /// The offending construct.
        what: String,
    },
    /// A `$ref` names no definition of the root schema (or refers to itself, recursively).
    #[error("{path}: cannot inline $ref {reference:?}")]
    Reference {
        /// Where.
        path: String,
        /// The reference.
        reference: String,
    },
    /// A node has no single `type` and does not preserve unknown fields either.
    #[error("{path}: no single `type` (got {found})")]
    Type {
        /// Where.
        path: String,
        /// What `type` held.
        found: String,
    },
}

/// Formats Kubernetes knows for integers; other integer formats are dropped.
const INTEGER_FORMATS: [&str; 2] = ["int32", "int64"];
/// How deeply `$ref`s may nest before they count as recursive.
const MAX_DEPTH: usize = 64;

/// The structural form of `root` (a schemars root schema, as JSON).
///
/// # Errors
/// [`StructuralError`] naming the first node that has no structural form.
pub fn structural(mut root: Value) -> Result<Value, StructuralError> {
    let mut definitions = Map::new();
    if let Some(object) = root.as_object_mut() {
        object.remove("$schema");
        // The root title is the Rust type name, which says nothing to a kubectl user.
        object.remove("title");
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(defs)) = object.remove(key) {
                definitions.extend(defs);
            }
        }
    }
    let rewriter = Rewriter { definitions };
    let mut schema = rewriter.node(root, "", 0)?;
    // Kubernetes owns the schema of object metadata and rejects anything else under it, even a
    // description.
    if let Some(metadata) = schema
        .get_mut("properties")
        .and_then(|properties| properties.get_mut("metadata"))
    {
        *metadata = serde_json::json!({"type": "object"});
    }
    Ok(schema)
}

struct Rewriter {
    definitions: Map<String, Value>,
}

impl Rewriter {
    fn node(&self, schema: Value, path: &str, depth: usize) -> Result<Value, StructuralError> {
        let Value::Object(mut object) = schema else {
            return Err(unsupported(path, format!("the boolean schema {schema}")));
        };
        drop_null_branch(&mut object, path)?;
        if let Some(reference) = object.remove("$ref") {
            // Siblings of `$ref` (a field's own description) win over the definition's.
            let mut merged = self.resolve(&reference, path, depth)?;
            if object.contains_key("description") {
                merged.remove("title");
            }
            merged.extend(object);
            return self.node(Value::Object(merged), path, depth + 1);
        }
        fold_const_one_of(&mut object);
        object.remove("default");
        object.remove("examples");
        if let Some(Value::String(title)) = object.remove("title") {
            merge_title(&mut object, title);
        }
        if object.get("additionalProperties") == Some(&Value::Bool(true)) {
            object.remove("additionalProperties");
            object.insert(
                "x-kubernetes-preserve-unknown-fields".to_owned(),
                Value::Bool(true),
            );
        }
        for key in ["anyOf", "oneOf", "allOf", "not", "const", "$ref", "if"] {
            if object.contains_key(key) {
                return Err(unsupported(path, format!("`{key}`")));
            }
        }
        self.children(&mut object, path, depth)?;
        check_type(&mut object, path)?;
        Ok(Value::Object(object))
    }

    fn children(
        &self,
        object: &mut Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<(), StructuralError> {
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                let child = format!("{path}.{name}");
                *property = self.node(property.take(), &child, depth)?;
            }
        }
        if let Some(items) = object.get_mut("items") {
            *items = self.node(items.take(), &format!("{path}[]"), depth)?;
        }
        if let Some(values) = object.get_mut("additionalProperties") {
            *values = self.node(values.take(), &format!("{path}{{}}"), depth)?;
        }
        Ok(())
    }

    fn resolve(
        &self,
        reference: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Map<String, Value>, StructuralError> {
        let text = reference.as_str().unwrap_or_default();
        let name = text.rsplit('/').next().unwrap_or_default();
        match self.definitions.get(name) {
            Some(Value::Object(target)) if depth < MAX_DEPTH && text.starts_with('#') => {
                Ok(target.clone())
            }
            _ => Err(StructuralError::Reference {
                path: display(path),
                reference: text.to_owned(),
            }),
        }
    }
}

fn unsupported(path: &str, what: String) -> StructuralError {
    StructuralError::Unsupported {
        path: display(path),
        what,
    }
}

/// `""` (the root) as `(root)`.
fn display(path: &str) -> String {
    if path.is_empty() {
        "(root)".to_owned()
    } else {
        path.to_owned()
    }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type") == Some(&Value::from("null"))
        || schema.get("const") == Some(&Value::Null)
        || schema.get("enum") == Some(&Value::Array(vec![Value::Null]))
}

/// `type: [t, "null"]` → `type: t`; `anyOf: [X, null]` → X merged in; `null` out of `enum`.
fn drop_null_branch(object: &mut Map<String, Value>, path: &str) -> Result<(), StructuralError> {
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [single] = types.as_slice() {
            let single = single.clone();
            object.insert("type".to_owned(), single);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    let Some(Value::Array(branches)) = object.get("anyOf") else {
        return Ok(());
    };
    let kept: Vec<&Value> = branches.iter().filter(|b| !is_null_schema(b)).collect();
    if kept.len() == branches.len() {
        return Ok(());
    }
    let [Value::Object(branch)] = kept.as_slice() else {
        return Err(unsupported(
            path,
            "`anyOf` with several non-null branches".to_owned(),
        ));
    };
    let branch = branch.clone();
    object.remove("anyOf");
    for (key, value) in branch {
        object.entry(key).or_insert(value);
    }
    Ok(())
}

/// A documented unit enum: `oneOf: [{const: "a", description}, …]` (or `enum` branches) →
/// `type: string, enum: ["a", …]`. Other `oneOf`s are left for the caller to reject.
fn fold_const_one_of(object: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = object.get("oneOf") else {
        return;
    };
    let mut values = Vec::new();
    for branch in branches {
        match (branch.get("const"), branch.get("enum")) {
            (Some(Value::String(value)), None) => values.push(Value::from(value.as_str())),
            (None, Some(Value::Array(list))) if list.iter().all(Value::is_string) => {
                values.extend(list.iter().cloned());
            }
            _ => return,
        }
    }
    object.remove("oneOf");
    object.insert("type".to_owned(), Value::from("string"));
    object.insert("enum".to_owned(), Value::Array(values));
}

/// A doc comment schemars split into `title` and `description`, joined again.
fn merge_title(object: &mut Map<String, Value>, title: String) {
    let description = match object.remove("description") {
        Some(Value::String(rest)) if !rest.is_empty() => format!("{title}\n\n{rest}"),
        _ => title,
    };
    object.insert("description".to_owned(), Value::from(description));
}

fn check_type(object: &mut Map<String, Value>, path: &str) -> Result<(), StructuralError> {
    match object.get("type") {
        Some(Value::String(kind)) => {
            if kind == "integer"
                && object
                    .get("format")
                    .and_then(Value::as_str)
                    .is_some_and(|format| !INTEGER_FORMATS.contains(&format))
            {
                object.remove("format");
            }
            Ok(())
        }
        None if object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) => {
            Ok(())
        }
        found => Err(StructuralError::Type {
            path: display(path),
            found: found.map_or_else(|| "nothing".to_owned(), Value::to_string),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rewrites_what_schemars_emits() {
        let root = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Thing",
            "type": "object",
            "properties": {
                "sub": {"$ref": "#/$defs/Sub", "description": "the field's own words"},
                "maybe": {"anyOf": [{"$ref": "#/$defs/Sub"}, {"type": "null"}]},
                "count": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                "big": {"type": "integer", "format": "int64", "default": 0},
                "state": {"oneOf": [
                    {"const": "on", "description": "On."},
                    {"type": "string", "enum": ["off"]}
                ]}
            },
            "additionalProperties": true,
            "$defs": {"Sub": {
                "title": "A sub.",
                "description": "More words.",
                "type": "object",
                "properties": {"n": {"type": "string"}}
            }}
        });
        let want = json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "sub": {
                    "description": "the field's own words",
                    "type": "object",
                    "properties": {"n": {"type": "string"}}
                },
                "maybe": {
                    "description": "A sub.\n\nMore words.",
                    "type": "object",
                    "properties": {"n": {"type": "string"}}
                },
                "count": {"type": "integer", "minimum": 0},
                "big": {"type": "integer", "format": "int64"},
                "state": {"type": "string", "enum": ["on", "off"]}
            }
        });
        assert_eq!(structural(root).expect("structural"), want);
    }

    #[test]
    fn refuses_what_has_no_structural_form() {
        let cases = [
            (
                json!({"type": "object", "properties": {"a": {"anyOf": [
                    {"type": "string"}, {"type": "integer"}
                ]}}}),
                ".a: `anyOf` has no structural form",
            ),
            (
                json!({"type": "object", "properties": {"a": true}}),
                ".a: the boolean schema true has no structural form",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Gone"}}}),
                ".a: cannot inline $ref \"#/$defs/Gone\"",
            ),
            (
                json!({"type": "object", "properties": {"a": {"items": {"type": "string"}}}}),
                ".a: no single `type` (got nothing)",
            ),
            (
                json!({"$ref": "#/$defs/Loop", "$defs": {"Loop": {
                    "type": "object", "properties": {"next": {"$ref": "#/$defs/Loop"}}
                }}}),
                "cannot inline $ref \"#/$defs/Loop\"",
            ),
        ];
        for (schema, want) in cases {
            let error = structural(schema).expect_err(want).to_string();
            assert!(
                error.ends_with(want),
                "{error:?} does not end with {want:?}"
            );
        }
    }
}

//! The patch formats the emulator applies: JSON merge patch (RFC 7386,
//! `application/merge-patch+json`) and JSON patch (RFC 6902, `application/json-patch+json`,
//! with `add`, `remove`, `replace`, `move`, `copy`, `test`). Pure functions over
//! `serde_json::Value`; strategic merge patch and server-side apply are not modelled (the server
//! answers 415 for them).

use serde_json::Value;

/// A JSON patch that cannot be applied (the server answers 422, or 400 for a malformed body).
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch document is not a JSON patch (not an array of operations).
    #[error("invalid JSON patch: {reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },
    /// A path names nothing (or an array index out of range).
    #[error("{op} operation does not apply: doc is missing path: {path:?}")]
    MissingPath {
        /// The operation.
        op: String,
        /// Its path.
        path: String,
    },
    /// A `test` operation saw another value.
    #[error("testing value {path:?} failed: test failed")]
    TestFailed {
        /// The path tested.
        path: String,
    },
}

/// Apply a JSON merge patch to `target` in place (RFC 7386: `null` deletes, objects merge,
/// anything else replaces).
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let map = target.as_object_mut().expect("just made an object");
    for (key, value) in patch {
        if value.is_null() {
            map.remove(key);
        } else {
            merge(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Apply a JSON patch (an array of operations) to a copy of `target`.
///
/// # Errors
/// A malformed patch, a path that names nothing, or a failed `test`.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = patch.as_array().ok_or_else(|| PatchError::Malformed {
        reason: "expected an array of operations".to_owned(),
    })?;
    let mut doc = target.clone();
    for op in ops {
        apply_op(&mut doc, op)?;
    }
    Ok(doc)
}

fn str_field<'a>(op: &'a Value, field: &str) -> Result<&'a str, PatchError> {
    op[field].as_str().ok_or_else(|| PatchError::Malformed {
        reason: format!("operation {op} has no string {field:?}"),
    })
}

fn apply_op(doc: &mut Value, op: &Value) -> Result<(), PatchError> {
    let name = str_field(op, "op")?;
    let path = str_field(op, "path")?;
    let missing = || PatchError::MissingPath {
        op: name.to_owned(),
        path: path.to_owned(),
    };
    let value = || {
        op.get("value")
            .cloned()
            .ok_or_else(|| PatchError::Malformed {
                reason: format!("{name} operation has no value"),
            })
    };
    match name {
        "add" => add(doc, path, value()?).ok_or_else(missing),
        "remove" => remove(doc, path).map(drop).ok_or_else(missing),
        "replace" => {
            let slot = doc.pointer_mut(path).ok_or_else(missing)?;
            *slot = value()?;
            Ok(())
        }
        "move" | "copy" => {
            let from = str_field(op, "from")?;
            let moved = if name == "move" {
                remove(doc, from)
            } else {
                doc.pointer(from).cloned()
            };
            let moved = moved.ok_or_else(|| PatchError::MissingPath {
                op: name.to_owned(),
                path: from.to_owned(),
            })?;
            add(doc, path, moved).ok_or_else(missing)
        }
        "test" => {
            let expected = value()?;
            if doc.pointer(path) == Some(&expected) {
                Ok(())
            } else {
                Err(PatchError::TestFailed {
                    path: path.to_owned(),
                })
            }
        }
        other => Err(PatchError::Malformed {
            reason: format!("unknown operation {other:?}"),
        }),
    }
}

/// Split `/a/b/c` into the parent pointer `/a/b` and the unescaped last token `c`.
fn parent_and_key(path: &str) -> Option<(&str, String)> {
    let i = path.rfind('/')?;
    let key = path[i + 1..].replace("~1", "/").replace("~0", "~");
    Some((&path[..i], key))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Option<()> {
    if path.is_empty() {
        *doc = value;
        return Some(());
    }
    let (parent, key) = parent_and_key(path)?;
    match doc.pointer_mut(parent)? {
        Value::Object(map) => {
            map.insert(key, value);
        }
        Value::Array(items) => {
            let index = if key == "-" {
                items.len()
            } else {
                key.parse().ok()?
            };
            if index > items.len() {
                return None;
            }
            items.insert(index, value);
        }
        _ => return None,
    }
    Some(())
}

fn remove(doc: &mut Value, path: &str) -> Option<Value> {
    let (parent, key) = parent_and_key(path)?;
    match doc.pointer_mut(parent)? {
        Value::Object(map) => map.remove(&key),
        Value::Array(items) => {
            let index: usize = key.parse().ok()?;
            (index < items.len()).then(|| items.remove(index))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge(
            &mut doc,
            &json!({"a": "z", "c": {"f": null}, "l": [3], "n": {"x": 1}}),
        );
        assert_eq!(
            doc,
            json!({"a": "z", "c": {"d": "e"}, "l": [3], "n": {"x": 1}})
        );
    }

    #[test]
    fn json_patch_follows_rfc6902() {
        let doc = json!({"foo": ["bar", "baz"], "a/b": 1, "o": {"k": "v"}});
        let patch = json!([
            {"op": "add", "path": "/foo/1", "value": "qux"},
            {"op": "add", "path": "/foo/-", "value": "end"},
            {"op": "remove", "path": "/a~1b"},
            {"op": "replace", "path": "/o/k", "value": "w"},
            {"op": "copy", "from": "/o", "path": "/p"},
            {"op": "move", "from": "/o/k", "path": "/moved"},
            {"op": "test", "path": "/foo/0", "value": "bar"},
        ]);
        assert_eq!(
            json_patch(&doc, &patch).unwrap(),
            json!({"foo": ["bar", "qux", "baz", "end"], "o": {}, "p": {"k": "w"}, "moved": "w"})
        );
        let failing = json!([{"op": "test", "path": "/o/k", "value": "x"}]);
        assert!(matches!(
            json_patch(&doc, &failing),
            Err(PatchError::TestFailed { .. })
        ));
        let missing = json!([{"op": "replace", "path": "/nope/x", "value": 1}]);
        assert!(matches!(
            json_patch(&doc, &missing),
            Err(PatchError::MissingPath { .. })
        ));
        let bad = json!({"op": "add"});
        assert!(matches!(
            json_patch(&doc, &bad),
            Err(PatchError::Malformed { .. })
        ));
    }
}

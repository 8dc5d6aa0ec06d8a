//! Label and field selectors as list and watch take them (`?labelSelector=`, `?fieldSelector=`),
//! parsed the way `k8s.io/apimachinery/pkg/labels` and `pkg/fields` parse them: label
//! requirements `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`; field
//! requirements `path=v`, `path==v`, `path!=v` over the fields the resource supports (always
//! `metadata.name`, `metadata.namespace` when namespaced, and a per-type list such as pods'
//! `spec.nodeName`). Numeric label comparisons (`k>1`) are not modelled and are refused.

use serde_json::Value;

use super::resources::ResourceDef;

/// A selector that cannot be parsed or names a field the type does not support.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    /// The label selector does not parse.
    #[error("unable to parse requirement: {requirement:?}: {reason}")]
    Label {
        /// The offending requirement.
        requirement: String,
        /// Why.
        reason: &'static str,
    },
    /// The field selector does not parse.
    #[error("invalid field selector: {requirement:?}: {reason}")]
    Field {
        /// The offending requirement.
        requirement: String,
        /// Why.
        reason: &'static str,
    },
    /// The field is not selectable on this type.
    #[error("field label not supported: {field}")]
    UnsupportedField {
        /// The field path.
        field: String,
    },
}

#[derive(Clone, Debug)]
enum LabelOp {
    Exists,
    NotExists,
    In(Vec<String>),
    NotIn(Vec<String>),
}

#[derive(Clone, Debug)]
struct FieldReq {
    path: String,
    value: String,
    equal: bool,
}

/// A parsed label selector and field selector; the empty selector matches everything.
#[derive(Clone, Debug, Default)]
pub struct Selector {
    labels: Vec<(String, LabelOp)>,
    fields: Vec<FieldReq>,
}

impl Selector {
    /// Parse both selectors for objects of `def`.
    ///
    /// # Errors
    /// A requirement that does not parse, or a field `def` cannot be selected by.
    pub fn parse(
        label: Option<&str>,
        field: Option<&str>,
        def: &ResourceDef,
    ) -> Result<Self, SelectorError> {
        let mut selector = Self::default();
        for req in split_outside_parens(label.unwrap_or("")) {
            selector.labels.push(parse_label(req)?);
        }
        for req in split_escaped(field.unwrap_or("")) {
            let req = parse_field(&req)?;
            if !def.selectable(&req.path) {
                return Err(SelectorError::UnsupportedField { field: req.path });
            }
            selector.fields.push(req);
        }
        Ok(selector)
    }

    /// Whether `object` satisfies every requirement.
    #[must_use]
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let label_ok = self.labels.iter().all(|(key, op)| {
            let value = labels.get(key).and_then(Value::as_str);
            match op {
                LabelOp::Exists => value.is_some(),
                LabelOp::NotExists => value.is_none(),
                LabelOp::In(values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
                LabelOp::NotIn(values) => value.is_none_or(|v| values.iter().all(|x| x != v)),
            }
        });
        label_ok
            && self
                .fields
                .iter()
                .all(|f| (field_value(object, &f.path) == f.value) == f.equal)
    }
}

/// The string value of a dotted field path, as field selectors compare it (missing is `""`).
#[must_use]
pub fn field_value(object: &Value, path: &str) -> String {
    let value = path.split('.').fold(object, |v, key| &v[key]);
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn split_outside_parens(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0_i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_label_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 316
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_label(req: &str) -> Result<(String, LabelOp), SelectorError> {
    let err = |reason| SelectorError::Label {
        requirement: req.to_owned(),
        reason,
    };
    let key_ok = |k: &str| {
        if valid_label_part(k) {
            Ok(k.to_owned())
        } else {
            Err(err("invalid label key"))
        }
    };
    let value_ok = |v: &str| {
        let v = v.trim();
        if v.is_empty() || valid_label_part(v) {
            Ok(v.to_owned())
        } else {
            Err(err("invalid label value"))
        }
    };
    if let Some(key) = req.strip_prefix('!') {
        return Ok((key_ok(key.trim())?, LabelOp::NotExists));
    }
    if let Some((key, value)) = req.split_once("!=") {
        return Ok((key_ok(key.trim())?, LabelOp::NotIn(vec![value_ok(value)?])));
    }
    if let Some((key, value)) = req.split_once("==").or_else(|| req.split_once('=')) {
        return Ok((key_ok(key.trim())?, LabelOp::In(vec![value_ok(value)?])));
    }
    if req.contains(['<', '>']) {
        return Err(err("numeric comparisons are not modelled by the emulator"));
    }
    let words: Vec<&str> = req.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim_start();
        let (negate, list) = if let Some(list) = rest.strip_prefix("notin") {
            (true, list)
        } else if let Some(list) = rest.strip_prefix("in") {
            (false, list)
        } else {
            return Err(err("expected in or notin"));
        };
        let list = list
            .trim()
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(|| err("expected a parenthesised value list"))?;
        let values = list
            .split(',')
            .map(value_ok)
            .collect::<Result<Vec<_>, _>>()?;
        let op = if negate {
            LabelOp::NotIn(values)
        } else {
            LabelOp::In(values)
        };
        return Ok((key_ok(key)?, op));
    }
    Ok((key_ok(req)?, LabelOp::Exists))
}

/// Split on unescaped commas and unescape `\,`, `\=`, `\!`, `\\` in each part.
fn split_escaped(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                // Keep the escape so `=` and `!` inside values are not taken as operators.
                parts.last_mut().expect("non-empty").push('\\');
                if let Some(next) = chars.next() {
                    parts.last_mut().expect("non-empty").push(next);
                }
            }
            ',' => parts.push(String::new()),
            c => parts.last_mut().expect("non-empty").push(c),
        }
    }
    parts
        .into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// The byte index of the first unescaped occurrence of `op` in `s`.
fn find_unescaped(s: &str, op: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if s[i..].starts_with(op) {
            return Some(i);
        }
    }
    None
}

fn parse_field(req: &str) -> Result<FieldReq, SelectorError> {
    for (op, equal) in [("!=", false), ("==", true), ("=", true)] {
        if let Some(i) = find_unescaped(req, op) {
            let path = req[..i].trim();
            if path.is_empty() {
                break;
            }
            return Ok(FieldReq {
                path: unescape(path),
                value: unescape(req[i + op.len()..].trim()),
                equal,
            });
        }
    }
    Err(SelectorError::Field {
        requirement: req.to_owned(),
        reason: "expected path=value, path==value or path!=value",
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kube::resources::builtin;

    fn pods() -> ResourceDef {
        builtin().into_iter().find(|d| d.plural == "pods").unwrap()
    }

    #[test]
    fn labels_and_fields() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "x", "tier": "db"}},
                         "spec": {"nodeName": "n1"}});
        let m = |l: &str, f: &str| {
            Selector::parse(Some(l), Some(f), &pods())
                .unwrap()
                .matches(&pod)
        };
        assert!(m("", ""));
        assert!(m("app=x,tier in (db, web)", "spec.nodeName=n1"));
        assert!(m(
            "app,!missing,tier notin (web)",
            "metadata.namespace==ns,metadata.name!=b"
        ));
        assert!(!m("app!=x", ""));
        assert!(m("missing!=x", ""));
        assert!(!m("", "spec.nodeName=n2"));
        assert!(m("", "status.podIP="));
        assert!(Selector::parse(None, Some("spec.foo=1"), &pods()).is_err());
        assert!(Selector::parse(Some("a>1"), None, &pods()).is_err());
        assert!(Selector::parse(Some("a in b"), None, &pods()).is_err());
    }
}

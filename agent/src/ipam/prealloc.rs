//! Parsing of `--ipam-multi-pool-pre-allocation` (Cilium `pkg/command/map_string.go` for the
//! map syntax, `ParseMultiPoolPreAllocMap` for the values): `a=1,b=2` or a JSON object, empty
//! meaning `{<default pool>: 8}`. Only parsing lives here; the manager that applies the map is
//! in [`super::multipool`].

use std::{collections::BTreeMap, num::IntErrorKind};

use thiserror::Error;

/// Pre-allocation per pool name.
pub type PreAllocMap = BTreeMap<String, i32>;

/// The pre-allocation of the default pool when the flag is empty.
pub const DEFAULT_PRE_ALLOCATION: i32 = 8;

/// Errors of this module.
#[derive(Debug, Error)]
pub enum PreAllocError {
    /// The flag is JSON (starts with `{` or `[`) but not a valid object.
    #[error("unable to parse ipam-multi-pool-pre-allocation: {source}")]
    Json {
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A JSON value is neither a string nor a number.
    #[error(
        "unable to parse ipam-multi-pool-pre-allocation: value {value} of pool {pool:?} is not a string"
    )]
    JsonValue {
        /// The pool name.
        pool: String,
        /// The offending JSON value.
        value: serde_json::Value,
    },
    /// The flag is not of the form `key=value,key1=value1`.
    #[error(
        "unable to parse ipam-multi-pool-pre-allocation: '{input}' is not formatted as key=value,key1=value1"
    )]
    Format {
        /// The part that could not be split (the whole flag, or one `key=value` item).
        input: String,
    },
    /// A value is not a base-10 integer in the i32 range (Go `strconv.ParseInt(v, 10, 32)`).
    #[error(
        "invalid value for pool \"{pool}\": strconv.ParseInt: parsing {value:?}: {}",
        go_reason(source)
    )]
    InvalidValue {
        /// The pool name.
        pool: String,
        /// The value as given.
        value: String,
        /// Why it did not parse.
        #[source]
        source: std::num::ParseIntError,
    },
}

/// Go's wording for a `ParseInt` failure.
fn go_reason(err: &std::num::ParseIntError) -> &'static str {
    match err.kind() {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => "value out of range",
        _ => "invalid syntax",
    }
}

/// Parses the flag and its values; an empty result becomes `{default_pool: 8}`.
///
/// # Errors
/// Any [`PreAllocError`]: a malformed map, or a value that is not an i32.
pub fn parse_pre_allocation(flag: &str, default_pool: &str) -> Result<PreAllocMap, PreAllocError> {
    let raw = parse_string_map(flag)?;
    if raw.is_empty() {
        return Ok(BTreeMap::from([(
            default_pool.to_owned(),
            DEFAULT_PRE_ALLOCATION,
        )]));
    }
    parse_values(&raw)
}

/// Parses each value as a base-10 i32, in pool-name order (the first bad one is reported).
///
/// # Errors
/// [`PreAllocError::InvalidValue`].
pub fn parse_values(raw: &BTreeMap<String, String>) -> Result<PreAllocMap, PreAllocError> {
    raw.iter()
        .map(|(pool, value)| {
            value
                .parse::<i32>()
                .map(|n| (pool.clone(), n))
                .map_err(|source| PreAllocError::InvalidValue {
                    pool: pool.clone(),
                    value: value.clone(),
                    source,
                })
        })
        .collect()
}

/// The string map of the flag: empty, a JSON object (string or number values), or
/// `k=v,k1=v1` where a `,` that is not followed by another `key=` stays in the value.
/// Keys and values of the `k=v` form are trimmed of spaces.
///
/// # Errors
/// [`PreAllocError::Json`], [`PreAllocError::JsonValue`] or [`PreAllocError::Format`].
pub fn parse_string_map(flag: &str) -> Result<BTreeMap<String, String>, PreAllocError> {
    if flag.is_empty() {
        return Ok(BTreeMap::new());
    }
    if flag.starts_with(['{', '[']) {
        return parse_json(flag);
    }
    let mut items: Vec<String> = Vec::new();
    for part in flag.split(',') {
        match items.last_mut() {
            Some(last) if !part.contains('=') => {
                last.push(',');
                last.push_str(part);
            }
            _ => items.push(part.to_owned()),
        }
    }
    if flag.matches('=').count() != items.len() {
        return Err(PreAllocError::Format {
            input: flag.to_owned(),
        });
    }
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((key, value)) => Ok((
                key.trim_matches(' ').to_owned(),
                value.trim_matches(' ').to_owned(),
            )),
            None => Err(PreAllocError::Format {
                input: item.clone(),
            }),
        })
        .collect()
}

fn parse_json(flag: &str) -> Result<BTreeMap<String, String>, PreAllocError> {
    let object: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(flag).map_err(|source| PreAllocError::Json { source })?;
    object
        .into_iter()
        .map(|(pool, value)| match value {
            serde_json::Value::String(s) => Ok((pool, s)),
            serde_json::Value::Number(n) => Ok((pool, n.to_string())),
            value => Err(PreAllocError::JsonValue { pool, value }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, i32)]) -> PreAllocMap {
        entries.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn accepted_forms() {
        let cases: &[(&str, &str, PreAllocMap)] = &[
            ("", "default", map(&[("default", 8)])),
            ("", "dc1-pool", map(&[("dc1-pool", 8)])),
            ("{}", "default", map(&[("default", 8)])),
            ("a=1,b=2", "default", map(&[("a", 1), ("b", 2)])),
            (" a = 1 , b=2 ", "default", map(&[("a", 1), ("b", 2)])),
            ("mars=16", "default", map(&[("mars", 16)])),
            ("a=-1,b=+3", "default", map(&[("a", -1), ("b", 3)])),
            (
                r#"{"a":"1","b":"2"}"#,
                "default",
                map(&[("a", 1), ("b", 2)]),
            ),
            (
                r#"{"a":1,"default":0}"#,
                "x",
                map(&[("a", 1), ("default", 0)]),
            ),
            ("a=2147483647", "default", map(&[("a", i32::MAX)])),
        ];
        for (flag, default_pool, want) in cases {
            let got = parse_pre_allocation(flag, default_pool).unwrap();
            assert_eq!(&got, want, "{flag}");
        }
    }

    #[test]
    fn error_texts() {
        let cases = [
            (
                "a=x",
                "invalid value for pool \"a\": strconv.ParseInt: parsing \"x\": invalid syntax",
            ),
            (
                "a=",
                "invalid value for pool \"a\": strconv.ParseInt: parsing \"\": invalid syntax",
            ),
            (
                "a=1,2",
                "invalid value for pool \"a\": strconv.ParseInt: parsing \"1,2\": invalid syntax",
            ),
            (
                "a=2147483648",
                "invalid value for pool \"a\": strconv.ParseInt: parsing \"2147483648\": value out of range",
            ),
            (
                r#"{"a":1.5}"#,
                "invalid value for pool \"a\": strconv.ParseInt: parsing \"1.5\": invalid syntax",
            ),
            (
                "a",
                "unable to parse ipam-multi-pool-pre-allocation: 'a' is not formatted as key=value,key1=value1",
            ),
            (
                "a=1=2",
                "unable to parse ipam-multi-pool-pre-allocation: 'a=1=2' is not formatted as key=value,key1=value1",
            ),
            (
                r#"{"a":true}"#,
                "unable to parse ipam-multi-pool-pre-allocation: value true of pool \"a\" is not a string",
            ),
        ];
        for (flag, want) in cases {
            let err = parse_pre_allocation(flag, "default").unwrap_err();
            assert_eq!(err.to_string(), want, "{flag}");
        }
        for flag in ["{", "[1]", r#"{"a":"1""#] {
            let err = parse_pre_allocation(flag, "default").unwrap_err();
            assert!(matches!(err, PreAllocError::Json { .. }), "{flag}");
            assert!(
                err.to_string()
                    .starts_with("unable to parse ipam-multi-pool-pre-allocation: "),
                "{flag}"
            );
        }
    }
}

//! Object metadata the emulated server owns: RFC 3339 timestamps, uids, `generateName`
//! suffixes, name validation (DNS-1123 subdomain), and the checks every write makes on `kind`,
//! `apiVersion`, name and namespace. Pure helpers over `serde_json::Value`; no store state.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::{resources::ResourceDef, status::ApiError};

/// Now as RFC 3339 in UTC with second precision (`2026-01-02T03:04:05Z`), as metav1.Time is.
#[must_use]
pub fn now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Seconds since the epoch as RFC 3339 (civil-from-days, proleptic Gregorian).
#[must_use]
pub fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A version-4-shaped uid from a per-emulator salt and a sequence number.
#[must_use]
pub fn uid(salt: u64, seq: u64) -> String {
    let hi = salt ^ seq.rotate_left(32);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xfff,
        (seq >> 48) & 0xfff,
        seq & 0xffff_ffff_ffff
    )
}

/// Five characters for `generateName`, from `seq` (lowercase consonants and digits, as the
/// real server's alphabet).
#[must_use]
pub fn name_suffix(salt: u64, seq: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = salt
        .wrapping_mul(31)
        .wrapping_add(seq.wrapping_mul(0x9e37_79b9));
    (0..5)
        .map(|_| {
            let c = ALPHABET[usize::try_from(n % 27).unwrap_or(0)];
            n /= 27;
            char::from(c)
        })
        .collect()
}

/// A DNS-1123 subdomain: lowercase alphanumerics, `-` and `.`, alphanumeric at both ends,
/// at most 253 characters.
#[must_use]
pub fn valid_name(name: &str) -> bool {
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    name.len() <= 253
        && ends_ok(name.chars().next())
        && ends_ok(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

/// `metadata` of `object`, created if missing.
pub fn metadata(object: &mut Value) -> &mut Map<String, Value> {
    if !object["metadata"].is_object() {
        object["metadata"] = Value::Object(Map::new());
    }
    object["metadata"]
        .as_object_mut()
        .expect("just made an object")
}

/// A string field of `metadata` ("" when absent).
#[must_use]
pub fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or("")
}

/// Check `kind` and `apiVersion` of a body against `def` (filling them in when absent), and
/// that it is an object.
///
/// # Errors
/// BadRequest when the body is not an object or names another type.
pub fn check_type(def: &ResourceDef, body: &mut Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::BadRequest {
            message: "the body of the request must be a JSON object".to_owned(),
        });
    }
    let kind = body["kind"].as_str().unwrap_or(&def.kind).to_owned();
    let api_version = body["apiVersion"]
        .as_str()
        .map_or_else(|| def.storage_api_version(), str::to_owned);
    let version_ok = def
        .versions
        .iter()
        .any(|v| def.api_version(v) == api_version);
    if kind != def.kind || !version_ok {
        return Err(ApiError::BadRequest {
            message: format!(
                "the API version in the data ({api_version}) and kind ({kind}) do not match \
                 the resource {} ({})",
                def.qualified(),
                def.kind
            ),
        });
    }
    body["kind"] = Value::String(def.kind.clone());
    body["apiVersion"] = Value::String(def.storage_api_version());
    Ok(())
}

/// Check that the body's name and namespace agree with the URL's.
///
/// # Errors
/// BadRequest on a mismatch, as the real server words it.
pub fn check_identity(body: &Value, name: &str, namespace: Option<&str>) -> Result<(), ApiError> {
    let body_name = meta_str(body, "name");
    if body_name != name {
        return Err(ApiError::BadRequest {
            message: format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            ),
        });
    }
    let body_ns = meta_str(body, "namespace");
    if let Some(ns) = namespace
        && !body_ns.is_empty()
        && body_ns != ns
    {
        return Err(ApiError::BadRequest {
            message: "the namespace of the provided object does not match the namespace sent on \
                      the request"
                .to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_names() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_767_323_045), "2026-01-02T03:04:05Z");
        assert!(valid_name("node-1.example"));
        assert!(!valid_name("Node"));
        assert!(!valid_name("-a"));
        assert_ne!(uid(1, 1), uid(1, 2));
        assert_eq!(name_suffix(7, 3).len(), 5);
    }
}

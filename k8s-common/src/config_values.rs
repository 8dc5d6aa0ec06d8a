//! cilium-config values as Cilium's programs read them: a mounted ConfigMap directory of one
//! file per key, Go-style booleans (`true`, `1`, `yes`, …) and Go durations (`15s`, `1m30s`).
//! Shared by the agent's and the operator's configuration; which keys mean what is theirs.

use std::{collections::BTreeMap, io, path::Path, time::Duration};

/// A key file of a config directory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading --config-dir {}", path.display())]
pub struct ConfigDirError {
    /// The directory or file.
    pub path: std::path::PathBuf,
    /// What went wrong.
    #[source]
    pub source: io::Error,
}

/// Reads a mounted ConfigMap: every plain file is a key, its trimmed content the value
/// (hidden entries such as `..data` links are skipped).
///
/// # Errors
/// The directory or one of its files cannot be read.
pub fn read_config_dir(dir: &Path) -> Result<BTreeMap<String, String>, ConfigDirError> {
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ConfigDirError { path, source }
    };
    let mut map = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(failed(dir))? {
        let path = entry.map_err(failed(dir))?.path();
        let Some(key) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if key.starts_with('.') || !path.is_file() {
            continue;
        }
        let value = std::fs::read_to_string(&path).map_err(failed(&path))?;
        map.insert(key.to_owned(), value.trim().to_owned());
    }
    Ok(map)
}

/// A Go-style boolean (`true`/`false`, `1`/`0`, `yes`/`no`, any case).
#[must_use]
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "t" => Some(true),
        "false" | "0" | "no" | "f" => Some(false),
        _ => None,
    }
}

/// The longest duration Go accepts (an `int64` of nanoseconds, about 292 years); longer
/// values are refused, which also keeps every timer built from a key free of overflow.
pub const MAX_DURATION: Duration = Duration::from_nanos(i64::MAX.unsigned_abs());

/// A Go duration: `15s`, `500ms`, `1m`, `1h`, `1m30s`, `0`. `None` for anything else,
/// including one longer than [`MAX_DURATION`] (the caller names the key and value).
#[must_use]
pub fn parse_duration(v: &str) -> Option<Duration> {
    if v == "0" {
        return Some(Duration::ZERO);
    }
    if v.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = v;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total = total.checked_add(Duration::try_from_secs_f64(number * scale).ok()?)?;
        rest = &rest[unit_len..];
    }
    (total <= MAX_DURATION).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_values() {
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("15"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_bool("FALSE"), Some(false));
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn overflowing_sum_is_refused_not_a_panic() {
        assert_eq!(
            parse_duration("10000000000000000000s10000000000000000000s"),
            None
        );
        assert_eq!(parse_duration("1e30s"), None);
        assert_eq!(
            parse_duration("2562047h"),
            Some(Duration::from_hours(2_562_047))
        );
        assert_eq!(parse_duration("2562048h"), None);
    }

    #[test]
    fn config_dir_skips_hidden_entries() {
        let dir = std::env::temp_dir().join(format!("weft-k8s-cfg-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("..2026_01_01")).expect("mkdir");
        std::fs::write(dir.join("ipam"), "multi-pool\n").expect("write");
        std::fs::write(dir.join(".hidden"), "x").expect("write");
        let map = read_config_dir(&dir).expect("reads");
        assert_eq!(map.len(), 1);
        assert_eq!(map["ipam"], "multi-pool");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert!(read_config_dir(&dir).is_err());
    }
}
